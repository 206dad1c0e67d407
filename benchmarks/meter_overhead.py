"""What does the live meter cost? Run a fixed CPU workload inside a widget-mode EnergyMeter
(text on every sample, plot throttled) and print the meter's own CPU time as a share of the
run's wall time.

    .venv/bin/python benchmarks/meter_overhead.py [--seconds 4] [--repeats 3] [--hz 5]

The meter counts its own cost on its thread (``time.thread_time`` around each update):
``steady`` leaves out one-off y-axis rescales and figure rebuilds (``setup``), which are
printed apart. The target is a steady share under 1 % of the run; on a machine shared with
other programs the share reads higher, so say how busy the machine was when quoting it.
The sources are fakes of constant power, so the figures say nothing about this machine's
energy. Needs ipywidgets and matplotlib. The last line printed is the median steady share.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from greenlab.energy import EnergySource
from greenlab.widgets import EnergyMeter


class ConstantPower(EnergySource):
    """A counter growing at ``watts`` joules per second (no hardware read)."""

    def __init__(self, component, name, watts, estimated=False):
        super().__init__(component)
        self.name, self.estimated, self.watts = name, estimated, watts
        self.t0 = time.perf_counter()

    def read_joules(self):
        return self.watts * (time.perf_counter() - self.t0)


def one_run(seconds: float, hz: float) -> dict:
    """One metered run of ``seconds`` of matrix products; the meter's counters and shares."""
    sources = [ConstantPower("cpu", "estimate", 30.0, estimated=True),
               ConstantPower("gpu:0", "nvml-counter", 120.0)]
    m = EnergyMeter(region="WORLD", display="widget", show=False, hz=hz, sources=sources)
    a = torch.randn(256, 256)
    with m:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            for _ in range(5):
                a = torch.tanh(a @ a)
            m.add_samples(10)
            time.sleep(0.01)
    return {"overhead": m.overhead_fraction, "steady": m.steady_overhead_fraction,
            "setup_ms": m.setup_seconds * 1000, "text_updates": m.text_updates,
            "plot_redraws": m.plot_redraws, "wall_s": m.wall_seconds,
            "updates_per_s": m.text_updates / m.wall_seconds if m.wall_seconds else 0.0}


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each run (> 0)")
    parser.add_argument("--repeats", type=int, default=3, help="runs (>= 1)")
    parser.add_argument("--hz", type=float, default=5.0, help="monitor samples per second")
    opts = parser.parse_args(argv)
    if opts.seconds <= 0 or opts.repeats < 1:
        parser.error("--seconds must be > 0 and --repeats >= 1")
    torch.set_num_threads(1)
    steady = []
    for i in range(opts.repeats):
        r = one_run(opts.seconds, opts.hz)
        steady.append(r["steady"])
        print(f"run {i + 1}: overhead {r['overhead']:.3%} (steady {r['steady']:.3%}, one-off "
              f"{r['setup_ms']:.0f} ms); {r['text_updates']} text updates "
              f"({r['updates_per_s']:.1f} per s), {r['plot_redraws']} plot redraws in {r['wall_s']:.2f} s")
    median = statistics.median(steady)
    print(f"median steady meter overhead {median:.3%} of wall time (target < 1%)")
    return median


if __name__ == "__main__":
    main()
