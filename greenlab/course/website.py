"""The course as a website: every learner copy as an HTML page, with an index and navigation.

    python -m greenlab.course.website --out artifacts/site             # offline; open artifacts/site/index.html
    python -m greenlab.course.website --out artifacts/site --execute   # with every cell's output, run here

Each page is the learner copy rendered by nbconvert (JupyterLab's look), headed by a bar with the
index, the previous and next lessons and the lesson's Colab and Binder links
(``greenlab.course.hosted``). The index lists every lesson by its title with the same links. Nothing
is fetched while building. Without ``--execute`` only checked cells carry outputs, as in the
repository; with it, each copy is first run top to bottom in a Jupyter kernel (nbclient) in the mode
this machine gives a learner (``--quick``: CI's quick mode), in a scratch copy of the lessons folder,
and every page says on which CPU, in which mode and when its outputs were made: the site then shows
one recorded run, as a reader would see it before running anything.
"""

from __future__ import annotations

import argparse
import datetime
import html
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from greenlab.base.optional import require
from greenlab.base.paths import lessons_dir
from greenlab.course import hosted
from greenlab.energy.estimate import cpu_model_name

NAV_CLASS = "greenlab-nav"
_STYLE = """<style>
.greenlab-nav { font-family: system-ui, sans-serif; padding: 8px 16px; border-bottom: 1px solid #ccc;
                display: flex; gap: 16px; align-items: center; flex-wrap: wrap; background: #f6f8f6; }
.greenlab-nav a { text-decoration: none; }
.greenlab-index { font-family: system-ui, sans-serif; max-width: 60em; margin: 2em auto; }
.greenlab-index td { padding: 4px 12px 4px 0; vertical-align: middle; }
</style>"""


def lesson_title(nb: dict) -> str:
    """The lesson's title: the first markdown heading ``# NN · Title`` of the notebook."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            for line in "".join(cell.get("source", "")).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return ""


CELL_TIMEOUT_S = 900  # one cell of an executed copy, at most (seconds)


def build_site(out: str | os.PathLike, lessons: str | os.PathLike | None = None,
               only: list[str] | None = None, execute: bool = False, quick: bool = False,
               echo: bool = True) -> list[Path]:
    """Write ``index.html`` and one page per learner copy into ``out``; returns the pages written.
    ``lessons``: the lessons folder (default ``greenlab.base.paths.lessons_dir()``); ``only``: lesson
    numbers ("00", "02") to render, all when None. ``execute``: run each copy first (see the module
    text; ``quick`` picks CI's quick mode), one progress line per lesson when ``echo``."""
    nbconvert = require("nbconvert", "the course website")  # lazy: nbconvert comes with JupyterLab (lab)
    folder = Path(lessons) if lessons is not None else lessons_dir()
    paths = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
    if only is not None:
        paths = [p for p in paths if p.name[:2] in set(only)]
    if not paths:
        raise FileNotFoundError(f"no learner copies (NN_slug.ipynb) in {folder}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    exporter = nbconvert.HTMLExporter(template_name="lab")
    titles = {p.stem: lesson_title(json.loads(p.read_text(encoding="utf-8"))) or p.stem for p in paths}
    stems = [p.stem for p in paths]
    executed = _execute_all(folder, paths, quick, echo) if execute else {}
    written = []
    for i, path in enumerate(paths):
        if path.stem in executed:
            notebook, provenance = executed[path.stem]
            body, _ = exporter.from_notebook_node(notebook)
        else:
            body, _ = exporter.from_filename(str(path))
            provenance = ""
        nav = _nav(stems, titles, i, provenance)
        body = re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + "\n" + nav, body, count=1)
        body = body.replace("</head>", _STYLE + "\n</head>", 1)
        page = out / f"{path.stem}.html"
        page.write_text(body, encoding="utf-8")
        written.append(page)
    (out / "index.html").write_text(_index(stems, titles), encoding="utf-8")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m greenlab.course.website", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder to write the site into")
    parser.add_argument("--lessons", default=None, help="the lessons folder (default: lessons/)")
    parser.add_argument("--only", nargs="*", default=None, help="lesson numbers to render, e.g. 00 03")
    parser.add_argument("--execute", action="store_true",
                        help="run each lesson first (a Jupyter kernel, this machine's default mode) and show every output")
    parser.add_argument("--quick", action="store_true", help="with --execute: CI's quick mode (GREENLAB_QUICK=1)")
    args = parser.parse_args(argv)
    if args.quick and not args.execute:
        parser.error("--quick goes with --execute")
    pages = build_site(args.out, args.lessons, args.only, execute=args.execute, quick=args.quick)
    print(f"{len(pages)} lesson page(s) and {Path(args.out) / 'index.html'}")
    return 0


# --- helpers ---------------------------------------------------------------------------------


def _launch_links(stem: str) -> str:
    return (f'<a class="greenlab-colab" href="{html.escape(hosted.colab_url(stem))}">Open in Colab</a>'
            f'<a class="greenlab-binder" href="{html.escape(hosted.binder_url(stem))}">Launch on Binder</a>')


def _execute_all(folder: Path, paths: list[Path], quick: bool, echo: bool) -> dict:
    """{stem: (executed notebook, provenance line)}: each copy run top to bottom in a kernel, in a
    scratch copy of ``folder`` (the repository's lessons and their side files stay untouched)."""
    nbformat = require("nbformat", "the course website's --execute")
    nbclient = require("nbclient", "the course website's --execute")
    mode = "quick mode (GREENLAB_QUICK=1)" if quick else "the mode this machine gives a learner"
    saved = {k: os.environ.get(k) for k in ("GREENLAB_QUICK", "MPLBACKEND")}
    if quick:
        os.environ["GREENLAB_QUICK"] = "1"
    os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend, so figures are kept as outputs
    done = {}
    try:
        with tempfile.TemporaryDirectory(prefix="greenlab-site-") as tmp:
            scratch = Path(tmp) / "lessons"
            shutil.copytree(folder, scratch, ignore=shutil.ignore_patterns("instructor", ".ipynb_checkpoints"))
            for n, path in enumerate(paths, 1):
                if echo:
                    print(f"greenlab.website [{n}/{len(paths)}] running {path.name} ...", flush=True)
                t0 = time.perf_counter()
                notebook = nbformat.read(scratch / path.name, as_version=4)
                client = nbclient.NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                                 resources={"metadata": {"path": str(scratch)}})
                try:
                    client.execute()
                except Exception as err:  # noqa: BLE001 - the page still shows what ran, and says it failed
                    failed = f"; it stopped at an error ({type(err).__name__})"
                else:
                    failed = ""
                seconds = time.perf_counter() - t0
                when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
                done[path.stem] = (notebook, f"Outputs from one run on {cpu_model_name() or 'an unnamed CPU'}, "
                                             f"{mode}, {when}, {seconds:.0f} s{failed}.")
                if echo:
                    print(f"greenlab.website [{n}/{len(paths)}] {path.name}: {seconds:.0f} s{failed}", flush=True)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return done


def _nav(stems: list[str], titles: dict, i: int, provenance: str = "") -> str:
    links = ['<a class="greenlab-home" href="index.html">All lessons</a>']
    if i > 0:
        before = stems[i - 1]
        links.append(f'<a class="greenlab-prev" href="{before}.html">&larr; {html.escape(titles[before])}</a>')
    if i + 1 < len(stems):
        after = stems[i + 1]
        links.append(f'<a class="greenlab-next" href="{after}.html">{html.escape(titles[after])} &rarr;</a>')
    run = f'<span class="greenlab-run">{html.escape(provenance)}</span>' if provenance else ""
    return f'<nav class="{NAV_CLASS}">' + "".join(links) + _launch_links(stems[i]) + run + "</nav>"


def _index(stems: list[str], titles: dict) -> str:
    rows = "\n".join(f'<tr><td><a class="greenlab-lesson" href="{s}.html">{html.escape(titles[s])}</a></td>'
                     f"<td>{_launch_links(s).replace('</a><a', '</a> · <a')}</td></tr>" for s in stems)
    return (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>greenlab: the course</title>{_STYLE}"
            f"</head><body><main class='greenlab-index'><h1>greenlab: the course</h1>"
            f"<p>Train neural networks with less time, money, energy and carbon, and measure it yourself. "
            f"Read a lesson here, or run it: each opens in Colab or on Binder "
            f"(<a href='{html.escape(hosted.binder_url(None))}'>the whole course on Binder</a>).</p>"
            f"<table>\n{rows}\n</table></main></body></html>\n")


if __name__ == "__main__":
    sys.exit(main())
