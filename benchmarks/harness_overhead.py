"""How much does ``gl.train`` cost compared with a bare hand-written PyTorch loop?

Both train the same model on the same tensors at the same precision and batch size, on the
CPU (or the device given by --device), in alternating order (bare, harness, bare, harness, ...)
so drifting clocks and background load hit both alike. Throughput is training samples per
second of wall-clock time (gl.train: ``RunResult.samples_per_second``, evaluation excluded), and
samples per second of this process's CPU time (all threads, so gl.train's meter threads count
against it). On a busy machine the CPU-time figure is the steadier one, especially with
``--threads 1``.

It also compares the device-resident loader with the torch DataLoader path inside gl.train.
The last line printed is the harness/bare throughput ratio (target: >= 0.97).

    .venv/bin/python benchmarks/harness_overhead.py [--pairs 9] [--n-train 2048] [--threads N]

Other work on the machine makes single runs noisy; the median of per-pair ratios and the ratio
of the best (least disturbed) runs are both reported.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
import torch.nn.functional as F

import greenlab as gl


def bare_loop(model, x, y, batch_size, lr, precision, device, seed) -> tuple:
    """One epoch of a plain loop; returns (samples per wall second, samples per CPU second)."""
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    amp = precision != "fp32"
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    model.train()
    gen = torch.Generator(device=device).manual_seed(seed)
    t0, c0 = time.perf_counter(), time.process_time()
    order = torch.randperm(x.shape[0], device=device, generator=gen)
    for start in range(0, x.shape[0], batch_size):
        idx = order[start:start + batch_size]
        xb, yb = x[idx], y[idx]
        with torch.autocast(device.type, dtype=dtype, enabled=amp):
            loss = F.cross_entropy(model(xb).float(), yb)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return x.shape[0] / (time.perf_counter() - t0), x.shape[0] / (time.process_time() - c0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=9)
    p.add_argument("--n-train", type=int, default=2048)
    p.add_argument("--n-test", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--precision", default="fp32")
    p.add_argument("--device", default="cpu")
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's own)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    gl.setup(seed=0, device=args.device)
    device = torch.device(args.device)
    ds = gl.data.load("fashion-mnist", n_train=args.n_train, n_test=args.n_test)
    torch.manual_seed(0)
    start = gl.models.build("cnn", width=args.width, depth=2).to(device)
    x, y = ds.train_x.to(device), ds.train_y.to(device)
    cfg = gl.TrainConfig(precision=args.precision, batch_size=args.batch_size, epochs=1, lr=0.05)
    print(f"model cnn width {args.width}, {gl.count_params(start)} params; {args.n_train} samples, "
          f"batch {args.batch_size}, {args.precision}, {device}, torch threads {torch.get_num_threads()}")

    # one untimed warm-up of each
    bare_loop(copy.deepcopy(start), x, y, args.batch_size, cfg.lr, args.precision, device, 0)
    gl.train(copy.deepcopy(start), ds, cfg, device=device, log=False, save=False)

    bare, harness, bare_cpu, harness_cpu = [], [], [], []
    for i in range(args.pairs):
        wall, cpu = bare_loop(copy.deepcopy(start), x, y, args.batch_size, cfg.lr, args.precision, device, i)
        bare.append(wall)
        bare_cpu.append(cpu)
        res = gl.train(copy.deepcopy(start), ds, cfg, device=device, log=False, save=False)
        harness.append(res.samples_per_second)
        harness_cpu.append(res.samples / res.train_cpu_seconds)
        print(f"pair {i + 1}: bare {bare[-1]:8.1f} samples/s ({cpu:8.1f} per CPU s)   gl.train "
              f"{harness[-1]:8.1f} samples/s ({harness_cpu[-1]:8.1f} per CPU s)")

    rates = {"device": ([], []), "dataloader": ([], [])}  # (per wall s, per CPU s)
    for _ in range(max(2, args.pairs // 2)):
        for loader in rates:
            one = gl.TrainConfig(**{**cfg.__dict__, "loader": loader})
            res = gl.train(copy.deepcopy(start), ds, one, device=device, log=False, save=False)
            rates[loader][0].append(res.samples_per_second)
            rates[loader][1].append(res.samples / res.train_cpu_seconds)
    (dw, dc), (lw, lc) = rates["device"], rates["dataloader"]
    med = statistics.median
    print(f"loader: device-resident {med(dw):.1f} samples/s ({med(dc):.1f} per CPU s) vs DataLoader "
          f"(num_workers=0) {med(lw):.1f} samples/s ({med(lc):.1f} per CPU s) -> "
          f"{med(dw) / med(lw):.2f}x wall, {med(dc) / med(lc):.2f}x CPU (medians of {len(dw)})")
    wall = [h / b for h, b in zip(harness, bare)]
    cpu = [h / b for h, b in zip(harness_cpu, bare_cpu)]
    print(f"per-pair wall-clock ratios: {', '.join(f'{r:.3f}' for r in wall)}")
    print(f"per-pair CPU-time ratios:   {', '.join(f'{r:.3f}' for r in cpu)}")
    print(f"harness/bare throughput ratio (target >= 0.97): wall clock median {statistics.median(wall):.3f} "
          f"(best vs best {max(harness) / max(bare):.3f}); per CPU second median {statistics.median(cpu):.3f}")


if __name__ == "__main__":
    main()
