"""How long a lesson takes to read: its prose counted the way a learner meets it.

Prose is the text of the markdown cells of a learner copy, less what a learner does not read in
the main line: code spans and blocks, HTML tags, link targets, image alt text (a figure is looked
at, not read) and the collapsed "method notes" blocks (``<details>`` … ``</details>``) that hold
the caveats a careful reader needs. ``benchmarks/lesson_words.py`` prints the table for every
lesson; reading time uses ``WORDS_PER_MINUTE``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

# A common figure for reading technical prose on screen (Brysbaert 2019, "How many words do we read
# per minute?", J. Memory and Language 109: 238 words a minute for non-fiction, silent reading);
# rounded down for text with formulas and numbers.
WORDS_PER_MINUTE = 200
LONG_SENTENCE_WORDS = 35

_DETAILS = re.compile(r"<details\b.*?</details>", re.IGNORECASE | re.DOTALL)
_FENCE = re.compile(r"```.*?```", re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_TAG = re.compile(r"<[^>]+>")
_WORD = re.compile(r"[^\W_](?:[\w'’.,%×/+-]*[^\W_%])?")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9*_(\"“])|\n\s*\n|\n\s*[-*] ")


@dataclasses.dataclass(frozen=True)
class Reading:
    """A lesson's prose: ``words`` in the main line, ``notes_words`` in its method notes, the
    average sentence length and the share of sentences over ``LONG_SENTENCE_WORDS`` words."""

    lesson: str
    words: int
    notes_words: int
    sentences: int
    mean_sentence_words: float
    long_sentence_share: float

    @property
    def minutes(self) -> float:
        """Minutes to read the main line at ``WORDS_PER_MINUTE``."""
        return self.words / WORDS_PER_MINUTE


def main_line(markdown: str) -> str:
    """The text of one markdown cell that a learner reads in the main line."""
    text = _DETAILS.sub(" ", markdown)
    text = _FENCE.sub(" ", text)
    text = _CODE.sub(" code ", text)
    text = _IMAGE.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    return _TAG.sub(" ", text)


def count_words(text: str) -> int:
    """Words in ``text`` (numbers count as words; punctuation and markdown marks do not)."""
    return len(_WORD.findall(text))


def reading(path: str | Path) -> Reading:
    """Count the prose of the notebook at ``path`` (a learner copy)."""
    path = Path(path)
    return notebook_reading(json.loads(path.read_text(encoding="utf-8")), path.stem)


def notebook_reading(nb: dict, lesson: str) -> Reading:
    """Count the prose of a notebook already read (``nb``, notebook JSON as a dict) named ``lesson``."""
    main, notes, sentences = 0, 0, []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        text = main_line(source)
        main += count_words(text)
        notes += sum(count_words(main_line(block[len("<details"):])) for block in _DETAILS.findall(source))
        for part in _SENTENCE_END.split(text):
            n = count_words(part)
            if n >= 3:  # headings and list labels of a word or two are not sentences
                sentences.append(n)
    mean = sum(sentences) / len(sentences) if sentences else 0.0
    long_share = sum(n > LONG_SENTENCE_WORDS for n in sentences) / len(sentences) if sentences else 0.0
    return Reading(lesson, main, notes, len(sentences), mean, long_share)
