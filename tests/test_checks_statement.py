"""gl.check.stakeholder_statement: a statement with the five elements passes; each planted
statement missing one element fails with that element's advice."""

import pytest

import greenlab as gl
from greenlab.course import checks
from greenlab.course.checks.statement import statement_elements

GOOD = ("Training the green recipe to the validation target used 12 J against 61 J for the naive one "
        "(5.1 times less, 95% interval 3.2 to 8.0 times over 3 paired repeats). The figures are estimated "
        "from a CPU power model, not read from a meter. The green model's test accuracy was 72%, within "
        "1 point of the naive model's 72.5%. We recommend the green recipe for retraining as long as it "
        "keeps test accuracy within 1 point of the naive one.")


def test_a_complete_statement_passes():
    result = checks.stakeholder_statement(GOOD)
    assert result.passed, result.text()
    assert all(statement_elements(GOOD).values())


@pytest.mark.parametrize("remove, add, element", [
    ("12 J against 61 J", "much less energy than", "figure"),
    ("estimated from a CPU power model, not read from a meter", "what they are", "provenance"),
    ("(5.1 times less, 95% interval 3.2 to 8.0 times over 3 paired repeats)", "", "uncertainty"),
    ("The green model's test accuracy was 72%, within 1 point of the naive model's 72.5%. ", "", "accuracy"),
    ("We recommend the green recipe for retraining as long as it keeps test accuracy within 1 point of "
     "the naive one.", "That is all.", "decision"),
])
def test_each_missing_element_fails_with_its_own_advice(remove, add, element):
    assert remove in GOOD
    text = GOOD.replace(remove, add)
    result = checks.stakeholder_statement(text)
    assert result.status == checks.FAILED
    missing = [d for d in result.details if d.startswith("missing ")]
    assert missing == [d for d in missing if d.startswith(f"missing {element}:")] and missing, result.text()


def test_a_decision_without_its_condition_fails():
    text = GOOD.replace("as long as it keeps test accuracy within 1 point of the naive one", "from now on")
    result = checks.stakeholder_statement(text)
    assert result.status == checks.FAILED and any(d.startswith("missing decision") for d in result.details)


def test_unreadable_figures_are_flagged():
    text = GOOD.replace("12 J", "1.2e+01 J")
    result = checks.stakeholder_statement(text)
    assert result.status == checks.FAILED and any("hard for a reader" in d for d in result.details)


def test_placeholders_and_non_text():
    assert checks.stakeholder_statement(None).status == checks.NOT_ATTEMPTED
    assert checks.stakeholder_statement("  ").status == checks.NOT_ATTEMPTED
    assert checks.stakeholder_statement(42).status == checks.FAILED
    with pytest.raises(TypeError):
        statement_elements(42)


@pytest.mark.parametrize("joules", [2e-5, 0.04, 999.7, 12_345.0, 4.2e6])
@pytest.mark.parametrize("measured", [False, True])
def test_a_statement_written_with_the_library_s_phrases_passes_at_any_size(joules, measured):
    # the worked statements use format_energy, format_mass and how_measured: whatever the run's size
    # and meter, what they write must be a figure the checker reads and a provenance it recognises
    from greenlab.base.units import format_energy
    from greenlab.energy import ComponentEnergy, Measurement
    from greenlab.impact import carbon, report

    part = ComponentEnergy(component="gpu:0" if measured else "cpu", source="nvml-counter" if measured else "estimate",
                           joules=joules, seconds=1.0, watts=joules, estimated=not measured,
                           rel_uncertainty=0.05 if measured else 1.0)
    run = Measurement(label="run", seconds=1.0, components={part.component: part})
    grams = carbon.co2e_g(joules, "GBR")
    text = (f"Training used {format_energy(joules)}, {report.how_measured(run)}, for 71% test accuracy; "
            f"on the British grid that is {carbon.format_mass(grams)} CO2e. We recommend night hours "
            "when the job can wait.")
    result = checks.stakeholder_statement(text)
    assert result.passed, (text, result.text())


def test_millijoules_are_flagged_but_megajoules_are_a_unit_a_reader_knows():
    assert any("hard for a reader" in d for d in checks.stakeholder_statement(GOOD.replace("12 J", "12 mJ")).details)
    assert checks.stakeholder_statement(GOOD.replace("12 J", "1.2 MJ")).passed


# --- checked against the run it describes ---------------------------------------------------------

FACTS = {"joules": 3612.0, "accuracy": 0.712, "uncertainty": 0.08, "verdict": "no detectable difference"}
HONEST = ("The meter measured 3.6 kJ (±8 %) at 71 % test accuracy; no detectable difference from the "
          "baseline. We recommend the pruned model as long as its accuracy holds.")


def test_a_statement_of_keywords_fails_against_the_run():
    keywords = "The meter measured 1 J (±1 J). At 1 % accuracy we recommend it if you like."
    assert gl.check.stakeholder_statement(keywords).passed  # the elements alone cannot tell
    verdict = gl.check.stakeholder_statement(keywords, facts=FACTS)
    assert verdict.status == "failed"
    joined = " ".join(verdict.details)
    assert "1 J is not the run's energy" in joined and "1 % is not the run's accuracy" in joined
    assert "not the run's uncertainty" in joined


def test_the_runs_own_figures_pass_in_any_rounding():
    assert gl.check.stakeholder_statement(HONEST, facts=FACTS).passed
    other = HONEST.replace("3.6 kJ", "3,612 J").replace("71 %", "71.2 %")
    assert gl.check.stakeholder_statement(other, facts=FACTS).passed


def test_a_saving_claimed_against_no_detectable_difference_fails():
    claim = HONEST.replace("; no detectable difference from the baseline.", ", which saves energy.")
    verdict = gl.check.stakeholder_statement(claim, facts=FACTS)
    assert verdict.status == "failed" and any("no detectable difference" in d for d in verdict.details)


def test_advice_in_plain_words_counts_as_a_decision():
    found = statement_elements("My advice: serve the pruned model, but re-check if accuracy drops")
    assert found["decision"]


def test_every_lesson_checks_its_statement_against_the_facts_of_its_run():
    import json

    from greenlab.course.nbgrader import checker_call_args
    from greenlab.course.notebook_format import instructor_notebooks, lessons_dir

    checked = {}
    for path in instructor_notebooks(lessons_dir(None)):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code":
                continue
            for name, _, args in checker_call_args("".join(cell["source"])):
                if name == "stakeholder_statement":
                    checked[path.name[:2]] = "facts=" in args
    assert len(checked) >= 7, checked
    assert all(checked.values()), f"lessons whose statement is checked without the run's facts: {checked}"


# --- at grade time: the lesson ran again, so its facts are not those of the run the statement describes

RERUN = {"joules": 2480.0, "accuracy": 0.64, "uncertainty": 0.15, "verdict": "2.1 times less energy"}


@pytest.mark.parametrize("environ", [{"GREENLAB_GRADING": "1"}, {"NBGRADER_EXECUTION": "autograde"}])
def test_at_grade_time_an_honest_statement_is_not_failed_for_the_reruns_figures(monkeypatch, environ):
    from greenlab.course.checks.statement import grade_time_rerun

    monkeypatch.delenv("GREENLAB_GRADING", raising=False)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert gl.check.stakeholder_statement(HONEST, facts=RERUN).status == "failed"  # the learner's own run: caught
    assert grade_time_rerun() is None
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    assert grade_time_rerun() is not None
    verdict = gl.check.stakeholder_statement(HONEST, facts=RERUN)
    assert verdict.status == "passed", verdict.text()
    assert "for the marker" in verdict.message
    notes = [d for d in verdict.details if d.startswith("differs from the grade-time run")]
    assert any("3.6 kJ is not the run's energy" in d for d in notes) and any("71 %" in d for d in notes)
    assert verdict.details[-1] == f"the statement as written: {HONEST}"
    # a statement that cites the rerun's own figures agrees with it; one missing an element still fails
    agreeing = HONEST.replace("3.6 kJ", "2,480 J").replace("±8 %", "±15 %").replace("71 %", "64 %")
    assert "agree with the grade-time run" in gl.check.stakeholder_statement(agreeing, facts=RERUN).message
    assert gl.check.stakeholder_statement("We recommend it.", facts=RERUN).status == "failed"


def test_a_grading_mode_value_it_cannot_read_is_no_rerun():
    from greenlab.course.checks.statement import grade_time_rerun

    assert grade_time_rerun({"GREENLAB_GRADING": "maybe"}) is None
    assert grade_time_rerun({"GREENLAB_GRADING": "0", "NBGRADER_EXECUTION": "validate"}) is None
