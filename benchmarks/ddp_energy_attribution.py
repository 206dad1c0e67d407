"""Is the reduced CPU energy of a 2-process torchrun job the sum of what its ranks measured, and
does a busy neighbour change it?

    python benchmarks/ddp_energy_attribution.py [--nprocs 2] [--repeats 3] [--work 3e7]

Launches ``torchrun --standalone --nproc_per_node N`` on this script; every rank runs the same
single-threaded work (a counting loop) inside ``gl.measure(..., distributed=True)`` with this
machine's default sources (the CPU estimate attributed to each rank's process). Each rank writes
its own figure and the reduced one. Runs alone and next to one busy neighbour process
(``python -c 'while True: pass'``, started before the launch and stopped after it).

Prints, per run: the reduced CPU joules; the sum of the ranks' own CPU figures; the reduced
figure against the sum of the ranks' busy parts plus one idle share (the reduction's rule: the
idle share of the CPUs the ranks may use is the node's, counted once); and the ratio of the
reduced energy next to the neighbour to alone, in total and for its busy part, its idle share
and the window's length. The load average is printed too: other work on
the machine stretches every window (and so the idle share) but not the ranks' CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def work(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def worker() -> int:
    import torch.distributed as dist

    from greenlab.energy import measure

    dist.init_process_group("gloo")
    with measure("ddp work", distributed=True) as window:
        work(int(float(os.environ["GL_BENCH_WORK"])))
    out = Path(os.environ["GL_BENCH_OUT"])
    (out / f"rank_{dist.get_rank()}.json").write_text(json.dumps({
        "local": window.local_result.to_dict(), "reduced": window.result.to_dict()}))
    dist.barrier()
    dist.destroy_process_group()
    return 0


def one_run(nprocs: int, n: float, neighbour: bool) -> dict:
    busy = None
    if neighbour:
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(0.5)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, GL_BENCH_OUT=tmp, GL_BENCH_WORK=str(n), OMP_NUM_THREADS="1")
            subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                            f"--nproc_per_node={nprocs}", "--max-restarts=0", __file__],
                           env=env, check=True, stdout=subprocess.DEVNULL)
            reports = [json.loads((Path(tmp) / f"rank_{r}.json").read_text()) for r in range(nprocs)]
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    red = reports[0]["reduced"]
    own = [rep["local"]["components"]["cpu"] for rep in reports]
    shares = [d for d in red["devices"] if d.get("part") == "idle share"]
    busy_parts = [d["joules"] for d in red["devices"] if d["kind"] == "cpu" and d.get("part") != "idle share"]
    return {"reduced_j": red["components"]["cpu"]["joules"],
            "sum_own_j": sum(c["joules"] for c in own),
            "busy_plus_one_idle_j": sum(busy_parts) + sum(d["joules"] for d in shares),
            "busy_j": sum(busy_parts), "idle_share_j": sum(d["joules"] for d in shares),
            "seconds": red["seconds"], "attribution": own[0].get("attribution", ""),
            "complete": red["complete"]}


def main() -> int:
    if "RANK" in os.environ:
        return worker()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nprocs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", type=float, default=3e7, help="loop iterations per rank")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    rows = {False: [], True: []}
    for i in range(args.repeats):
        for neighbour in (False, True):
            r = one_run(args.nprocs, args.work, neighbour)
            rows[neighbour].append(r)
            print(f"repeat {i} {'neighbour' if neighbour else 'alone    '}: reduced {r['reduced_j']:.3f} J "
                  f"over {r['seconds']:.2f} s; sum of ranks' own {r['sum_own_j']:.3f} J "
                  f"(reduced / sum {r['reduced_j'] / r['sum_own_j']:.4f}); busy parts + one idle "
                  f"share {r['busy_plus_one_idle_j']:.3f} J (reduced / that "
                  f"{r['reduced_j'] / r['busy_plus_one_idle_j']:.6f}) = busy {r['busy_j']:.3f} J + "
                  f"idle share {r['idle_share_j']:.3f} J; attribution {r['attribution']}; "
                  f"complete {r['complete']}")
    alone = statistics.mean(r["reduced_j"] for r in rows[False])
    beside = statistics.mean(r["reduced_j"] for r in rows[True])
    print(f"mean reduced CPU energy: alone {alone:.3f} J, with a busy neighbour {beside:.3f} J, "
          f"ratio {beside / alone:.3f}")
    for part in ("busy_j", "idle_share_j", "seconds"):
        a = statistics.mean(r[part] for r in rows[False])
        b = statistics.mean(r[part] for r in rows[True])
        print(f"  {part}: alone {a:.3f}, neighbour {b:.3f}, ratio {b / a:.3f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
