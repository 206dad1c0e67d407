"""Exercise checkers (greenlab.course.checks, exposed as gl.check): never raise for wrong answers."""

import math
import numpy as np
import pytest
import torch

import greenlab as gl
from greenlab.course import checks
from greenlab.course.checks import FAILED, NOT_ATTEMPTED, PASSED


def test_module_is_exposed_as_gl_check():
    assert gl.check is checks


@pytest.mark.parametrize("placeholder", [None, NotImplemented, ...])
def test_check_close_placeholder_is_not_attempted(placeholder):
    result = checks.check_close("energy", placeholder, 1.0)
    assert result.status == NOT_ATTEMPTED and not result.attempted and not result.passed


def test_check_close_tolerances_and_messages():
    assert checks.check_close("x", 1.0 + 1e-9, 1.0).passed
    assert checks.check_close("x", 1.05, 1.0, rtol=0.1).passed
    assert checks.check_close("x", 0.01, 0.0, atol=0.02).passed
    wrong = checks.check_close("x", 1.2, 1.0, rtol=0.1)
    assert wrong.status == FAILED
    assert "expected 1, got 1.2" in wrong.message
    assert "expected a number" in checks.check_close("x", "12", 12.0).message
    assert "NaN" in checks.check_close("x", float("nan"), 1.0).message


def test_check_close_arrays_and_tensors_name_the_index_and_shape():
    assert checks.check_close("t", torch.tensor([1.0, 2.0]), np.array([1.0, 2.0])).passed
    assert checks.check_close("s", np.float32(2.0), 2.0).passed
    wrong = checks.check_close("t", torch.tensor([1.0, 2.5, 3.0]), [1.0, 2.0, 3.0])
    assert wrong.status == FAILED and "index 1" in wrong.message
    shape = checks.check_close("t", torch.zeros(2, 3), np.zeros((3, 2)))
    assert shape.status == FAILED and "shape (3, 2)" in shape.message


def test_bad_tolerance_is_a_clear_value_error():
    with pytest.raises(ValueError, match="rtol must be a finite number >= 0"):
        checks.check_close("x", 1.0, 1.0, rtol=-1)


def test_check_function_reports_input_expected_and_got():
    def area(w, h):
        return w * h + (1 if w == 3 else 0)

    result = checks.check_function(area, [((2, 5), 10), ((3, 4), 12)])
    assert result.status == FAILED
    assert result.message == "1 of 2 test inputs gives a wrong result."
    assert result.details == ["area(3, 4): expected 12, got 13 (difference 1)."]


def test_check_function_reports_exceptions_without_raising():
    def broken(x):
        raise KeyError("oops")

    result = checks.check_function(broken, [((1,), 1)])
    assert result.status == FAILED
    assert result.details == ["broken(1) raised KeyError: 'oops'"]


def test_check_function_placeholder_and_partial_placeholder():
    assert checks.check_function(lambda x: None, [(1, 1), (2, 2)]).status == NOT_ATTEMPTED
    assert checks.check_function(None, [(1, 1)], name="f").status == NOT_ATTEMPTED
    partial = checks.check_function(lambda x: x if x > 1 else None, [(1, 1), (2, 2)], name="f")
    assert partial.status == FAILED and "f(1) returned None" in partial.details[0]
    assert "expected a function" in checks.check_function(3, [(1, 1)]).message


def test_check_function_expected_exception_and_non_numeric_values():
    def validate(x):
        if x < 0:
            raise ValueError("negative")
        return "ok"

    assert checks.check_function(validate, [((-1,), ValueError), ((1,), "ok")]).passed
    missing = checks.check_function(lambda x: "ok", [((-1,), ValueError)], name="validate")
    assert "expected it to raise ValueError" in missing.details[0]


def test_check_function_does_not_let_learner_mutate_the_cases():
    cases = [(([1, 2],), 3)]

    def sum_and_clear(xs):
        total = sum(xs)
        xs.clear()
        return total

    assert checks.check_function(sum_and_clear, cases).passed
    assert cases[0][0][0] == [1, 2]


def test_check_function_needs_cases():
    with pytest.raises(ValueError, match="at least one"):
        checks.check_function(abs, [])
    with pytest.raises(ValueError, match="pair"):
        checks.check_function(abs, [1])


def test_rendering_text_and_html():
    ok = checks.Check("demo", PASSED, "fine.")
    bad = checks.Check("demo", FAILED, "wrong <b>.", ["case 1"])
    skip = checks.Check("demo", NOT_ATTEMPTED, "later.")
    assert str(ok) == "\u2714 demo passed: fine."
    assert repr(bad) == "\u2718 demo failed: wrong <b>.\n    case 1"
    assert "#1a7f37" in ok._repr_html_()
    assert ("#cf222e" in bad._repr_html_() and "&lt;b&gt;" in bad._repr_html_()
            and "<li>case 1</li>" in bad._repr_html_())
    assert "#6e7781" in skip._repr_html_() and "not attempted" in skip._repr_html_()
    with pytest.raises(ValueError, match="status must be one of"):
        checks.Check("demo", "ok", "x")


def test_joules_per_gflop_checker():
    assert checks.joules_per_gflop(lambda joules, flops: joules / (flops / 1e9)).passed
    assert checks.joules_per_gflop(lambda joules, flops: None).status == NOT_ATTEMPTED
    raw = checks.joules_per_gflop(lambda joules, flops: joules / flops)
    assert raw.status == FAILED and "flops / 1e9" in raw.details[0]
    inverse = checks.joules_per_gflop(lambda joules, flops: flops / 1e9 / joules)
    assert inverse.status == FAILED and "GFLOPs per joule" in inverse.details[0]
    crash = checks.joules_per_gflop(lambda joules: joules)
    assert crash.status == FAILED and "TypeError" in crash.details[0]


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))


def test_gradients_match_full_batch_vs_accumulated():
    x, y = torch.randn(8, 3), torch.randn(8, 2)
    ref, mine = _model(), _model()
    torch.nn.functional.mse_loss(ref(x), y).backward()
    assert checks.check_gradients_match(ref, mine).status == NOT_ATTEMPTED  # no backward yet
    for chunk_x, chunk_y in zip(x.split(4), y.split(4)):
        (torch.nn.functional.mse_loss(mine(chunk_x), chunk_y) / 2).backward()
    assert checks.check_gradients_match(ref, mine).passed


def test_gradients_match_names_the_wrong_parameter():
    x, y = torch.randn(8, 3), torch.randn(8, 2)
    ref, mine = _model(), _model()
    torch.nn.functional.mse_loss(ref(x), y).backward()
    for chunk_x, chunk_y in zip(x.split(4), y.split(4)):
        torch.nn.functional.mse_loss(mine(chunk_x), chunk_y).backward()  # forgot to divide by 2
    result = checks.check_gradients_match(ref, mine)
    assert result.status == FAILED
    assert result.message == "4 of 4 parameters differ."
    assert result.details[0].startswith("0.weight: max |difference|")


def test_gradients_match_structure_and_placeholder():
    assert checks.check_gradients_match(_model(), None).status == NOT_ATTEMPTED
    other = torch.nn.Linear(3, 2)
    other.weight.grad = torch.zeros(2, 3)
    result = checks.check_gradients_match(_model(), other)
    assert result.status == FAILED and "different parameters" in result.message
    assert "expected two torch.nn.Module" in checks.check_gradients_match(_model(), 5).message


def test_infinity_is_matched_exactly_even_with_a_relative_tolerance():
    assert checks.check_close("payback", math.inf, math.inf, rtol=0.1).passed
    assert not checks.check_close("payback", 1e300, math.inf, rtol=0.1).passed
    assert not checks.check_close("payback", math.inf, 5.0, rtol=0.1).passed


def test_pick_measures_the_learners_code_only_when_it_passed(capsys):
    def mine():
        return "mine"

    def library():
        return "library"

    passed = checks.Check("pruning", PASSED, "ok")
    assert passed.pick(mine, library, "pruning") is mine
    assert "your pruning" in capsys.readouterr().out
    failed = checks.Check("pruning", FAILED, "wrong")
    assert failed.pick(mine, library, "pruning") is library
    assert "did not pass" in capsys.readouterr().out
    stub = checks.Check("pruning", NOT_ATTEMPTED, "no answer")
    assert stub.pick(mine, library, "pruning") is library
    assert "not written yet" in capsys.readouterr().out
    # a label says whose code ran: the learner's only when it passed
    assert passed.whose("LoRA") == "your LoRA"
    assert failed.whose("LoRA") == stub.whose("LoRA") == "the library's LoRA"


def test_assert_passed_raises_with_the_hint_for_autograding():
    checks.Check("x", PASSED, "fine").assert_passed()
    wrong = checks.Check("x", FAILED, "1 of 2 inputs wrong.", ["f(2): got 3, expected 4 Hint: square it"])
    with pytest.raises(AssertionError, match="square it"):
        wrong.assert_passed()
    with pytest.raises(AssertionError):
        checks.Check("x", NOT_ATTEMPTED, "no answer").assert_passed()


def test_failed_message_reads_as_a_sentence():
    from greenlab.course.checks.core import wrong_inputs

    assert wrong_inputs(4, 4) == "all 4 test inputs give a wrong result."
    assert wrong_inputs(1, 4) == "1 of 4 test inputs gives a wrong result."
    assert wrong_inputs(3, 5) == "3 of 5 test inputs give a wrong result."
    assert wrong_inputs(1, 1) == "the test input gives a wrong result."
    every = checks.check_function(lambda x: -1, [((1,), 2), ((2,), 3)], name="add_one")
    assert every.text().splitlines()[0] == "\u2718 add_one failed: all 2 test inputs give a wrong result."


def test_a_check_is_plain_text_everywhere_and_a_box_where_it_is_displayed():
    """str() and print() give the text in any context; the coloured box is the rich display
    (a check left as a cell's last line, or display(check)), never a side effect of str()."""
    check = checks.Check("x", FAILED, "1 of 2 test inputs gives a wrong result.", ["f(2): got 3"])
    assert str(check) == check.text() == f"{check}" and "f(2): got 3" in str(check)
    assert check._repr_html_().startswith("<div") and "1 of 2 test inputs" in check._repr_html_()


