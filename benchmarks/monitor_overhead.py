"""How much does watching cost? Time a fixed CPU training workload with and without a
PowerMonitor(hz=10) running, in alternating order, and print the median ratio.

    .venv/bin/python benchmarks/monitor_overhead.py [--pairs 7] [--steps 120] [--threads 1]
        [--clock cpu|wall]

Each run is timed two ways: wall-clock seconds, and CPU seconds of this whole process
(``time.process_time``, which includes the monitor thread). CPU time is the default headline
because it still isolates the monitor's cost when other programs share the machine; on a quiet
machine the two agree. torch runs one thread by default here, because under contention
OpenMP worker threads spin while waiting and make CPU time meaningless. The per-sample cost
of reading the sources is printed too.

The last line printed is the ratio (with monitor / without); the target is <= 1.01.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from greenlab.energy import PowerMonitor


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=7, help="with/without pairs (>= 5)")
    parser.add_argument("--steps", type=int, default=120, help="training steps per run")
    parser.add_argument("--hz", type=float, default=10.0, help="monitor sampling rate")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (default 1: no spin-waiting under load)")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="which timing gives the headline ratio (default cpu)")
    opts = parser.parse_args(argv)
    if opts.pairs < 5 or opts.steps < 1:
        parser.error("--pairs must be >= 5 and --steps >= 1")

    torch.set_num_threads(opts.threads)
    torch.manual_seed(0)
    data = torch.randn(2048, 784)
    labels = torch.randint(0, 10, (2048,))
    train(data, labels, steps=10)  # warm-up: allocator, kernels, thread pool

    ratios = {"cpu": [], "wall": []}
    for pair in range(opts.pairs):
        if pair % 2 == 0:
            with_t = timed_run(data, labels, opts.steps, opts.hz)
            without_t = timed_run(data, labels, opts.steps, None)
        else:
            without_t = timed_run(data, labels, opts.steps, None)
            with_t = timed_run(data, labels, opts.steps, opts.hz)
        for clock in ratios:
            ratios[clock].append(with_t[clock] / without_t[clock])
        print(f"pair {pair + 1}: wall {without_t['wall']:.3f} -> {with_t['wall']:.3f} s, "
              f"cpu {without_t['cpu']:.3f} -> {with_t['cpu']:.3f} s", flush=True)
    per_sample_s = sample_cost_s()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"monitor at {opts.hz:g} Hz, "
          f"{opts.pairs} pairs, {opts.steps} steps per run")
    print(f"one sample reads the sources in {per_sample_s * 1e6:.1f} us: "
          f"{per_sample_s * opts.hz:.2e} of one core at {opts.hz:g} Hz")
    for clock in ("wall", "cpu"):
        print(f"median ratio, {clock} time (with monitor / without): "
              f"{statistics.median(ratios[clock]):.4f}")
    ratio = statistics.median(ratios[opts.clock])
    print(f"{ratio:.4f}")
    return ratio


def sample_cost_s(repeats: int = 2000) -> float:
    """Mean seconds to read every default source once (what the monitor does per sample)."""
    monitor = PowerMonitor(hz=10)
    sources = monitor._sources
    t0 = time.perf_counter()
    for _ in range(repeats):
        for source in sources:
            source.read_joules()
    return (time.perf_counter() - t0) / repeats


def timed_run(data, labels, steps: int, hz: float | None) -> dict:
    """Wall and process-CPU seconds for one fixed run, optionally with a PowerMonitor."""
    torch.manual_seed(1)
    if hz is None:
        return _time(train, data, labels, steps)
    with PowerMonitor(hz=hz, window_s=600) as monitor:
        seconds = _time(train, data, labels, steps)
    if monitor.error is not None:
        raise RuntimeError(f"monitor failed during the benchmark: {monitor.error!r}")
    if not monitor.samples():
        raise RuntimeError("the monitor took no samples; the comparison would be meaningless")
    return seconds


def _time(fn, *args) -> dict:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    fn(*args)
    return {"wall": time.perf_counter() - wall0, "cpu": time.process_time() - cpu0}


def train(data, labels, steps: int) -> None:
    """A small MLP (784-512-256-10) trained with SGD on fixed random tensors."""
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    batch = 256
    for step in range(steps):
        i = (step * batch) % (len(data) - batch)
        loss = torch.nn.functional.cross_entropy(model(data[i:i + batch]), labels[i:i + batch])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
