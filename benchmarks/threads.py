"""Which CPU thread count gives the same number twice? Lesson 10's baseline, per candidate.

    python benchmarks/threads.py [--repeats 5] [--neighbour] [--steps 120]

Runs the same deterministic training run (lesson 10's quick-mode baseline: a 2-layer TinyGPT,
120 AdamW steps, fixed seed) in a fresh process per run, for each candidate:

- ``one``: 1 thread;
- ``all``: one thread per usable core (PyTorch's default);
- ``free``: usable cores less those other programs keep busy at start (``/proc/stat``);
- ``all-passive``: one per core, with ``OMP_WAIT_POLICY=PASSIVE`` (set before PyTorch loads);
- ``auto``: what ``gl.setup()`` chooses (``GREENLAB_THREADS`` unset).

Candidates take turns (one run of each, then the next repeat), so a change in the machine's load
falls on all of them. ``--neighbour`` starts one busy program (``while True: pass``) for the
whole benchmark, as a laptop's browser or video call would be. Prints, per candidate, the median
time and energy, the spread (max / min) and the 1-minute load average seen around the runs; a
run over ``--timeout-s`` is stopped, counted and left out of the figures.
Energy is whatever ``greenlab.energy`` measures here (an estimate from CPU time without RAPL).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CANDIDATES = ("one", "all", "free", "all-passive", "auto")


def child(name: str, steps: int) -> dict:
    """One run in this process; ``name`` picks the candidate. Returns the figures."""
    load0 = os.getloadavg()[0]
    import torch

    import greenlab as gl
    from greenlab.session import threads as gl_threads

    cores = int(gl_threads.usable_cores())
    busy = None
    if name == "one":
        requested = 1
    elif name in ("all", "all-passive"):
        requested = cores
    elif name == "free":
        busy = gl_threads.busy_cores()
        requested = max(1, cores - int(busy + 0.5))
    else:
        requested = None
    gl.setup(threads=requested, verbose=False)
    corpus = gl.lm.load_corpus("pydoc-topics")
    config = gl.lm.LMConfig(seq_len=64, batch_size=16, steps=steps, lr=1e-2, eval_every=20,
                            target_loss=2.8, label="baseline fp32")
    torch.manual_seed(0)
    model = gl.lm.TinyGPT(d_model=64, n_layers=2, n_heads=4, max_seq_len=256)
    run = gl.lm.train_lm(model, corpus, config)
    return {"candidate": name, "threads": torch.get_num_threads(), "seconds": run.seconds,
            "joules": run.joules, "estimated": run.estimated, "val_loss": run.val_loss,
            "busy_at_start": busy, "load_before": load0, "load_after": os.getloadavg()[0]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--neighbour", action="store_true", help="one busy program throughout")
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    parser.add_argument("--timeout-s", type=float, default=120.0,
                        help="a run taking longer is stopped and counted as over this")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="also write every run's figures to this file")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.steps)))
        return 0
    names = [n for n in args.candidates.split(",") if n]
    for n in names:
        if n not in CANDIDATES:
            parser.error(f"--candidates: unknown {n!r}; choose from {', '.join(CANDIDATES)}")
    neighbour = None
    if args.neighbour:
        neighbour = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    rows = []
    try:
        for r in range(args.repeats):
            for n in names:
                env = {k: v for k, v in os.environ.items()
                       if k not in ("GREENLAB_THREADS", "OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
                if n == "all-passive":
                    env["OMP_WAIT_POLICY"] = "PASSIVE"
                load0 = os.getloadavg()[0]
                try:
                    out = subprocess.run([sys.executable, __file__, "--child", n, "--steps", str(args.steps)],
                                         env=env, capture_output=True, text=True, check=True,
                                         timeout=args.timeout_s)
                    row = json.loads(out.stdout.strip().splitlines()[-1])
                except subprocess.TimeoutExpired:  # the child is killed; counted as "over"
                    row = {"candidate": n, "threads": None, "seconds": None, "joules": None,
                           "load_before": load0, "load_after": os.getloadavg()[0]}
                row["repeat"] = r
                rows.append(row)
                took = (f"{row['seconds']:7.2f} s {row['joules']:8.1f} J" if row["seconds"] is not None
                        else f"over {args.timeout_s:g} s (stopped)")
                print(f"repeat {r} {n:12s} threads {row['threads']} {took} "
                      f"load {row['load_before']:.2f}->{row['load_after']:.2f}", flush=True)
    finally:
        if neighbour is not None:
            neighbour.kill()
            neighbour.wait()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    print(f"\n{'candidate':12s} {'threads':>7s} {'median s':>8s} {'spread s':>8s} {'median J':>8s} "
          f"{'spread J':>8s} {'load':>11s}")
    for n in names:
        mine = [row for row in rows if row["candidate"] == n]
        done = [row for row in mine if row["seconds"] is not None]
        loads = [row["load_before"] for row in mine] + [row["load_after"] for row in mine]
        over = len(mine) - len(done)
        tail = f"  ({over} of {len(mine)} over {args.timeout_s:g} s, left out)" if over else ""
        if not done:
            print(f"{n:12s} {'?':>7s} every run over {args.timeout_s:g} s"
                  f"{'':30s} {min(loads):5.2f}-{max(loads):<5.2f}")
            continue
        secs = [row["seconds"] for row in done]
        joules = [row["joules"] for row in done]
        used = sorted({row["threads"] for row in done})
        print(f"{n:12s} {','.join(map(str, used)):>7s} {statistics.median(secs):8.2f} "
              f"{max(secs) / min(secs):7.2f}x {statistics.median(joules):8.1f} "
              f"{max(joules) / min(joules):7.2f}x {min(loads):5.2f}-{max(loads):<5.2f}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
