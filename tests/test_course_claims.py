"""``python -m greenlab.course check`` refuses two claims the method forbids: a validation figure
labelled "test accuracy", and a break-even or saving stated without a verdict."""

from pathlib import Path

import pytest

from greenlab.course import build, claims, notebook_format as fmt
from greenlab.course.notebook_format import code, md

REPO = Path(__file__).resolve().parent.parent


def problems(*cells):
    return claims.notebook_claim_problems({"cells": list(cells)}, "nb")


# --- "test accuracy" for a validation figure ---------------------------------------------------


@pytest.mark.parametrize("cell", [
    code('fig, ax = plt.subplots()\n'
         'ax.plot([h["step"] for h in run.history], [h["accuracy"] for h in run.history])\n'
         'ax.set_ylabel("test accuracy")'),
    code('ax.axhline(target)\nax.plot(xs, ys)\nax.set_ylabel("Test accuracy")'),
    code('print(f"target {target:.0%} test accuracy reached after {run.joules_to_target:.3g} J")'),
    code('print(f"validation figure: test accuracy {run.val_accuracy:.1%}")'),
    code('print(f"test acc: {run.best_accuracy:.1%}")'),
    md("Three runs, each stopping when it reaches the same test accuracy."),
    md("Train to a test accuracy target of 85%, then compare the energy."),
    md("Early stopping watches the test accuracy and stops."),
])
def test_a_validation_figure_called_test_accuracy_is_refused(cell):
    found = problems(cell)
    assert len(found) == 1 and "validation accuracy" in found[0] and found[0].startswith("nb: cell 0")


@pytest.mark.parametrize("cell", [
    code('ax.plot([h["step"] for h in run.history], [h["accuracy"] for h in run.history])\n'
         'ax.set_ylabel("validation accuracy")'),
    code('ax.bar(names, [r[1] for r in rows])\nax.set_ylabel("test accuracy")'),  # rows from the test split
    code('ax.bar(names, [run.final_accuracy for run in runs])\nax.set_ylabel("test accuracy")'),
    code('print(f"reached {target:.0%} validation accuracy after {run.joules_to_target:.4g} J, then a final '
         'test accuracy of {run.final_accuracy:.1%}")'),
    code('def test_accuracy(model):\n    return gl.train.evaluate(model, data.test)\n'
         'print(f"dense: test accuracy {test_accuracy(dense):.1%}")'),
    md("**val acc** first reached the target; **test acc** is the final model on the test split."),
    md("The test accuracy is read once, at the end, on the held-out test split."),
])
def test_honest_accuracy_labels_pass(cell):
    assert problems(cell) == []


# --- break-evens and savings without a verdict ---------------------------------------------------


@pytest.mark.parametrize("cell", [
    code('n = gl.compress.break_even_inferences(once, before, after)\n'
         'print(f"compression pays for itself after about {n:,} predictions")'),
    code('print(f"break-even after {trainings} trainings")'),
    code('print(f"early stopping saved {1 - early.joules / full.joules:.0%} of the energy")'),
    code('print("the green recipe saves " + str(round(saving)) + " J")'),
    code('text = f"the search pays off after {n} retrainings"'),
    code('for name in names:\n    print(f"{name} saves {saved[name]:.3g} J per run")'),
])
def test_a_break_even_or_saving_without_a_verdict_is_refused(cell):
    found = problems(cell)
    assert len(found) == 1 and "without a verdict" in found[0]


@pytest.mark.parametrize("cell", [
    code('if cmp.paired("green").detectable:\n'
         '    print(f"green saves {saving:.3g} J per run; break-even after {n} runs")\n'
         'else:\n'
         '    print(cmp.verdict("green"))'),
    code('print(f"break-even after {n} runs" if speed.detectable else "no break-even to report")'),
    code('print(f"{cmp.verdict(\'b\')}; so b saves {saved:.3g} J per run")'),
    code('print(f"no detectable difference, so there is no break-even to report")'),
    code('print(f"int8 saves 3 of every 4 bytes of the weights: {ok}")'),  # counted, not measured
    code('print(f"best window saved {gl.format_mass(g)} CO2")  '
         '# not a measured difference: arithmetic on the cited intensity table'),
    code('# not a measured difference: arithmetic on the cited intensity table\n'
         'print(f"best window saved {gl.format_mass(g)} CO2")'),  # the mark may head the statement
    code('gl.profiling.save_checkpoint(model, path)\nprint("saved the checkpoint")'),
    md("A break-even exists only when the per-step saving is detectable."),
])
def test_savings_that_follow_a_verdict_or_are_counted_pass(cell):
    assert problems(cell) == []


def test_a_mark_without_a_reason_does_not_excuse_a_saving():
    assert problems(code('print(f"saves {j:.3g} J")  # not a measured difference:'))


def test_a_mark_excuses_only_the_statement_it_heads():
    cell = code('# not a measured difference: arithmetic on the cited intensity table\n'
                'print(f"best window saved {gl.format_mass(g)} CO2")\n'
                'print(f"the green recipe saves {j:.3g} J")')
    found = problems(cell)
    assert len(found) == 1 and "green recipe saves" in found[0]


def test_cells_that_are_not_python_are_skipped():
    assert problems(code("%%bash\necho 'saves 3 J'")) == []  # a shell body is not Python
    assert problems(code("def broken(:\n    print('saves 3 J')")) == []


# --- the command line --------------------------------------------------------------------------


def _lessons_with(tmp_path, cell):
    lessons = tmp_path / "lessons"
    path = build.new_lesson(3, "demo", "Demo", lessons)
    nb = fmt._read_json(path)
    nb["cells"].append(cell)
    fmt.write(fmt.normalise(nb, "03_demo"), path)
    build.build(lessons)
    return lessons


def test_course_check_fails_on_a_planted_claim_and_passes_on_good_text(tmp_path, capsys):
    bad = _lessons_with(tmp_path / "bad", code('print(f"target {target:.0%} test accuracy")'))
    assert build.check(bad) == []  # in sync: only the claim is wrong
    assert build.main(["--lessons", str(bad), "check"]) == 1
    out = capsys.readouterr().out
    assert "03_demo.ipynb: cell" in out and "validation accuracy" in out and "1 claim(s)" in out
    good = _lessons_with(tmp_path / "good", code('print(f"target {target:.0%} validation accuracy")'))
    assert build.main(["--lessons", str(good), "check"]) == 0
    assert "no claim without its verdict" in capsys.readouterr().out


def test_the_shipped_lessons_make_no_claim_without_its_verdict():
    assert claims.claim_problems(REPO / "lessons") == []
