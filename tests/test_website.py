"""The course as a website (greenlab.course.website): pages, an index, navigation, launch links, in Chromium."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from greenlab.course import hosted, website

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("GREENLAB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
ONLY = ["00", "02", "05"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    pages = website.build_site(out, ROOT / "lessons", only=ONLY)
    return out, pages


def test_every_chosen_lesson_has_a_page_and_the_index_links_them_with_launch_links(site):
    out, pages = site
    stems = sorted(p.stem for p in (ROOT / "lessons").glob("[0-9][0-9]_*.ipynb") if p.name[:2] in ONLY)
    assert [p.stem for p in pages] == stems
    index = (out / "index.html").read_text()
    for stem in stems:
        assert f'href="{stem}.html"' in index and hosted.colab_url(stem) in index
        page = (out / f"{stem}.html").read_text()
        assert website.NAV_CLASS in page and "jp-CodeCell" in page and "<h1" in page
        body = page[page.index("<body"):]
        assert body.index(website.NAV_CLASS) < body.index("jp-CodeCell")  # the bar heads the page
    middle = (out / f"{stems[1]}.html").read_text()
    assert f'href="{stems[0]}.html"' in middle and f'href="{stems[2]}.html"' in middle


def test_titles_come_from_the_lessons_first_heading():
    assert website.lesson_title({"cells": [{"cell_type": "markdown", "source": "x\n# 03 · Gradient accumulation\n"}]}) \
        == "03 · Gradient accumulation"


def test_an_executed_site_shows_every_output_and_says_where_it_ran(tmp_path):
    """--execute runs each copy in a kernel in a scratch folder: its printed output and its figure
    are on the page, the bar says which CPU, mode and time made them, a failing copy's page says it
    stopped, and the lessons folder is left as it was."""
    import nbformat

    lessons = tmp_path / "lessons"
    lessons.mkdir()
    ok = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# 00 · A lesson"),
        nbformat.v4.new_code_cell("open('side.txt', 'w').write('x')\nprint('marker', 6 * 7)"),
        nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()")])
    broken = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 01 · Another"),
                                             nbformat.v4.new_code_cell("print('before')\nraise ValueError('planted')")])
    nbformat.write(ok, lessons / "00_a.ipynb")
    nbformat.write(broken, lessons / "01_b.ipynb")
    before = sorted(p.name for p in lessons.iterdir())
    out = tmp_path / "site"
    website.build_site(out, lessons, execute=True, quick=True, echo=False)
    page = (out / "00_a.html").read_text()
    assert "marker 42" in page and "data:image/png;base64" in page
    assert "Outputs from one run on" in page and "quick mode" in page and "stopped" not in page
    failed = (out / "01_b.html").read_text()
    assert "before" in failed and "planted" in failed and "it stopped at an error" in failed
    assert sorted(p.name for p in lessons.iterdir()) == before  # side files went to the scratch copy
    unexecuted = tmp_path / "plain"
    website.build_site(unexecuted, lessons, echo=False)
    assert "marker 42" not in (unexecuted / "00_a.html").read_text()
    with pytest.raises(SystemExit):
        website.main(["--out", str(tmp_path / "x"), "--lessons", str(lessons), "--quick"])  # --quick needs --execute


def test_no_lessons_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no learner copies"):
        website.build_site(tmp_path / "out", tmp_path)


def test_the_site_opens_and_navigates_in_chromium(site):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"Chromium not found at {CHROMIUM}; run .ci/install-browser (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    out, pages = site
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            # no network: only the site's own files load (a CDN script is refused, the page still renders)
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                       else route.abort())
            for built in pages:  # every figure drawn and every link to the site's own pages resolves
                page.goto(built.as_uri())
                page.wait_for_load_state()
                broken = page.evaluate("""() => Array.from(document.images)
                    .filter(img => !img.src.startsWith('http')  // the badges: remote, refused offline
                                   && !(img.complete && img.naturalWidth > 0)).map(img => img.alt || img.src.slice(0, 60))""")
                assert broken == [], (built.name, broken)
                local = page.evaluate("""() => Array.from(document.querySelectorAll('a[href]'))
                    .map(a => a.href).filter(h => h.startsWith('file:'))""")
                for href in local:
                    target = Path(href.split("#")[0].replace("file://", ""))
                    assert target.exists(), (built.name, href)
            page.goto((out / "index.html").as_uri())
            assert page.title() == "greenlab: the course"
            lessons = page.locator("a.greenlab-lesson")
            assert lessons.count() == len(pages)
            lessons.nth(0).click()
            page.wait_for_load_state()
            assert page.url.endswith(f"{pages[0].stem}.html")
            assert page.locator("h1").first.inner_text().startswith(ONLY[0])
            assert page.locator("nav.greenlab-nav a.greenlab-colab").get_attribute("href") == \
                hosted.colab_url(pages[0].stem)
            page.locator("nav.greenlab-nav a.greenlab-next").click()
            page.wait_for_load_state()
            assert page.url.endswith(f"{pages[1].stem}.html")
            page.locator("nav.greenlab-nav a.greenlab-home").click()
            page.wait_for_load_state()
            assert page.url.endswith("index.html")
        finally:
            browser.close()
