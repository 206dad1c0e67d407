"""The worker: the experiments named on its command line, one after another, in this process."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

from benchmarks.gpu.context import Context
from benchmarks.gpu.experiments import RUNNERS
from benchmarks.gpu.records import write_json


def worker_main(args) -> int:
    """Run the experiments named in ``args.worker`` in turn; each one's rows go to
    ``<args.part>/<name>.json`` as they are finished, and a "running" record is written there as
    each one starts (before CUDA or NVML is touched), so a worker killed at start-up is not
    started again with its experiment. Exit code 1 when any failed."""
    from greenlab.base.processes import die_with_parent

    die_with_parent()  # the orchestrator's death ends this worker (and, through it, torchrun's)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # unwinds: run_ddp then ends its torchrun group
    if args.cache:  # temporary files (DDP's dataset copy, torchrun's logs, checkpoints) in the work folder
        tmp = Path(args.cache) / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        tempfile.tempdir = os.environ["TMPDIR"] = str(tmp)  # this process's and its children's
    failed = 0
    idle_w = getattr(args, "idle_w", None)  # measurement_core's idle power, for energy above idle
    for name, cap_s in zip(args.worker, args.cap_s):
        t0 = time.monotonic()
        write_json(Path(args.part) / f"{name}.json", {"status": "running", "seconds": 0.0, "rows": [],
                                                      "notes": [], "measured": {}})
        print(f"[{name}] running (share {cap_s:.0f} s)", flush=True)
        ctx = None
        try:
            ctx = Context(args, name, cap_s, idle_w=idle_w)
            if name == args.hang:  # rehearses the watchdog: one row, then no progress
                ctx.row({"label": "before the hang", "status": "ok"})
                time.sleep(10 * 86400)
            if name == args.hang_start:  # rehearses a start-up that never ends (no row)
                time.sleep(10 * 86400)
            RUNNERS[name](ctx)
        except Exception as exc:  # recorded, with the rows finished so far; the next one still runs
            import traceback

            traceback.print_exc()
            status = f"failed: {type(exc).__name__}: {exc}"[:400]
            if ctx is None:  # the context itself (CUDA, NVML, energy sources) could not be set up
                write_json(Path(args.part) / f"{name}.json",
                           {"status": status, "seconds": time.monotonic() - t0, "rows": [], "notes": [],
                            "measured": {}})
            else:
                ctx.finish(status)
            failed += 1
            continue
        ctx.finish("partial: out of time" if ctx.ran_out else "ok")
        idle_w = ctx.measured.get("idle_watts", idle_w)
    return 1 if failed else 0


def _exit_on_sigterm(signum, _frame):
    raise SystemExit(128 + signum)
