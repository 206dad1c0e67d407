"""Counting a lesson's prose: what a learner reads in the main line, method notes apart."""

import json

from greenlab.course import reading


def _write(tmp_path, *markdown, code=("x = 1",)):
    cells = [{"cell_type": "markdown", "metadata": {}, "source": m} for m in markdown]
    cells += [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None}
              for c in code]
    path = tmp_path / "07_example.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_main_line_leaves_out_code_images_tags_link_targets_and_method_notes(tmp_path):
    text = ("We measure energy with `gl.measure()` in joules. See [the docs](https://example.org/a/b).\n\n"
            "![a long alt text that describes the drawing](attachment:f.png)\n\n"
            "<details><summary>Method notes</summary>\n\nWindows shorter than ten periods are biased.\n</details>\n\n"
            "```python\nprint('not prose')\n```")
    r = reading.reading(_write(tmp_path, text, "## Two words"))
    # "We measure energy with code in joules." (7) + "See the docs." (3) + "Two words" (2)
    assert r.words == 12
    assert r.notes_words == len("Method notes Windows shorter than ten periods are biased.".split())
    assert r.lesson == "07_example"
    assert abs(r.minutes - 12 / reading.WORDS_PER_MINUTE) < 1e-12


def test_sentences_and_the_share_of_long_ones(tmp_path):
    long = "Long " + " ".join(["word"] * reading.LONG_SENTENCE_WORDS) + "."
    r = reading.reading(_write(tmp_path, "One short sentence here. " + long + " Another short one here."))
    assert r.sentences == 3
    assert abs(r.long_sentence_share - 1 / 3) < 1e-9
    assert abs(r.mean_sentence_words - (4 + reading.LONG_SENTENCE_WORDS + 1 + 4) / 3) < 1e-9


def test_numbers_and_units_count_as_words_punctuation_does_not():
    assert reading.count_words("It saved 26 % (-29 to -23 %) — 3.6 kJ, 1,800 words.") == 10
