"""A caller killed outright (SIGKILL: no ``finally``, no ``atexit``) while one of the library's
launchers runs leaves no process and no file behind: Hogwild's worker processes, the torchrun
launches of ``run_ddp`` and of ``run_ddp_vs_fsdp``.

Each caller runs in a fresh interpreter whose environment carries a tag (inherited by everything it
starts, in whatever session) and whose TMPDIR is a fresh folder; it is killed at a seeded random
moment after the stage named, and the test then polls, with a generous deadline, until no tagged
process is alive and the TMPDIR is empty. (The federated runs, ``greenlab.techniques.federated``,
train every client in the caller's own process: they start no process to leave behind.)
"""

import random
import subprocess
import time

import pytest

from launches import live_processes_tagged, start_tagged, wait_for

_DATA = """
from greenlab.training import data
ds = data.load("synthetic", n_train=200, n_test=40, verbose=False)
"""

_HOGWILD_CALLER = _DATA + """
from greenlab.techniques import hogwild
hogwild.run(ds, mode=MODE, workers=2, max_updates=10 ** 8, eval_every=10 ** 7, timeout_s=3600)
"""

_DDP_CALLER = _DATA + """
from greenlab.techniques.ddp.launch import run_ddp
run_ddp(2, data=ds, model={"name": "mlp", "hidden": (8,)}, per_worker_batch=8, epochs=10 ** 5,
        measure_energy=False, timeout_s=3600)
"""

_SHARDING_CALLER = """
from greenlab.techniques.lm.sharding_run import run_ddp_vs_fsdp
run_ddp_vs_fsdp(world_size=2, d_model=16, n_layers=1, n_heads=2, max_seq_len=32, seq_len=16, batch_size=2,
                steps=1000, allreduce_repeats=3, timeout_s=3600)
"""


def _kill_at(proc, moment, seed):
    """SIGKILL ``proc`` once ``moment()`` holds, then a seeded random moment later; it must not
    have ended by itself before."""
    wait_for(lambda: moment() or proc.poll() is not None, deadline_s=240)
    time.sleep(random.Random(seed).uniform(0.0, 0.5))
    alive = proc.poll() is None
    proc.kill()
    proc.wait()
    try:  # a child left alive holds the output pipe open: the check below names it
        out = proc.communicate(timeout=10)[0]
    except subprocess.TimeoutExpired:
        out = ""
    assert alive, f"the caller ended before it was killed:\n{out[-2000:]}"


def _nothing_left(tag, tmpdir):
    def files():  # torch's own compile cache in TMPDIR is not the launch's
        return [p for p in tmpdir.iterdir() if not p.name.startswith("torchinductor")] if tmpdir.exists() else []

    def clean():
        return not live_processes_tagged(tag) and not files()

    assert wait_for(clean, deadline_s=120), (
        f"left behind: {[p.cmdline() for p in live_processes_tagged(tag)]}, {files()}")


def _processes(tag, at_least):
    return lambda: len(live_processes_tagged(tag)) >= at_least


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("stage", ["starting", "workers running"])
def test_a_killed_hogwild_caller_leaves_no_worker_and_no_file(tmp_path, mode, stage):
    proc, tag, tmpdir = start_tagged(_HOGWILD_CALLER.replace("MODE", repr(mode)), tmp_path)
    moment = {"starting": lambda: True, "workers running": _processes(tag, 3)}[stage]  # the caller, 2 workers
    _kill_at(proc, moment, seed=len(mode + stage))
    _nothing_left(tag, tmpdir)


@pytest.mark.parametrize("stage", ["starting", "workers running"])
def test_a_killed_run_ddp_caller_leaves_no_worker_and_no_file(tmp_path, stage):
    proc, tag, tmpdir = start_tagged(_DDP_CALLER, tmp_path)
    moment = {"starting": lambda: True, "workers running": _processes(tag, 4)}[stage]  # caller, torchrun, 2
    _kill_at(proc, moment, seed=len(stage))
    _nothing_left(tag, tmpdir)


@pytest.mark.parametrize("stage", ["starting", "workers running"])
def test_a_killed_ddp_vs_fsdp_caller_leaves_no_worker_and_no_file(tmp_path, stage):
    proc, tag, tmpdir = start_tagged(_SHARDING_CALLER, tmp_path)
    moment = {"starting": lambda: True, "workers running": _processes(tag, 4)}[stage]
    _kill_at(proc, moment, seed=len(stage) + 1)
    _nothing_left(tag, tmpdir)
