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
