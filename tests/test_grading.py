"""Grade-time checking (greenlab.course.grading): a fresh copy of the checkers that a learner's
cell cannot have rebound, cases drawn at grade time, and the knowledge check graded as shown
against a salted hash of its key."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest
import torch

import greenlab as gl
from greenlab.course import checks
from greenlab.course import grading
from greenlab.course.checks import Check
from greenlab.course.quiz import load, normal_text, option_index, shuffled
from greenlab.energy.rapl import unwrap_delta
from greenlab.techniques.lm import sharding


def _fresh_grading():
    """greenlab.course.grading loaded from its file under a fresh name, as a hidden test loads it."""
    path = Path(gl.__file__).parent / "course" / "grading.py"
    spec = importlib.util.spec_from_file_location("_grading_test_copy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def co2e_right(kwh, g_per_kwh, pue):
    return kwh * g_per_kwh * pue


def co2e_fitted(kwh, g_per_kwh, pue):  # the visible cases only
    return {(1.0, 100.0, 1.0): 100.0, (0.5, 400.0, 1.5): 300.0, (2.0, 50.0, 1.1): 110.0,
            (0.0, 471.84, 1.58): 0.0}[(kwh, g_per_kwh, pue)]


def test_a_rebound_checker_or_helper_does_not_reach_the_grade(monkeypatch):
    import greenlab.course.checks.carbon as carbon

    fake = lambda *a, **k: Check("co2e_grams", "passed", "ok")  # noqa: E731
    monkeypatch.setattr(gl.check, "co2e_grams", fake)
    monkeypatch.setattr(carbon, "check_function", fake)
    assert gl.check.co2e_grams(None).passed  # the learner's kernel is fooled ...
    with pytest.raises(AssertionError, match="not attempted|placeholder"):
        _fresh_grading().grade("co2e_grams", lambda *a: None)  # ... the grade is not
    assert sys.modules["greenlab.course.checks.carbon"] is carbon  # and the kernel's modules are back


def test_an_answer_fitted_to_the_visible_cases_fails_the_drawn_ones():
    assert gl.check.co2e_grams(co2e_fitted).passed
    verdict = grading.fresh_verdict("co2e_grams", co2e_fitted, seed=7)
    assert verdict.status == "failed" and "KeyError" in " ".join(verdict.details)
    assert grading.fresh_verdict("co2e_grams", co2e_right, seed=7).passed
    assert len(grading.fresh_verdict("co2e_grams", co2e_right, seed=7).message) > 0


DRAWING = [name for name in checks.__all__ if getattr(getattr(checks, name), "draws_cases", False)]


def test_every_checker_of_numbers_draws_cases_at_grade_time():
    assert set(HONEST) <= set(DRAWING)
    assert {"accumulate_gradients", "fedavg_aggregate", "best_start_hour", "co2e_grams"} <= set(DRAWING)


@pytest.mark.parametrize("name", DRAWING)
def test_checkers_that_draw_cases_draw_different_ones_per_seed(name):
    checker = getattr(gl.check, name)
    assert checker.draws_cases
    seen = []

    def spy(*args):
        seen.append(repr(args)[:2000])
        return None

    checker(spy, seed=1)
    first = list(seen)
    seen.clear()
    checker(spy, seed=2)
    assert first != seen and len(first) > 4


def _honest_library(module, name, after=lambda v: v):
    return lambda *args: after(getattr(module, name)(*args))


# an honest answer for every checker of numbers that draws cases (the library's, or the formula)
HONEST = {
    "joules_per_gflop": lambda j, f: j / (f / 1e9),
    "scaled_lr_with_warmup": lambda step, lr, bb, b, w: (gl.batching.schedules.linear_scaling_lr(lr, bb, b)
                                                         * gl.batching.schedules.goyal_warmup(bb, b, w)(step)),
    "noise_scale_from_norms": lambda *a: gl.batching.noise_scale.simple_noise_scale(*a),
    "batch_then_lr_schedule": lambda *a: gl.batching.schedules.grow_batch_then_decay(*a),
    "one_cycle": lambda *a: gl.recipes.one_cycle(*a),
    "promote": lambda *a: gl.tuning.promote(*a),
    "early_stopping": lambda *a: gl.stopping.should_stop(*a),
    "round_bytes": lambda *a: gl.federated.round_bytes(*a),
    "zero_bytes_per_rank": lambda *a: sharding.zero_bytes_per_rank(*a)["total"],
    "lora_trainable_params": lambda i, o, r: r * (i + o),
    "kv_cache_bytes": lambda *a: 2 * math.prod(a),
    "activation_bytes_per_layer": lambda s, b, h, a: s * b * h * (34 + 5 * a * s / h),
    "counter_joules": lambda *a: unwrap_delta(*a) / 1e6,
    "young_interval": lambda *a: gl.preemption.young_interval(*a),
    "daly_interval": lambda *a: gl.preemption.daly_interval(*a),
    "watts_per_device": lambda *a: gl.scaling.watts_per_device(*a),
    "separable_conv_flops": lambda ci, co, k, h, w: (2 * ci * co * k * k * h * w,
                                                     2 * ci * k * k * h * w + 2 * ci * co * h * w),
    "scale_out_costs": lambda hours, n, eff, watts, price: (hours / (n * eff), watts * hours / eff / 1000,
                                                           None if price is None else price * hours / eff),
    "energy_per_device_hour": lambda xs, ys: sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs),
    "idle_alert": lambda *a: gl.monitoring.alert_times(*a),
    "tensor_sparsity": lambda t: float((t == 0).sum()) / t.numel(),
    "most_uncertain": lambda probs, k: probs.max(dim=1).values.argsort()[:k].tolist(),
    "pareto_indices": lambda pts: [i for i, (a, j) in enumerate(pts)
                                   if not any(a2 >= a and j2 <= j and (a2 > a or j2 < j) for a2, j2 in pts)],
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_an_answer_fitted_to_the_visible_cases_of_any_checker_fails_at_grade_time(name):
    checker = getattr(checks, name).__wrapped__  # the library's own answers are used, unrefused, as the key
    visible = []
    checker(lambda *args: visible.append(args) or HONEST[name](*args))
    table = {repr(args): HONEST[name](*args) for args in visible}

    def fitted(*args):  # the visible cases' answers, by heart
        return table[repr(args)]

    assert checker(fitted).passed, checker(fitted).text()
    assert checker(HONEST[name], seed=7).passed, checker(HONEST[name], seed=7).text()
    verdict = checker(fitted, seed=7)
    assert verdict.status == "failed" and "KeyError" in " ".join(verdict.details), verdict.text()


def test_the_grading_secret_makes_a_rerun_draw_the_same_cases(monkeypatch):
    monkeypatch.setenv(grading.SECRET_VARIABLE, "course secret")
    assert grading.grading_seed("promote") == grading.grading_seed("promote") != grading.grading_seed("one_cycle")
    monkeypatch.setenv(grading.SECRET_VARIABLE, "another course")
    other = grading.grading_seed("promote")
    monkeypatch.setenv(grading.SECRET_VARIABLE, "course secret")
    assert other != grading.grading_seed("promote")
    seen = []
    for _ in range(2):
        grading.fresh_verdict("lora_trainable_params", lambda *args: seen.append(args))
    assert seen[:len(seen) // 2] == seen[len(seen) // 2:] and len(seen) == 16
    monkeypatch.delenv(grading.SECRET_VARIABLE)
    assert grading.grading_seed("promote") != grading.grading_seed("promote")  # 48 random bits each time


def test_a_thin_wrapper_around_the_kernels_library_is_refused_at_grade_time():
    def wrapper(states, counts):  # calls the copy of the library the learner's kernel holds
        return gl.federated.fedavg(states, counts)

    with pytest.raises(AssertionError, match="library's own greenlab.techniques.federated.fedavg was called"):
        grading.grade("fedavg_aggregate", wrapper)
    from tests.test_checks_own_work import _fedavg_by_hand

    grading.grade("fedavg_aggregate", _fedavg_by_hand)
    assert gl.federated.fedavg([{"w": torch.ones(1)}], [2])["w"].item() == 1.0  # the kernel's copy is back


def test_the_library_is_refused_at_grade_time_too():
    with pytest.raises(AssertionError, match="refused"):
        grading.grade("fedavg_aggregate", gl.federated.fedavg)


# --- the knowledge check --------------------------------------------------------------------------

def test_text_answers_are_compared_loosely():
    assert normal_text("  128. ") == normal_text("128") == "128"
    assert normal_text("Use  BF16!") == "use bf16"
    question = load("02").questions[0]
    right = next(o.text for o in question.options if o.correct)
    assert question.options[option_index(question, right.upper() + " .")].correct


def test_the_quiz_is_graded_in_the_order_it_was_shown():
    quiz = load("02")
    shown = shuffled(quiz, seed=11)
    answers = [q.correct_indices[0] if q.kind == "single" else list(q.correct_indices) for q in shown.questions]
    letters = ["abcdefgh"[a] if isinstance(a, int) else ["abcdefgh"[i] for i in a] for a in answers]
    assert all(gl.check.quiz_answer("02", answers, n, order_seed=11).passed for n in range(1, len(answers) + 1))
    assert all(gl.check.quiz_answer("02", letters, n, order_seed=11).passed for n in range(1, len(answers) + 1))
    moved = [n for n, (a, q) in enumerate(zip(answers, quiz.questions), 1)
             if isinstance(a, int) and not q.options[a].correct]
    assert moved, "the shuffle moved no correct option: pick another seed"
    assert not gl.check.quiz_answer("02", answers, moved[0]).passed  # unshuffled grading got this wrong


def test_grade_quiz_checks_a_salted_hash_of_the_shown_choice():
    shown = shuffled(load("02"), seed=5)
    q = shown.questions[0]
    right = [o.text for o in q.options if o.correct]
    digest = grading.option_digest("salt", right)
    assert grading.option_digest("other", right) != digest
    letter = "abcdefgh"[q.correct_indices[0]]
    grading.grade_quiz("02", [letter], 1, seed=5, salt="salt", digest=digest)
    wrong = "abcdefgh"[next(j for j in range(len(q.options)) if j not in q.correct_indices)]
    assert not grading.quiz_verdict("02", [wrong], 1, seed=5, salt="salt", digest=digest)[0]
    with pytest.raises(AssertionError, match="not right"):
        grading.grade_quiz("02", [wrong], 1, seed=5, salt="salt", digest=digest)
    with pytest.raises(AssertionError, match="not answered"):
        grading.grade_quiz("02", [None], 1, seed=5, salt="salt", digest=digest)


def test_an_answer_that_names_no_option_is_wrong_not_an_error():
    right, text = grading.quiz_verdict("02", ["no such option"], 1, seed=5, salt="s", digest="d")
    assert not right and "not one of the options" in text
    numeric = next(i for i, q in enumerate(load("00").questions, 1) if q.kind == "numeric")
    answers = [None] * numeric
    answers[-1] = "two"
    assert grading.quiz_verdict("00", answers, numeric, seed=5, salt="s", answer=2.0, tolerance=0.01)[0] is False


def test_a_checker_that_takes_a_name_is_graded_with_it():
    verdict = grading.fresh_verdict("energy_window", None, 0.1, name="my window")
    assert verdict.name == "my window" and not verdict.passed


def _instructor_answers():
    """(lesson, checker, the instructor's answer) for every exercise whose checker draws cases,
    from the functions the instructor copies define."""
    import ast
    import json

    from greenlab.course.nbgrader import checker_call_args
    from greenlab.course.notebook_format import instructor_notebooks, lessons_dir

    found = []
    for path in instructor_notebooks(lessons_dir(None)):
        cells = [("".join(c["source"])) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
                 if c["cell_type"] == "code"]
        space = {"gl": gl}
        exec("import math, statistics\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F", space)
        for source in cells:
            try:
                tree = ast.parse(source)
            except SyntaxError:
                continue
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.Import, ast.ImportFrom)):
                    exec(ast.get_source_segment(source, node), space)
        for source in (s for s in cells if "# BEGIN SOLUTION" in s):
            for name, _, args in checker_call_args(source):
                if getattr(getattr(checks, name), "draws_cases", False):
                    found.append((path.name[:2], name, eval(args.split(",")[0], space)))
    return found


def test_the_instructors_solutions_pass_the_cases_drawn_at_grade_time():
    answers = _instructor_answers()
    assert len(answers) >= 25
    for lesson, name, answer in answers:
        for seed in range(1, 6):
            verdict = getattr(checks, name)(answer, seed=seed)
            assert verdict.passed, f"lesson {lesson}, seed {seed}: {verdict.text()}"
