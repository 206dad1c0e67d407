"""Knowledge checks as data, graded in plain Python.

A quiz is a list of questions, each a dict (or a :class:`Question`):

* single choice -- exactly one option is correct::

    {"kind": "single", "prompt": "Which counter ...?",
     "options": [{"text": "NVML total energy", "correct": True, "feedback": "Yes: ..."},
                 {"text": "nvidia-smi power", "feedback": "No: ..."}]}

* multiple choice -- any number of options (at least one) are correct; an answer
  is right when it selects exactly the correct set;
* numeric -- ``answer`` and ``tolerance`` (absolute, >= 0, same unit as the answer)
  with feedback for a right answer and for a wrong one::

    {"kind": "numeric", "prompt": "How many joules is 1 Wh?", "answer": 3600,
     "tolerance": 1, "unit": "J",
     "feedback": {"correct": "Right: 1 W for 3600 s.", "incorrect": "1 Wh = 1 W x 3600 s."}}

  ``"too_low"`` and ``"too_high"`` may replace ``"incorrect"``.

Every option carries its own feedback. :meth:`Quiz.grade` returns the score and
per-question feedback, so tests need no browser. ``gl.quiz`` (``greenlab.widgets.quiz_display``)
shows the quiz with ipywidgets in a notebook front end and prints it as text otherwise.

The lessons' knowledge checks live as data in ``greenlab/quizzes/NN_slug.json``
(``{"title": ..., "questions": [...]}``), so a lesson's code cell reads
``gl.quiz("01")`` and never shows the answer key. A lesson quiz shuffles its
options: the order is drawn from a seed made once per Python process (one kernel
session) and the question's text, so it stays the same when a cell is re-run and
differs between sessions; the correct option's position is spread evenly over
the lesson's single-choice questions. ``GREENLAB_QUIZ_SEED`` (an integer) or
``seed=`` fixes the order, e.g. for tests.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import secrets
from dataclasses import dataclass, field, replace
from importlib import resources

KINDS = ("single", "multiple", "numeric")
SEED_ENV = "GREENLAB_QUIZ_SEED"
_SESSION_SEED = secrets.randbits(32)  # drawn once per process: one kernel session
ANSWER_HINT = ("Grade your answers with .grade([...]) on the returned quiz: one entry per question, "
               "an option's index as shown (a = 0) or its text, a list for 'choose all', a number for numeric.")


@dataclass(frozen=True)
class Option:
    """One answer option of a choice question, with the feedback shown when it is picked."""

    text: str
    feedback: str
    correct: bool = False


@dataclass(frozen=True)
class Question:
    """One validated question. Build it with :func:`make_question` (checks the data)."""

    kind: str
    prompt: str
    options: tuple[Option, ...] = ()
    answer: float | None = None
    tolerance: float | None = None
    unit: str = ""
    feedback: dict = field(default_factory=dict)
    explanation: str = ""

    @property
    def correct_indices(self) -> tuple[int, ...]:
        """Indices of the correct options (empty for numeric questions)."""
        return tuple(i for i, o in enumerate(self.options) if o.correct)


@dataclass(frozen=True)
class QuestionResult:
    """The grade of one question: ``correct`` and the feedback lines to show."""

    index: int
    correct: bool
    answered: bool
    feedback: list[str]


@dataclass(frozen=True)
class GradeResult:
    """A graded quiz: ``score`` right answers out of ``total``, with per-question results."""

    score: int
    total: int
    results: list[QuestionResult]

    @property
    def fraction(self) -> float:
        """Share of questions answered correctly, 0..1."""
        return self.score / self.total if self.total else 0.0

    def summary(self) -> str:
        """One line per question plus the score, as plain text."""
        lines = []
        for r in self.results:
            mark = "correct" if r.correct else ("not answered" if not r.answered else "incorrect")
            lines.append(f"Q{r.index + 1}: {mark}. " + " ".join(r.feedback))
        lines.append(f"Score: {self.score}/{self.total}")
        return "\n".join(lines)


class Quiz:
    """A validated list of questions with a title; grading needs no widgets."""

    def __init__(self, questions, title: str | None = None):
        if isinstance(questions, (str, bytes)) or not hasattr(questions, "__iter__"):
            raise ValueError("questions must be a list of question dicts or Question objects")
        built = []
        for i, q in enumerate(questions):
            try:
                built.append(q if isinstance(q, Question) else make_question(q))
            except ValueError as err:
                raise ValueError(f"question {i + 1}: {err}") from None
        if not built:
            raise ValueError("a quiz needs at least one question")
        self.questions: list[Question] = built
        self.title = title
        self.lesson: str | None = None  # NN_slug when loaded from the package's quiz data

    def __len__(self) -> int:
        return len(self.questions)

    def __repr__(self) -> str:
        name = f"{self.title!r}" if self.title else "untitled"
        return f"<Quiz {name}: {len(self)} questions>"

    def grade(self, answers) -> GradeResult:
        """Grade ``answers`` and return a :class:`GradeResult`.

        ``answers`` is a list in question order, or a dict keyed by question index
        (0-based). Single choice: an option index or the option's text. Multiple
        choice: a list/set of indices or texts. Numeric: a number. ``None`` or a
        missing entry counts as not answered.
        """
        if isinstance(answers, dict):
            bad = [k for k in answers if not isinstance(k, int) or not 0 <= k < len(self)]
            if bad:
                raise ValueError(f"answer keys must be question indices 0..{len(self) - 1}; got {bad}")
            by_index = answers
        elif isinstance(answers, (list, tuple)):
            if len(answers) > len(self):
                raise ValueError(f"got {len(answers)} answers for {len(self)} questions")
            by_index = dict(enumerate(answers))
        else:
            raise ValueError("answers must be a list (in question order) or a dict {index: answer}")
        results = [grade_question(q, by_index.get(i), index=i) for i, q in enumerate(self.questions)]
        return GradeResult(sum(r.correct for r in results), len(results), results)

    def text(self, show_answers: bool = False) -> str:
        """The quiz as plain text; ``show_answers=True`` adds answers and feedback (instructors)."""
        lines = [self.title] if self.title else []
        for i, q in enumerate(self.questions):
            hint = {"single": "choose one", "multiple": "choose all that apply",
                    "numeric": f"a number{' in ' + q.unit if q.unit else ''}"}[q.kind]
            lines.append(f"Q{i + 1}. {q.prompt} ({hint})")
            for j, o in enumerate(q.options):
                mark = ""
                if show_answers:
                    mark = " [correct]" if o.correct else ""
                lines.append(f"   {_letter(j)}) {o.text}{mark}")
                if show_answers:
                    lines.append(f"      feedback: {o.feedback}")
            if q.kind == "numeric" and show_answers:
                lines.append(f"   answer: {q.answer:g} {q.unit} (+/- {q.tolerance:g})".rstrip())
                for key, text in q.feedback.items():
                    lines.append(f"      feedback ({key}): {text}")
            if show_answers and q.explanation:
                lines.append(f"   why: {q.explanation}")
        return "\n".join(lines)


def lessons() -> list[str]:
    """Names (``NN_slug``) of the lessons whose knowledge check ships with the package."""
    return sorted(p.name[:-5] for p in _quiz_dir().iterdir() if p.name.endswith(".json"))


def load(lesson: str) -> Quiz:
    """The knowledge check of ``lesson`` (``"01"`` or ``"01_mixed_precision"``), unshuffled,
    from ``greenlab/quizzes/NN_slug.json``; ValueError names the lessons that have one."""
    names = lessons()
    key = str(lesson).strip()
    matches = [n for n in names if n == key or n.split("_", 1)[0] == key]
    if len(matches) != 1:
        raise ValueError(f"lesson must be one of {', '.join(n[:2] for n in names)} "
                         f"(or the full name, e.g. {names[0]!r}); got {lesson!r}")
    name = matches[0]
    path = _quiz_dir() / f"{name}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"the quiz file {path} could not be read: {err}") from None
    if not isinstance(data, dict) or "questions" not in data:
        raise ValueError(f"the quiz file {path} must hold an object with 'title' and 'questions'")
    try:
        q = Quiz(data["questions"], title=data.get("title"))
    except ValueError as err:
        raise ValueError(f"the quiz file {path}: {err}") from None
    q.lesson = name
    return q


def session_seed() -> int:
    """The shuffling seed: ``GREENLAB_QUIZ_SEED`` if set (an integer), else a number drawn
    once per process, so the order is stable within a kernel session."""
    raw = os.environ.get(SEED_ENV, "").strip()
    if not raw:
        return _SESSION_SEED
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{SEED_ENV} must be an integer; got {raw!r}") from None


def shuffled(q: Quiz, seed: int | None = None) -> Quiz:
    """A copy of ``q`` with every choice question's options in a new order.

    Seeded by ``seed`` (default :func:`session_seed`), the quiz's title and each
    question's prompt, so the same seed always gives the same order. The correct
    option of single-choice questions lands on positions spread evenly: taken in a
    random order, each question draws its answer's position from the least-used of
    the positions every question has, or from a position only longer questions have
    (an option "d" among three-option questions). Over the shared positions the
    counts differ by at most one; give a quiz's single-choice questions equally many
    options and every position is equally likely. Numeric questions are unchanged.
    """
    seed = session_seed() if seed is None else int(seed)
    quiz_rng = _rng(seed, q.title or "", "positions")
    singles = [i for i, x in enumerate(q.questions) if x.kind == "single"]
    quiz_rng.shuffle(singles)
    shared = min((len(q.questions[i].options) for i in singles), default=0)
    used = [0] * shared
    target = {}
    for i in singles:
        fewest = min(used)
        extra = range(shared, len(q.questions[i].options))  # positions only longer questions have
        target[i] = quiz_rng.choice([j for j in range(shared) if used[j] == fewest] + list(extra))
        if target[i] < shared:
            used[target[i]] += 1
    questions = []
    for i, x in enumerate(q.questions):
        if x.kind == "numeric":
            questions.append(x)
            continue
        options = list(x.options)
        _rng(seed, q.title or "", x.prompt).shuffle(options)
        if i in target:
            right = next(o for o in options if o.correct)
            options.remove(right)
            options.insert(target[i], right)
        questions.append(replace(x, options=tuple(options)))
    out = Quiz(questions, title=q.title)
    out.lesson = getattr(q, "lesson", None)
    return out


def make_question(data: dict) -> Question:
    """Validate one question dict and return a :class:`Question`; ValueError says what is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"a question must be a dict, got {type(data).__name__}")
    kind = data.get("kind", data.get("type"))
    if kind not in KINDS:
        raise ValueError(f"'kind' must be one of {', '.join(KINDS)}; got {kind!r}")
    prompt = data.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("'prompt' must be a non-empty string")
    explanation = str(data.get("explanation", ""))
    if kind == "numeric":
        return _make_numeric(data, prompt, explanation)
    options = _make_options(data.get("options"))
    n_correct = sum(o.correct for o in options)
    if kind == "single" and n_correct != 1:
        raise ValueError(f"a single-choice question needs exactly one correct option; got {n_correct}")
    if kind == "multiple" and n_correct < 1:
        raise ValueError("a multiple-choice question needs at least one correct option")
    return Question(kind=kind, prompt=prompt, options=options, explanation=explanation)


def grade_question(q: Question, answer, index: int = 0) -> QuestionResult:
    """Grade one answer to ``q``; see :meth:`Quiz.grade` for the accepted answer forms."""
    if answer is None or (q.kind == "multiple" and _is_empty_selection(answer)):
        return QuestionResult(index, False, False, ["Not answered."])
    if q.kind == "numeric":
        return _grade_numeric(q, answer, index)
    if q.kind == "single":
        j = _option_index(q, answer)
        option = q.options[j]
        return QuestionResult(index, option.correct, True, [option.feedback])
    if isinstance(answer, (str, int)):
        raise ValueError(f"question {index + 1} is multiple choice: answer with a list of options")
    chosen = sorted({_option_index(q, a) for a in answer})
    feedback = [q.options[j].feedback for j in chosen]
    missed = [j for j in q.correct_indices if j not in chosen]
    if missed:
        feedback.append(f"Not all correct options were chosen ({len(missed)} missing).")
    return QuestionResult(index, tuple(chosen) == q.correct_indices, True, feedback)


# --- helpers ---------------------------------------------------------------


def _make_options(raw) -> tuple[Option, ...]:
    if not isinstance(raw, (list, tuple)) or len(raw) < 2:
        raise ValueError("'options' must be a list of at least two option dicts")
    options = []
    for j, o in enumerate(raw):
        if not isinstance(o, dict):
            raise ValueError(f"option {j + 1} must be a dict with 'text' and 'feedback'")
        text, feedback = o.get("text"), o.get("feedback")
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"option {j + 1} needs a non-empty 'text'")
        if not isinstance(feedback, str) or not feedback.strip():
            raise ValueError(f"option {j + 1} ({text!r}) needs its own non-empty 'feedback'")
        correct = o.get("correct", False)
        if not isinstance(correct, bool):
            raise ValueError(f"option {j + 1}: 'correct' must be True or False")
        options.append(Option(text=text, feedback=feedback, correct=correct))
    texts = [o.text for o in options]
    if len(set(texts)) != len(texts):
        raise ValueError("option texts must be distinct")
    return tuple(options)


def _make_numeric(data: dict, prompt: str, explanation: str) -> Question:
    answer, tolerance = data.get("answer"), data.get("tolerance")
    if not _is_number(answer):
        raise ValueError("a numeric question needs a finite number 'answer'")
    if not _is_number(tolerance) or tolerance < 0:
        raise ValueError("a numeric question needs a 'tolerance' >= 0 (absolute, in the answer's unit)")
    feedback = data.get("feedback")
    if not isinstance(feedback, dict) or not isinstance(feedback.get("correct"), str):
        raise ValueError("a numeric question needs 'feedback' with a 'correct' text")
    has_wrong = isinstance(feedback.get("incorrect"), str) or (
        isinstance(feedback.get("too_low"), str) and isinstance(feedback.get("too_high"), str))
    if not has_wrong:
        raise ValueError("numeric 'feedback' needs 'incorrect', or both 'too_low' and 'too_high'")
    unknown = set(feedback) - {"correct", "incorrect", "too_low", "too_high"}
    if unknown:
        raise ValueError(f"unknown numeric feedback keys {sorted(unknown)}; "
                         "allowed: correct, incorrect, too_low, too_high")
    return Question(kind="numeric", prompt=prompt, answer=float(answer), tolerance=float(tolerance),
                    unit=str(data.get("unit", "")), feedback=dict(feedback), explanation=explanation)


def _grade_numeric(q: Question, answer, index: int) -> QuestionResult:
    if isinstance(answer, str):
        answer = _number_in_unit(q, answer, index)
    if not _is_number(answer):
        raise ValueError(f"question {index + 1} needs a finite number; got {answer!r}")
    if abs(answer - q.answer) <= q.tolerance:
        return QuestionResult(index, True, True, [q.feedback["correct"]])
    key = "too_low" if answer < q.answer else "too_high"
    text = q.feedback.get(key, q.feedback.get("incorrect"))
    return QuestionResult(index, False, True, [text])


def _number_in_unit(q: Question, text: str, index: int) -> float:
    """A typed numeric answer: a number, optionally followed by the question's own unit
    ("2", "2 GFLOP", "2GFLOP"). Another unit is refused rather than guessed at: "2 MFLOP" is
    not 2 GFLOP. Letter case may differ except in the first letter, the SI prefix (m vs M)."""
    wanted = f"a number{' in ' + q.unit if q.unit else ''}"
    example = f" (e.g. '2' or '2 {q.unit}')" if q.unit else ""
    text = text.strip().rstrip(".,;:!?") if not re.fullmatch(r"\s*[-+]?\d*\.\s*", text) else text
    match = re.fullmatch(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*", text)
    if match is None:
        raise ValueError(f"question {index + 1} needs {wanted}{example}; got {text!r}")
    number, unit = match.groups()
    if unit:
        same = unit == q.unit or (q.unit and unit.lower() == q.unit.lower() and unit[0] == q.unit[0])
        if not same:
            raise ValueError(f"question {index + 1} needs {wanted}{example}; got {text!r}"
                             + (f" (the unit is {q.unit}, not {unit})" if q.unit else " (no unit here)"))
    return float(number)


def option_index(q: Question, answer) -> int:
    """The index of the option ``answer`` names in ``q`` as shown: an index (a = 0), a letter
    (``"b"``, ``"b)"``) or the option's text, compared with case, spaces and trailing punctuation
    set aside (``"128 "`` and ``"128."`` name the option ``"128"``)."""
    if isinstance(answer, bool):
        raise ValueError("an option is chosen by its index or its text, not True/False")
    if isinstance(answer, int):
        if not 0 <= answer < len(q.options):
            raise ValueError(f"option index {answer} out of range 0..{len(q.options) - 1}")
        return answer
    if isinstance(answer, str):
        wanted = normal_text(answer)
        matches = [j for j, o in enumerate(q.options) if normal_text(o.text) == wanted]
        if len(matches) == 1:
            return matches[0]
        letter = re.fullmatch(r"\s*\(?([a-zA-Z])[).]?\s*", answer)
        if letter and not matches and "a" <= letter.group(1).lower() < _letter(len(q.options)):
            return ord(letter.group(1).lower()) - ord("a")
        raise ValueError(f"{answer!r} is not one of the options: {[o.text for o in q.options]}")
    raise ValueError(f"an option is chosen by its index (int), letter or text (str); got {answer!r}")


_option_index = option_index


def normal_text(text: str) -> str:
    """``text`` compared loosely: case folded, runs of spaces made one, spaces and trailing
    punctuation (. , ; : ! ?) at the ends dropped."""
    return re.sub(r"\s+", " ", text.casefold()).strip().rstrip(".,;:!?").strip()


def _is_empty_selection(answer) -> bool:
    return isinstance(answer, (list, tuple, set, frozenset)) and len(answer) == 0


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _quiz_dir():
    return resources.files("greenlab") / "quizzes"


def _rng(seed: int, *parts: str) -> random.Random:
    """A generator seeded by ``seed`` and text (stable across processes, unlike hash())."""
    digest = hashlib.sha256("\x1f".join([str(seed), *parts]).encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _letter(j: int) -> str:
    return "abcdefghijklmnopqrstuvwxyz"[j] if j < 26 else str(j + 1)
