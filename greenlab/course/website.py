"""The course as a website: every learner copy as an HTML page, with an index and navigation.

    python -m greenlab.course.website --out artifacts/site     # offline; then open artifacts/site/index.html

Each page is the learner copy rendered by nbconvert (JupyterLab's look; only checked cells carry
outputs, as in the repository), headed by a bar with the index, the previous and next lessons and
the lesson's Colab and Binder links (``greenlab.course.hosted``). The index lists every lesson by
its title with the same links. Nothing is fetched while building.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import sys
from pathlib import Path

from greenlab.base.optional import require
from greenlab.base.paths import lessons_dir
from greenlab.course import hosted

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


def build_site(out: str | os.PathLike, lessons: str | os.PathLike | None = None,
               only: list[str] | None = None) -> list[Path]:
    """Write ``index.html`` and one page per learner copy into ``out``; returns the pages written.
    ``lessons``: the lessons folder (default ``greenlab.base.paths.lessons_dir()``); ``only``: lesson
    numbers ("00", "03") to render, all when None."""
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
    written = []
    for i, path in enumerate(paths):
        body, _ = exporter.from_filename(str(path))
        nav = _nav(stems, titles, i)
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
    args = parser.parse_args(argv)
    pages = build_site(args.out, args.lessons, args.only)
    print(f"{len(pages)} lesson page(s) and {Path(args.out) / 'index.html'}")
    return 0


# --- helpers ---------------------------------------------------------------------------------


def _launch_links(stem: str) -> str:
    return (f'<a class="greenlab-colab" href="{html.escape(hosted.colab_url(stem))}">Open in Colab</a>'
            f'<a class="greenlab-binder" href="{html.escape(hosted.binder_url(stem))}">Launch on Binder</a>')


def _nav(stems: list[str], titles: dict, i: int) -> str:
    links = ['<a class="greenlab-home" href="index.html">All lessons</a>']
    if i > 0:
        before = stems[i - 1]
        links.append(f'<a class="greenlab-prev" href="{before}.html">&larr; {html.escape(titles[before])}</a>')
    if i + 1 < len(stems):
        after = stems[i + 1]
        links.append(f'<a class="greenlab-next" href="{after}.html">{html.escape(titles[after])} &rarr;</a>')
    return f'<nav class="{NAV_CLASS}">' + "".join(links) + _launch_links(stems[i]) + "</nav>"


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
