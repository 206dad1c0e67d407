#!/usr/bin/env python
"""Words of prose per lesson (learner copies), method notes apart, and the time to read them.

    python benchmarks/lesson_words.py [--lessons lessons]

Prints one row per lesson: main-line words, minutes at greenlab.course.reading.WORDS_PER_MINUTE,
words in collapsed method notes, sentences, mean words per sentence and the share over
LONG_SENTENCE_WORDS. Counting rules: greenlab/course/reading.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from greenlab.course.reading import LONG_SENTENCE_WORDS, WORDS_PER_MINUTE, reading  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lessons", type=Path, default=REPO_ROOT / "lessons")
    args = parser.parse_args(argv)
    rows = [reading(p) for p in sorted(args.lessons.glob("[0-9][0-9]_*.ipynb"))]
    if not rows:
        print(f"no lessons in {args.lessons}", file=sys.stderr)
        return 1
    print(f"| lesson | words | minutes at {WORDS_PER_MINUTE}/min | method-notes words | sentences "
          f"| words/sentence | over {LONG_SENTENCE_WORDS} words |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r.lesson} | {r.words} | {r.minutes:.1f} | {r.notes_words} | {r.sentences} "
              f"| {r.mean_sentence_words:.1f} | {100 * r.long_sentence_share:.0f} % |")
    words = sorted(r.words for r in rows)
    print(f"\nmedian {words[len(words) // 2]} words, largest {words[-1]}; "
          f"{sum(w > 1800 for w in words)} of {len(words)} lessons over 1,800")
    return 0


if __name__ == "__main__":
    sys.exit(main())
