"""How long does Run All take in JupyterLab, as a learner runs it? Each lesson's learner copy, the
way ``make lab`` serves it (a copy in a fresh folder, ``OMP_WAIT_POLICY=PASSIVE``), in a real
Chromium driven by Playwright.

    .venv/bin/python benchmarks/lab_run_all.py [--lessons 00,06,09,10,12 | --lessons all] [--timeout-s 600]

Per lesson: seconds from Run All to the last cell finished (the kernel already started, so kernel
start-up is left out, as in the README's table), and whether any cell showed an error. Prints one
table; the figures depend on the machine and how busy it is, so quote them with both. Needs
Debian's Chromium at /usr/bin/chromium (``.ci/install-browser``) and the playwright package;
never downloads a browser.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("GREENLAB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]

_KERNEL_IDLE = ("() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
                " const k = w && w.sessionContext && w.sessionContext.session"
                " && w.sessionContext.session.kernel; return k && k.status === 'idle'; }")
# from the notebook's model (off-screen cells are not in the page): code cells, those with an
# execution count (outputs and counts are cleared before Run All), errors, and the kernel's status
_STATE = """() => { const w = window.jupyterapp.shell.currentWidget; const cells = w.content.model.cells;
  let n = 0, done = 0, errors = 0;
  for (let i = 0; i < cells.length; i++) {
    const c = cells.get(i); if (c.type !== 'code') continue; n++;
    if (c.executionCount !== null) done++;
    if (c.outputs.toJSON().some(o => o.output_type === 'error')) errors++; }
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  return {n: n, done: done, errors: errors, idle: !!k && k.status === 'idle'}; }"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(root: Path, tmp: Path):
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR", "IPYTHONDIR",
                 "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR"):
        (tmp / name.lower()).mkdir()
        env[name] = str(tmp / name.lower())
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    port, token = _free_port(), secrets.token_hex(16)
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={root}", "--ServerApp.allow_root=True", "--LabApp.expose_app_in_browser=True",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        cwd=root, env=env, stdout=open(tmp / "jupyterlab.log", "w"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                return server, base, token
        except OSError:
            time.sleep(0.3)
    server.kill()
    raise SystemExit(f"JupyterLab did not answer within 90 s; see {tmp / 'jupyterlab.log'}")


def run_all(page, base: str, token: str, name: str, timeout_s: float) -> dict:
    """Open ``name``, wait for its kernel, Run All, wait for every cell; seconds and errors."""
    # ?reset: JupyterLab would restore the tabs of the lesson before, and the one in front would be that one
    page.goto(f"{base}/lab/tree/{name}?reset&token={token}")
    page.wait_for_function(_KERNEL_IDLE, timeout=120_000)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
    started = time.perf_counter()
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    deadline = started + timeout_s
    state = {}
    while time.perf_counter() < deadline:
        state = page.evaluate(_STATE)
        if state["n"] and state["done"] == state["n"] and state["idle"]:
            return {"lesson": name, "seconds": time.perf_counter() - started, "errors": state["errors"]}
        if state["errors"] and state["idle"]:  # Run All stops at a failing cell
            return {"lesson": name, "seconds": None, "errors": state["errors"]}
        time.sleep(0.5)
    return {"lesson": name, "seconds": None, "errors": state.get("errors"), "timed_out": True}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", default="00,06,09,10,12", help="lesson numbers, comma-separated, or all")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="per lesson")
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).exists():
        print(f"Chromium not found at {CHROMIUM}: run .ci/install-browser", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    numbers = [n.strip() for n in args.lessons.split(",") if n.strip()]
    if numbers == ["all"]:
        numbers = [p.name[:2] for p in sorted((REPO / "lessons").glob("[0-9][0-9]_*.ipynb"))]
    lessons = [p for n in numbers for p in sorted((REPO / "lessons").glob(f"{n}_*.ipynb"))]
    if len(lessons) != len(numbers):
        parser.error(f"--lessons: not every number names a lesson in lessons/: {args.lessons}")
    tmp = Path(tempfile.mkdtemp(prefix="greenlab-lab-run-all-"))
    root = tmp / "my-lessons"
    root.mkdir()
    for path in lessons:  # as make lab does: the learner's own copy
        shutil.copy(path, root / path.name)
    server, base, token = _serve(root, tmp)
    rows = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                for path in lessons:
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    row = run_all(page, base, token, path.name, args.timeout_s)
                    page.evaluate("() => window.jupyterapp.commands.execute('kernelmenu:shutdown')")
                    page.close()
                    rows.append(row)
                    took = f"{row['seconds']:.1f} s" if row["seconds"] is not None else "did not finish"
                    print(f"{path.stem}: {took}, {row['errors']} cell(s) with an error", flush=True)
            finally:
                browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"\nRun All in JupyterLab (kernel start-up left out), 1-minute load average now {load:.2f}:")
    for row in rows:
        took = f"{row['seconds']:7.1f} s" if row["seconds"] is not None else "     --  "
        print(f"  {row['lesson']:45s} {took}  errors: {row['errors']}")
    return 0 if all(r["seconds"] is not None and not r["errors"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
