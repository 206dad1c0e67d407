"""Helpers for tests of torchrun launches: which launch is this test's, and what of it still runs.

torchrun starts its workers in sessions of their own, so once torchrun is gone they are no longer
this process's children: they are found by the config file each of them names on its command line.
"""

import psutil


def record_launches(monkeypatch, launch) -> list:
    """Every config path ``launch.launch_command`` (``greenlab.techniques.ddp.launch``) is called with
    from now on (this test's launches: other launches on a shared machine are not ours)."""
    configs = []
    command = launch.launch_command
    monkeypatch.setattr(launch, "launch_command",
                        lambda path, n, **kw: configs.append(str(path)) or command(path, n, **kw))
    return configs


def live_processes_naming(config_path: str) -> list:
    """The live (not zombie) processes whose command line names ``config_path``."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        if p.info["status"] != psutil.STATUS_ZOMBIE and any(config_path in part for part in (p.info["cmdline"] or [])):
            found.append(p)
    return found


def live_processes_tagged(tag: str, name: str = "GREENLAB_TEST_TAG") -> list:
    """The live (not zombie) processes whose environment holds ``name=tag``: everything a process
    started with that variable started in turn (environments are inherited), in whatever session."""
    found = []
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and p.environ().get(name) == tag:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def start_tagged(script: str, tmp_path, **env) -> tuple:
    """Run ``script`` (Python source) in a new interpreter whose environment carries a fresh tag and
    whose TMPDIR is a fresh folder under ``tmp_path``; returns (process, tag, that TMPDIR)."""
    import os
    import subprocess
    import sys
    import uuid

    tag = uuid.uuid4().hex
    tmpdir = tmp_path / f"tmp-{tag[:8]}"
    tmpdir.mkdir()
    path = tmp_path / f"caller-{tag[:8]}.py"
    path.write_text(script)
    full = {**os.environ, "GREENLAB_TEST_TAG": tag, "TMPDIR": str(tmpdir), **env}
    proc = subprocess.Popen([sys.executable, str(path)], env=full, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    return proc, tag, tmpdir


def wait_for(condition, deadline_s: float = 120.0, every_s: float = 0.1) -> bool:
    """Poll ``condition()`` until it is true or ``deadline_s`` passes (a generous deadline, never a
    figure the test asserts); returns its last value."""
    import time

    end = time.monotonic() + deadline_s
    while True:
        value = condition()
        if value or time.monotonic() > end:
            return value
        time.sleep(every_s)
