"""A real browser: JupyterLab on localhost, Debian's Chromium driven by Playwright.

Opens tests/browser/live_meter.ipynb, runs it, and checks that
1. the live meter's energy figure changes at least three times while its cell is still
   running (the kernel is busy and the cell's end marker has not appeared), and
2. an ExperimentPanel's Stop button ends a run: Run, wait for progress, Stop, "stopped";

and opens tests/browser/interrupt.ipynb, runs it, interrupts a long ``gl.train`` cell with
Kernel > Interrupt, and checks that
3. the cell shows the interrupt as one line (what was spent, where the partial run is), no
   traceback, and Run All stops there (the next cell does not run).

Screenshots go to artifacts/browser/. Skips only when Chromium or Playwright is missing
(``.ci/install-browser`` installs Chromium). Never downloads a browser.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "browser" / "live_meter.ipynb"
INTERRUPT_FIXTURE = REPO / "tests" / "browser" / "interrupt.ipynb"
ARTIFACTS = REPO / "artifacts" / "browser"
CHROMIUM = os.environ.get("GREENLAB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    """A JupyterLab server on a free port with temporary root, config, data and runtime dirs."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"Chromium not found at {CHROMIUM}; run .ci/install-browser (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    root = tmp_path / "root"
    root.mkdir()
    for fixture in (FIXTURE, INTERRUPT_FIXTURE):
        shutil.copy(fixture, root / fixture.name)
    env = {k: v for k, v in os.environ.items() if k != "GREENLAB_DISPLAY"}
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR", "IPYTHONDIR",
                 "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR"):
        path = tmp_path / name.lower()
        path.mkdir()
        env[name] = str(path)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    port, token = _free_port(), secrets.token_hex(16)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("*.png"):
        old.unlink()
    log = open(ARTIFACTS / "jupyterlab.log", "w")
    # the venv's python serves, so its ipykernel is the default "python3" kernel
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         "--ServerApp.allow_root=True", "--LabApp.expose_app_in_browser=True",
         "--LabApp.extension_manager=readonly",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for_server(base, token, server, timeout_s=60)
        yield base, token
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=5)
        log.close()


def test_live_meter_updates_while_the_cell_runs_and_panel_stop_works(lab):
    started = time.perf_counter()
    with _notebook_page(lab, FIXTURE.name, "99-failure.png") as page:
        page.screenshot(path=str(ARTIFACTS / "01-opened.png"))
        # not awaited: the command's promise resolves only when every cell has run
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

        trace = _watch_meter(page, timeout_s=75)
        page.screenshot(path=str(ARTIFACTS / "02-meter-finished.png"))
        running = [t for t in trace if t["busy"] and not t["done"]]
        distinct = []
        for t in running:
            if t["joules"] and (not distinct or distinct[-1] != t["joules"]):
                distinct.append(t["joules"])
        assert len(distinct) >= 3, (
            f"the meter's energy figure changed {len(distinct)} times while the cell ran "
            f"(need >= 3): {distinct}; {len(running)} polls while running, {len(trace)} in all. "
            "If it only changed at the end, widget updates from the monitor thread do not reach "
            "the front end.")
        side = [t["side"] for t in running if t["side"]]
        assert side, "the side panel never showed the meter while its cell ran"
        assert trace[-1]["side"] == trace[-1]["joules"], "the side panel's view shows other figures"
        print(f"meter figure while the cell ran: {len(distinct)} distinct values in "
              f"{len(running)} polls: {distinct[:3]} ... {distinct[-1]}")
        _stop_panel_run(page)
        page.screenshot(path=str(ARTIFACTS / "03-panel-stopped.png"))
    print(f"browser test body took {time.perf_counter() - started:.1f} s")


def test_kernel_interrupt_of_a_training_cell_shows_one_line_and_stops_run_all(lab):
    with _notebook_page(lab, INTERRUPT_FIXTURE.name, "99-interrupt-failure.png") as page:
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        _wait_for_output(page, 1, "TRAINING-STARTED", timeout_s=120)
        # inside the training loop: the progress bar counts steps taken ("42/128000 [")
        _wait_for_output(page, 1, re.compile(r"\b[1-9][0-9]*/[0-9]+\s*\["), timeout_s=180)
        page.evaluate("() => window.jupyterapp.commands.execute('kernelmenu:interrupt')")
        page.wait_for_function(_KERNEL_IS("idle"), timeout=60_000)
        time.sleep(1)  # let the last outputs arrive
        page.screenshot(path=str(ARTIFACTS / "04-interrupted.png"))
        texts = page.evaluate(_OUTPUTS_JS)
        trained, after = texts[1], texts[2]
        lines = [line for line in trained.splitlines() if "interrupted" in line]
        assert len(lines) == 1 and lines[0].startswith("greenlab.train: interrupted at step "), trained
        assert "gl.last_interrupted()" in lines[0] and " J" in lines[0], lines[0]
        assert "Traceback" not in trained and "KeyboardInterrupt" not in trained, trained
        assert "AFTER-THE-INTERRUPT" not in after, "Run All went on past the interrupted cell"


# --- helpers ---------------------------------------------------------------


@contextlib.contextmanager
def _notebook_page(lab, name: str, failure_png: str):
    """A Chromium page on notebook ``name`` in ``lab``, its kernel idle; a screenshot on failure."""
    from playwright.sync_api import sync_playwright

    base, token = lab
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = None
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(f"{base}/lab/tree/{name}?token={token}")
            page.wait_for_function(_KERNEL_IS("idle"), timeout=60_000)
            yield page
        except Exception:
            try:
                if page is not None:
                    page.screenshot(path=str(ARTIFACTS / failure_png))
            except Exception:
                pass
            raise
        finally:
            browser.close()

_METER_STATE_JS = """() => {
  const fig = document.querySelector('.jp-Notebook .greenlab-meter-figures .greenlab-joules');
  const status = document.querySelector('.greenlab-meter-status');
  const cells = document.querySelectorAll('.jp-Notebook .jp-CodeCell');
  const meterCell = cells.length > 1 ? cells[1] : null;
  const prompt = meterCell ? meterCell.querySelector('.jp-InputPrompt') : null;
  const outputs = meterCell ? meterCell.querySelector('.jp-OutputArea') : null;
  const text = outputs ? outputs.innerText : '';  // outputs only: the source holds the marker too
  // the second view in JupyterLab's side panel (greenlab/widgets/side.py): outside the notebook
  const side = Array.from(document.querySelectorAll('.greenlab-meter-figures .greenlab-joules'))
    .filter(el => !el.closest('.jp-Notebook'));
  return {joules: fig ? fig.innerText : null, side: side.length ? side[0].innerText : null,
          status: status ? status.innerText : null,
          busy: prompt ? prompt.innerText.includes('*') : false,
          done: text.includes('METER-CELL-DONE'),
          error: text.includes('Traceback'), output: text};
}"""


def _watch_meter(page, timeout_s: float) -> list:
    """Poll the meter's DOM every 0.2 s until its cell has finished; returns the polls."""
    trace, shot = [], False
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        state = page.evaluate(_METER_STATE_JS)
        state["t"] = time.perf_counter()
        trace.append(state)
        if state["error"]:
            raise AssertionError(f"the meter cell raised an error; see {ARTIFACTS}/99-failure.png")
        if state["joules"] and state["busy"] and not shot:
            page.screenshot(path=str(ARTIFACTS / "02-meter-running.png"))
            shot = True
        if state["done"]:
            print(state["output"].strip().splitlines()[-2])  # the meter's overhead line
            return trace
        time.sleep(0.2)
    raise AssertionError(f"the meter cell did not finish within {timeout_s} s; last state {trace[-1:]}")


def _stop_panel_run(page) -> None:
    panel = page.locator(".greenlab-panel")
    panel.wait_for(state="visible", timeout=60_000)
    # by text: the icon's glyph is part of the button's accessible name
    panel.locator("button", has_text="Run").click()
    progress = page.locator(".greenlab-panel-progress")
    try:
        progress.filter(has_text="step").wait_for(timeout=60_000)
    except Exception as err:
        raise AssertionError(f"no training progress shown within 60 s of clicking Run; status: "
                             f"{page.locator('.greenlab-panel-status').inner_text()!r}") from err
    page.screenshot(path=str(ARTIFACTS / "03-panel-running.png"))
    panel.locator("button", has_text="Stop").click()
    status = page.locator(".greenlab-panel-status")
    try:
        status.filter(has_text="stopped").wait_for(timeout=60_000)
    except Exception as err:
        raise AssertionError(f"Stop did not end the run within 60 s; status: {status.inner_text()!r}") from err


def _wait_for_server(base: str, token: str, server: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"JupyterLab exited with {server.returncode}; see {ARTIFACTS}/jupyterlab.log")
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"JupyterLab did not answer within {timeout_s} s; see {ARTIFACTS}/jupyterlab.log")


def _KERNEL_IS(status: str) -> str:
    return ("() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
            " const k = w && w.sessionContext && w.sessionContext.session"
            f" && w.sessionContext.session.kernel; return k && k.status === '{status}'; }}")


_OUTPUTS_JS = """() => Array.from(document.querySelectorAll('.jp-Notebook .jp-CodeCell')).map(cell => {
  const out = cell.querySelector('.jp-OutputArea'); return out ? out.innerText : ''; })"""


def _wait_for_output(page, cell: int, text, timeout_s: float) -> None:
    """Wait until code cell number ``cell`` (0-based) shows ``text`` (a string, or a compiled
    pattern) in its outputs."""
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        texts = page.evaluate(_OUTPUTS_JS)
        if len(texts) > cell and (text.search(texts[cell]) if hasattr(text, "search") else text in texts[cell]):
            return
        time.sleep(0.3)
    raise AssertionError(f"cell {cell} did not show {text!r} within {timeout_s} s: {page.evaluate(_OUTPUTS_JS)}")
