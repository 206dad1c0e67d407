"""Child processes that must not outlive the work that started them."""

from __future__ import annotations

import os
import signal
import subprocess


def kill_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """End ``proc`` and everything it started (it must lead its own process group, e.g.
    ``start_new_session=True``): SIGTERM first, SIGKILL after ``grace_s`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue
