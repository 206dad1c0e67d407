"""Does a busy neighbour change the CPU estimate of the same work?

    python benchmarks/estimate_neighbour.py [--repeats 3] [--work 3e7]

Runs the same single-threaded work (a counting loop) alone and next to one busy neighbour
process (``python -c 'while True: pass'``), measuring both CPU estimate modes at once:
``process`` (this process and its children, greenlab's default) and ``machine`` (all busy
time). Prints each mode's mean power for the work, and the ratio neighbour / alone. With
process attribution the ratio should stay near 1; machine mode rises (about 1.7x on an
otherwise idle 2-CPU machine). The machine's load average is printed too: other work already
running makes the machine-mode "alone" figure high.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

from greenlab.energy import measure
from greenlab.energy.estimate import CpuEstimateSource


def work(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def one_run(n: int, neighbour: bool) -> dict:
    process = CpuEstimateSource("cpu-process", attribution="process")
    machine = CpuEstimateSource("cpu-machine", attribution="machine")
    pid = None
    if neighbour:  # started through a shell that exits at once, so it is not our descendant
        out = subprocess.run(["sh", "-c", f"'{sys.executable}' -c 'while True: pass' "
                              ">/dev/null 2>&1 & echo $!"], capture_output=True, text=True)
        pid = int(out.stdout.strip())
        time.sleep(0.5)
    try:
        with measure("work", sources=[process, machine], sync=False) as window:
            work(n)
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
    r = window.result
    return {"seconds": r.seconds, "process_w": r.components["cpu-process"].watts,
            "machine_w": r.components["cpu-machine"].watts}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", type=float, default=3e7, help="loop iterations")
    args = parser.parse_args(argv)
    n = int(args.work)
    print(f"load average before: {os.getloadavg()[0]:.2f}; CPUs: {os.cpu_count()}")
    rows = {False: [], True: []}
    for _ in range(args.repeats):  # interleaved, so drifting background load hits both
        for neighbour in (False, True):
            rows[neighbour].append(one_run(n, neighbour))
    for neighbour in (False, True):
        print(f"  {'with neighbour' if neighbour else 'alone':>14}: " + ", ".join(
            f"{r['process_w']:.1f}/{r['machine_w']:.1f} W" for r in rows[neighbour])
              + "  (process/machine per run)")
    for key in ("process_w", "machine_w"):
        alone = statistics.median(r[key] for r in rows[False])
        busy = statistics.median(r[key] for r in rows[True])
        print(f"{key[:-2]:>8}: alone {alone:.2f} W, with neighbour {busy:.2f} W, "
              f"ratio {busy / alone:.2f} (medians of {args.repeats})")
    secs = [statistics.median(r["seconds"] for r in rows[k]) for k in (False, True)]
    print(f"  window: alone {secs[0]:.2f} s, with neighbour {secs[1]:.2f} s")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
