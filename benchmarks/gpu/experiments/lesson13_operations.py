"""Lesson 13's experiment: a GPU's idle power and the cost of writing one training checkpoint."""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks.gpu.context import Context, _cnn_fn


def exp_operations(ctx: Context) -> None:
    """Lesson 13: the device's idle power (what an idle reserved instance draws) and one checkpoint
    write of the reference CNN with its SGD momentum, in seconds and joules, repeated."""
    from greenlab.energy import measure_idle
    from greenlab.techniques.preemption import checkpoint_write_cost

    z = ctx.sizes
    torch = ctx.torch
    idle = measure_idle(z.idle_s, sources=ctx.sources)
    ctx.row({"label": "idle power", "seconds": idle.seconds,
             "watts": idle.watts_by_component.get(ctx.component) if ctx.energy_ok else None,
             "energy_source": ctx.energy_source if ctx.energy_ok else "not measured"})
    net = _cnn_fn(ctx)().to(ctx.device)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    x = torch.randn(8, 1, 28, 28, device=ctx.device)
    net(x).sum().backward()
    opt.step()
    params = sum(p.numel() for p in net.parameters())
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(z.repeats):
            if not ctx.enough_for(ctx.min_window_s * 2):
                break
            seconds, _, writes, m = checkpoint_write_cost(net, opt, tmp, writes=1, 
                                                          min_seconds=ctx.min_window_s * z.window_margin)
            comp = m.components.get(ctx.component)
            joules = comp.joules if (comp is not None and ctx.energy_ok) else None
            cpu = m.components.get("cpu")
            ctx.row({"label": "checkpoint write", "repeat": repeat, "writes": writes, "parameters": params,
                     "seconds_per_write": seconds,
                     "joules_per_write": joules / writes if joules is not None else None,
                     "cpu_joules_per_write": (cpu.joules / writes if (cpu is not None and ctx.component != "cpu")
                                              else None),
                     "window_seconds": m.seconds})
    ctx.note("Idle: greenlab.energy.measure_idle over the device's sources while the process sleeps. Checkpoint "
             "writes: gl.preemption.checkpoint_write_cost (save_checkpoint: atomic, fsync'd, checksummed) of the "
             "reference CNN and its SGD momentum, copied from the GPU to the host on each write, into a temporary "
             f"folder in the suite's work folder ({Path(tempfile.gettempdir()).name}/ in its cache, on that "
             "folder's file system); joules are the GPU's (it idles during the write), cpu_joules the host's.")
