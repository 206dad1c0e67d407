"""The worker: the experiments named on its command line, one after another, in this process."""

from __future__ import annotations

import time

from benchmarks.gpu.context import Context
from benchmarks.gpu.experiments import RUNNERS


def worker_main(args) -> int:
    """Run the experiments named in ``args.worker`` in turn; each one's rows go to
    ``<args.part>/<name>.json`` as they are finished. Exit code 1 when any failed."""
    failed = 0
    for name, cap_s in zip(args.worker, args.cap_s):
        ctx = Context(args, name, cap_s)
        print(f"[{name}] running (share {cap_s:.0f} s)", flush=True)
        try:
            if name == args.hang:  # rehearses the watchdog: one row, then no progress
                ctx.row({"label": "before the hang", "status": "ok"})
                time.sleep(10 * 86400)
            RUNNERS[name](ctx)
        except Exception as exc:  # recorded, with the rows finished so far; the next one still runs
            import traceback

            traceback.print_exc()
            ctx.finish(f"failed: {type(exc).__name__}: {exc}"[:400])
            failed += 1
            continue
        ctx.finish("partial: out of time" if ctx.ran_out else "ok")
    return 1 if failed else 0
