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
ONLY = ["00", "03", "06"]


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
