"""``python -m greenlab.course check`` refuses markdown that states the outcome of a run before it ran;
what to look for, a condition, a question, a cited finding and a marked definition pass."""

import pytest

from greenlab.course import claims
from greenlab.course.claims_outcomes import OUTCOME_OK_MARK, outcome_sentence, sentences
from greenlab.course.notebook_format import code, md


def problems(*cells):
    return [p for p in claims.notebook_claim_problems({"cells": list(cells)}, "nb")
            if "states an outcome before the run" in p]


@pytest.mark.parametrize("text", [
    # the sentences the lessons once held, each written before its run
    "Memory-bound work does few FLOPs per byte. It costs far more joules per GFLOP. You will see that.",
    "You will see that memory-bound work costs far more joules per GFLOP than matmul.",
    "With bf16 autocast the final test accuracy stays close to fp32's.",
    "In the summary you saw accuracy hold at 8 bits and slip at fewer.",
    "Channel pruning makes the model faster on any hardware.",
    "This lesson asserts no ranking. On a CPU that price is small.",
    # as the lessons wrote them, line breaks and all
    "It is not a constant of the machine: memory-bound work (adding two big tensors, say) does few FLOPs\n"
    "per byte moved and costs far more joules per GFLOP. You will\nsee that in the exercise.",
    "Accuracy: bf16 rounds every matmul's inputs to 2–3 significant digits, yet the final test\n"
    "accuracy in the table is close to fp32's. That is Kalamkar et al.'s finding on a small scale.",
    "- **Linear quantisation** maps weights onto integers with a scale and a zero point; you wrote it and\n"
    "  saw accuracy hold at 8 bits and slip at fewer. int8 after training shrinks the weights about 4× and\n"
    "  needs no retraining; speed and energy gains depend on the model's size and the CPU's integer kernels.",
    # variations of the same habit
    "We measured it: the small MLP used less energy than the CNN.",
    "In our test, int8 was slower than fp32.",
    "Here bf16 is faster than fp32, so use it.",
    "The warm-up run shows it: the validation loss dropped by half in this run.",
    "- Larger batches are always cheaper per sample.",
    "| batch | what the sweep finds |\n| --- | --- |\n| 256 | you will see it is the greenest |",
])
def test_a_sentence_that_states_the_run_s_outcome_is_refused(text):
    found = problems(md(text))
    assert len(found) == 1 and found[0].startswith("nb: cell 0"), found
    assert OUTCOME_OK_MARK in found[0]  # the refusal names the way to mark a definition


@pytest.mark.parametrize("text", [
    # what to look for, predictions labelled as such, conditions and questions
    "Look for the bar of the memory-bound kernel: does it cost more joules per GFLOP?",
    "Predict first: is fp16 faster than fp32 on this machine?",
    "Whether bf16 is faster here depends on the CPU's instructions.",
    "On a CPU the per-step overhead is expected to be small relative to the work.",
    "If the pruned model is faster here, the verdict below says so.",
    "A model that is cheaper per prediction saves energy on every request.",
    "A choice that wins here is a finding only where the verdict is detectable.",
    # published findings with author and year, and general mechanisms with no run in them
    "Han et al. (2016) found pruned layers ran 3-4x faster on a Titan X.",
    "Kalamkar et al. (2019) report that bf16 training reaches fp32's accuracy on large models.",
    "More devices shorten the wall-clock time, but they rarely make the job cheaper.",
    "Structured pruning removes arithmetic and bytes on any hardware (the counts above).",
    # words that only look like outcomes
    "Checkpoints limit the loss, but each write holds the accelerator too.",
    "The table puts the **validation** accuracy (a held-out part of the training split) beside the time.",
    "This is a greedy plan: simple and explainable, not always the cheapest possible one.",
    # mentions, not claims
    'The claim "faster on any hardware" needs a timing on every machine.',
    "The verdict reads `you will see it is faster` only in a parody.",
    # the reviewed mark, with its reason
    "In our test, int8 was slower than fp32. <!-- not this run's outcome: why the lesson uses torch.ao, "
    "a test of torchao 0.18 named with its version -->",
])
def test_what_to_look_for_conditions_and_cited_findings_pass(text):
    assert problems(md(text)) == []


def test_the_mark_needs_a_reason_and_covers_only_its_own_sentence():
    assert problems(md("In our test, int8 was slower than fp32. <!-- not this run's outcome: -->"))
    marked_then_claim = ("In our test, int8 was slower. <!-- not this run's outcome: a recorded test -->\n"
                         "You will see that bf16 is faster here.")
    found = problems(md(marked_then_claim))
    assert len(found) == 1 and "bf16 is faster" in found[0]
    assert [marked for _, marked in sentences(marked_then_claim)] == [True, False]


def test_a_cited_finding_said_to_be_reproduced_here_is_still_refused():
    assert outcome_sentence("You will see that accuracy holds, as Kalamkar et al. (2019) found.")


def test_code_and_fenced_blocks_are_not_read_as_prose():
    assert problems(md("```\n# you will see it is faster here\n```"), {"cell_type": "code",
                    "source": "# you will see it is faster here\nprint(1)"}) == []


@pytest.mark.parametrize("source", [
    'print("You will see that bf16 is faster here.")',
    'print(f"bf16 is {ratio:.2f}x faster here")  # the direction is fixed before the run',
    'line = f"In our test the pruned model was {t:.1f} ms slower"\nprint(line)',
])
def test_code_that_prints_an_outcome_whatever_the_run_found_is_refused(source):
    found = problems(code(source))
    assert len(found) == 1 and found[0].startswith("nb: cell 0"), found


@pytest.mark.parametrize("source", [
    'if verdict.detectable:\n    print("bf16 was faster here")\nelse:\n    print("no detectable difference")',
    'print("bf16 was faster here" if verdict.detectable else "no detectable difference")',
    'print(f"bf16: {verdict.sentence()} ({ratio:.2f}x fp32\'s time)")',
    '# you will see that bf16 is faster here\nprint(ratio)',
    '%%time\nprint(ratio)',
])
def test_code_that_prints_what_the_verdict_chose_passes(source):
    assert problems(code(source)) == []
