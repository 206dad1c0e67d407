"""Instructor and learner notebooks from one source of truth: build, check, new lesson, and the command line::

    python -m greenlab.course build            # normalise instructor copies, write learner copies
    python -m greenlab.course check            # exit 1 with a summary when anything is out of sync
    python -m greenlab.course new 03 gradient_accumulation "Gradient accumulation"
    python -m greenlab.course run lessons/instructor/02_gradient_accumulation.ipynb   # headless
    python -m greenlab.course.nbgrader --out COURSE_DIR   # an nbgrader course from the instructor copies

The format and its markers are ``greenlab.course.notebook_format``'s; ``check`` also holds every lesson to the
claims rules (``greenlab.course.claims``) and reports a checked cell with no stored output, so run those cells
and save before building; ``run`` is ``greenlab.course.headless``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

from greenlab.course import results as course_results
from greenlab.course.claims import claim_problems
from greenlab.course.headless import SILENCE_LIMIT_S, LessonRunError, run_notebook
from greenlab.course.hosted import with_launch_cells  # Colab/Binder badges and the install cell
from greenlab.course.lesson_time import load_times, stale_lessons, with_lesson_time
from greenlab.course.notebook_format import (
    _STEM_RE, CHECK_OUTPUT_MARK, LessonError, _check_stem, _checks_output, _joined, _read_json, _rel, code, dumps,
    instructor_notebooks, learner_notebook, lessons_dir, md, normalise, notebook)
from greenlab.base.limits import RUN_LIMIT_S
from greenlab.base.processes import die_with_parent


def expected_files(folder: str | os.PathLike | None = None) -> dict[Path, str]:
    """Every file the build should produce (instructor and learner copies) mapped to its text; a
    learner copy's ``**Time:** <!-- lesson-time -->`` line is filled (``greenlab.course.lesson_time``)."""
    root = lessons_dir(folder)
    files: dict[Path, str] = {}
    times = load_times()
    for path in instructor_notebooks(root):
        stem = _check_stem(path)
        raw = _read_json(path)
        files[path] = dumps(normalise(raw, stem))
        learner = with_launch_cells(learner_notebook(raw, stem), stem)
        files[root / path.name] = dumps(with_lesson_time(learner, raw, stem, times))
    return files


def build(folder: str | os.PathLike | None = None) -> list[Path]:
    """Normalise every instructor copy and (re)write its learner copy; returns the files that changed."""
    changed = []
    for path, text in expected_files(folder).items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    return changed


def check(folder: str | os.PathLike | None = None) -> list[str]:
    """Problems that keep the lessons out of sync (empty when all is well).

    Covers stale or missing learner copies, instructor copies that are not
    normalised, learner notebooks without an instructor source, and broken markers.
    """
    root = lessons_dir(folder)
    problems: list[str] = []
    try:
        expected = expected_files(root)
    except LessonError as exc:
        return [str(exc)]
    for path, text in expected.items():
        rel = _rel(path, root)
        if not path.exists():
            problems.append(f"{rel}: missing (it is generated from the instructor copy)")
            continue
        actual = path.read_text(encoding="utf-8")
        if actual != text:
            problems.append(f"{rel}: out of sync\n" + _diff_summary(actual, text))
    for path in instructor_notebooks(root):
        for index, cell in enumerate(json.loads(expected[path])["cells"]):
            if cell["cell_type"] == "code" and _checks_output(cell) and not cell["outputs"]:
                problems.append(
                    f"{_rel(path, root)}: cell {index} ({cell['id']}) is marked {CHECK_OUTPUT_MARK} "
                    "but has no stored output, so nbval would not compare it; run it, save, then build"
                )
    sources = {p.name for p in instructor_notebooks(root)}
    for path in sorted(root.glob("*.ipynb")) if root.is_dir() else []:
        if path.name not in sources:
            problems.append(f"{_rel(path, root)}: learner notebook without an instructor copy in "
                            f"instructor/{path.name}")
    return problems


def new_lesson(number: int | str, slug: str, title: str, folder: str | os.PathLike | None = None) -> Path:
    """Scaffold ``instructor/NN_slug.ipynb`` in the course's lesson shape and build its learner copy."""
    if isinstance(number, bool) or not (isinstance(number, int) or re.fullmatch(r"\d{1,2}", str(number))):
        raise ValueError(f"lesson number must be a whole number 0-99 such as 03, got {number!r}")
    stem = f"{int(number):02d}_{slug}"
    if not _STEM_RE.match(stem):
        raise ValueError(
            f"lesson number must be 0-99 and slug lower-case words joined by '_' (e.g. mixed_precision), "
            f"got {number!r} {slug!r}"
        )
    if not title.strip():
        raise ValueError("the lesson title must not be empty")
    root = lessons_dir(folder)
    path = root / "instructor" / f"{stem}.ipynb"
    if path.exists():
        raise FileExistsError(f"{path} already exists; edit it instead")
    notebook(_scaffold_cells(slug, title, int(number)), path)
    build(root)
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m greenlab.course build|check|new|run|results``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m greenlab.course",
                                     description="Build and check the lesson notebooks.")
    parser.add_argument("--lessons", default=None, help="lessons folder (default: lessons/ beside the package)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="normalise instructor copies and write learner copies")
    sub.add_parser("check", help="exit 1 if any learner copy or instructor copy is out of sync, or a "
                   "lesson calls a validation figure test accuracy or states a saving without a verdict")
    new = sub.add_parser("new", help="scaffold a new lesson")
    new.add_argument("number", help="two-digit lesson number, e.g. 03")
    new.add_argument("slug", help="lower-case words joined by '_', e.g. gradient_accumulation")
    new.add_argument("title", help="the lesson title")
    run = sub.add_parser("run", help="execute lessons' code cells in order, headless (no Jupyter needed)")
    run.add_argument("notebooks", nargs="+", help="notebook files, e.g. lessons/instructor/00_measuring_energy.ipynb")
    run.add_argument("--full", action="store_true", help="full mode (default: quick mode, GREENLAB_QUICK=1)")
    run.add_argument("--max-silence-s", type=float, default=None, metavar="S",
                     help=f"exit 1 when a cell writes nothing for more than S seconds (the course's limit is "
                          f"{SILENCE_LIMIT_S:g}); without it, such cells are listed but do not fail the run")
    course_results.add_arguments(sub.add_parser("results", help="run every lesson's headline headless and write "
                                                "one table (markdown, CSV, JSON)"))
    args = parser.parse_args(argv)
    if args.command == "run":
        return _run_command(args.notebooks, quick=not args.full, max_silence_s=args.max_silence_s)
    if args.command == "results":
        return course_results.run_from_args(args)
    root = lessons_dir(args.lessons)
    try:
        if args.command == "build":
            changed = build(root)
            for path in changed:
                print(f"wrote {_rel(path, root)}")
            print(f"{len(instructor_notebooks(root))} lesson(s) built, {len(changed)} file(s) changed.")
            return 0
        if args.command == "check":
            problems = check(root)
            claims = claim_problems(root)
            if problems:
                print("\n".join(problems))
                print(f"\n{len(problems)} problem(s). "
                      "Run `python -m greenlab.course build` after editing lessons/instructor/.")
            if claims:
                print("\n".join(claims))
                print(f"\n{len(claims)} claim(s) the lessons must not make (validation figures called test "
                      "accuracy, break-evens or savings without a verdict, equivalence in fixed text, paths "
                      "that do not exist, outcomes stated before the run, constants the library no longer holds).")
            if problems or claims:
                return 1
            print(f"{len(instructor_notebooks(root))} lesson(s) in sync; no claim without its verdict.")
            stale = stale_lessons({p.stem: _read_json(p) for p in instructor_notebooks(root)})
            if stale:  # said, not failed: the time line itself says the time came from earlier code
                print(f"running time measured on earlier code in {len(stale)} lesson(s): {', '.join(stale)}; "
                      "re-measure with python -m greenlab.course results --lesson-times")
            return 0
        path = new_lesson(args.number, args.slug, args.title, root)
        print(f"created {_rel(path, root)} and its learner copy")
        return 0
    except (LessonError, ValueError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run_command(paths: list[str], quick: bool, max_silence_s: float | None = None) -> int:
    """``run``: each lesson in turn; exit 1 at the first failing cell (or, with ``max_silence_s``,
    after the lessons when a cell was silent for longer), 2 for a missing file.
    Started by a program that set ``$GREENLAB_PARENT_PID`` (the GPU suite), it dies with it."""
    if os.environ.get("GREENLAB_PARENT_PID"):
        die_with_parent()
    if max_silence_s is not None and not (math.isfinite(max_silence_s) and 0 < max_silence_s <= RUN_LIMIT_S):
        print(f"error: --max-silence-s must be a number of seconds in (0, {RUN_LIMIT_S:g}] (a week, the longest a "
              f"run may take), got {max_silence_s!r}", file=sys.stderr)
        return 2
    for name in paths:
        if not Path(name).is_file():
            print(f"error: no notebook at {name}", file=sys.stderr)
            return 2
    silent = []
    for name in paths:
        try:
            done = run_notebook(name, quick=quick, max_silence_s=max_silence_s or SILENCE_LIMIT_S)
        except LessonRunError as exc:
            print(f"FAILED {exc}", file=sys.stderr, flush=True)
            return 1
        except LessonError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"passed {done.lesson}: {done.cells_run} code cells in {done.seconds:.1f} s"
              + (f" ({len(done.notes)} headless note(s))" if done.notes else ""), flush=True)
        for where, seconds in done.silences:
            print(f"silent {where}: {seconds:.0f} s with no output", flush=True)
        silent += done.silences
    if max_silence_s is not None and silent:
        print(f"{len(silent)} cell(s) silent for more than {max_silence_s:g} s: print progress "
              "(greenlab.base.progress) in the calls they wait on", file=sys.stderr)
        return 1
    return 0


def _diff_summary(actual_text: str, expected_text: str, max_cells: int = 5, max_lines: int = 12) -> str:
    """A short, readable account of how a file on disk differs from what the build would write."""
    try:
        actual = json.loads(actual_text)
        actual_cells = actual.get("cells", [])
    except (json.JSONDecodeError, AttributeError):
        return "    the file on disk is not valid notebook JSON"
    expected = json.loads(expected_text)
    lines = []
    if actual.get("metadata") != expected["metadata"] or actual.get("nbformat_minor") != expected["nbformat_minor"]:
        lines.append("    notebook metadata differs (only kernelspec and language_info are kept)")
    exp_cells = expected["cells"]
    if len(actual_cells) != len(exp_cells):
        lines.append(f"    {len(actual_cells)} cells on disk, {len(exp_cells)} expected")
    shown_diff = False
    reported = 0
    for index in range(max(len(actual_cells), len(exp_cells))):
        if reported == max_cells:
            lines.append("    ... (more cells differ)")
            break
        a = actual_cells[index] if index < len(actual_cells) else None
        e = exp_cells[index] if index < len(exp_cells) else None
        if a == e:
            continue
        reported += 1
        if a is None or e is None:
            lines.append(f"    cell {index}: {'missing on disk' if a is None else 'extra on disk'}")
            continue
        reasons = [key for key in ("cell_type", "id", "metadata", "source", "outputs", "execution_count", "attachments")
                   if a.get(key) != e.get(key)]
        lines.append(f"    cell {index} ({e.get('id')}): {', '.join(reasons) or 'layout'} differ(s)")
        if "source" in reasons and not shown_diff:
            shown_diff = True
            diff = list(difflib.unified_diff(
                _joined(a.get("source", "")).splitlines(), _joined(e.get("source", "")).splitlines(),
                "on disk", "expected", lineterm="", n=1,
            ))
            lines += ["      " + d for d in diff[:max_lines]]
            if len(diff) > max_lines:
                lines.append("      ...")
    return "\n".join(lines) if lines else "    formatting differs (run build to rewrite it)"


def _scaffold_cells(slug: str, title: str, number: int) -> list[dict[str, Any]]:
    """The cells of a new lesson, in the shape every lesson follows."""
    return [
        md(f"""
            # {number:02d} · {title}

            **Goals.** By the end of this lesson you can: (1) ...; (2) ...; (3) ...

            **Time.** About 45 minutes in class; quick mode (`GREENLAB_QUICK=1`) runs in a few minutes on a CPU.

            <!-- BEGIN INSTRUCTOR -->
            **Instructor notes.** Timing per section, common questions, what to demo live.
            <!-- END INSTRUCTOR -->
        """),
        code("""
            import greenlab as gl

            settings = gl.setup()
        """),
        md("""
            ## Why it matters

            The cost and benefit of this technique in time, money, energy and carbon: what it saves,
            what it can cost (accuracy, complexity), and when it is not worth it.
        """),
        md("""
            ## A measured baseline

            Measure the unchanged training run first, so every later change is compared with it.
        """),
        code("""
            # Train the baseline here with gl.train(...) inside gl.measure(...), and keep the result.
        """),
        md("""
            ## One change at a time

            Each change gets its own measured run and is compared with the baseline.
        """),
        code("""
            # Make one change (one TrainConfig field), measure it, and compare with gl.compare(...).
        """),
        md("""
            ## What it means on a real GPU

            Runs recorded on a named GPU (or a plain statement that none has been recorded yet).
        """),
        code(f"""
            gl.reference.show("{slug}")
        """),
        md("""
            ## Exercise 1

            Describe the task, its inputs with units, and what the function should return.
        """),
        code("""
            def exercise_1(x):
                # BEGIN SOLUTION
                return x
                # LEARNER:
                # return None  # replace with your answer
                # END SOLUTION
        """),
        code("""
            gl.check.check_function(exercise_1, cases=[((1.0,), 1.0), ((2.5,), 2.5)])
        """),
        md("""
            ## Explain it to a non-technical stakeholder

            A short summary generated from your own measured numbers (for example
            `comparison.stakeholder_summary()`).
        """),
        code("""
            # Print the stakeholder summary of your comparison here.
        """),
        md("""
            ## Knowledge check

            A few questions with feedback on every option (gl.quiz).
        """),
        code("""
            # Show the knowledge-check questions here.
        """),
        md("""
            ## Summary

            - What we measured, and on which hardware.
            - What changed, by how much, and at what cost.
        """),
        md("""
            ## References

            - Sources for every figure that is not measured in this notebook (author, title, year).
        """),
    ]


if __name__ == "__main__":
    code = main()
    if sys.argv[1:2] == ["run"]:
        # A headless run's outcome is printed; the interpreter's teardown has nothing left to do
        # but meet the lessons' leftover daemon threads (a loader thread inside a torch call aborts
        # it with "terminate called without an active exception"), so the process leaves here, as
        # the torchrun workers do once their result is written.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
