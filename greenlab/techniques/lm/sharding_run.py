"""ZeRO stage 0 against stage 3, measured: the same small transformer trained with DDP and with FSDP (lesson 11
(11_fitting_in_memory)).

``run_ddp_vs_fsdp()`` launches ``world_size`` CPU processes through torchrun (backend gloo, one
thread each; the launch, timeout and error collection of ``greenlab.techniques.ddp``). In every process it
builds the same ``greenlab.techniques.lm.gpt.TinyGPT`` (same seed) and runs the same AdamW steps twice on that
rank's own batches:

- **DDP** (``DistributedDataParallel``, ``gradient_as_bucket_view=True`` so the gradients live in
  the all-reduce buckets and nowhere else): every rank holds everything, ZeRO stage 0;
- **FSDP** (``torch.distributed.fsdp.fully_shard`` on each block, then on the whole model): every
  parameter, its gradient and its optimizer state are split over the ranks, ZeRO stage 3.

After the last step each rank counts the bytes it holds for parameters, gradients and optimizer
state by walking the tensors (FSDP's are DTensors: their local shards), one count per distinct
storage, so what is allocated is what is counted, padding included. Both runs must end at the
same losses and, gathered, the same parameters. Last, each rank all-reduces a buffer the size of
the gradients (``dist.all_reduce``, a few timed repeats) and reads how many bytes it wrote
meanwhile from the kernel's per-process write counter (``/proc/self/io``, Linux; None elsewhere).

Bytes are exact counts; seconds are measured and vary from run to run and machine to machine.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from greenlab.base import validation
from greenlab.techniques.ddp import launch
from greenlab.techniques.ddp.worker import finish_worker, run_worker
from greenlab.base.janitor import Janitor
from greenlab.techniques.lm.corpus import CORPORA, batch, load_corpus
from greenlab.techniques.lm.gpt import TinyGPT, lm_loss
from greenlab.techniques.lm.sharding import ring_allreduce_bytes, zero_bytes_per_rank

PIECES = ("params", "grads", "optimizer")
KINDS = ("ddp", "fsdp")
WORKER_MODULE = "greenlab.techniques.lm.sharding_run"


@dataclass
class ShardingRun:
    """One DDP-against-FSDP launch. Bytes per rank, seconds measured.

    ``memory[kind][rank]``: bytes that rank holds after the last step, ``kind`` "ddp" or "fsdp":
    ``params``, ``grads``, ``optimizer`` (AdamW's two moments) and ``optimizer_steps`` (AdamW's
    step counter, one 4-byte scalar per parameter tensor, not sharded).
    ``losses[kind]``: training loss per step, the mean over the ranks (nats per byte).
    ``step_seconds[kind]``: rank 0's seconds per step (the first includes one-off set-up).
    ``max_param_difference``: the largest absolute difference between DDP's parameters and FSDP's
    gathered ones after the steps. ``allreduce``: ``payload_bytes`` (the gradients, fp32),
    ``seconds`` (rank 0's timed repeats) and ``bytes_written`` (per rank, the bytes it wrote
    during each repeat, payload plus message headers; None where the counter cannot be read).
    ``startup_seconds``: from the launch until the last rank had set up its process group
    (interpreters, imports, rendezvous); ``work_seconds``: from then until rank 0 had the
    results of every rank (both runs, the all-reduces); ``wall_seconds``: the whole launch, so
    ``wall_seconds - startup_seconds - work_seconds`` is the shut-down.
    """

    world_size: int
    n_params: int
    n_tensors: int
    model: dict
    steps: int
    seq_len: int
    batch_size: int
    memory: dict
    losses: dict
    step_seconds: dict
    max_param_difference: float
    allreduce: dict
    startup_seconds: float
    work_seconds: float
    wall_seconds: float
    notes: list = field(default_factory=list)

    def bytes_per_rank(self, kind: str, rank: int = 0) -> dict:
        """``params``, ``grads``, ``optimizer`` and ``total`` (the three) bytes held on ``rank``
        by the ``kind`` run ("ddp" or "fsdp"); AdamW's step counters are left out, as in ZeRO's
        arithmetic (``optimizer_steps`` in ``memory`` has them)."""
        validation.choice("kind", kind, KINDS)
        rank = validation.integer("rank", rank, low=0, high=self.world_size - 1)
        held = self.memory[kind][rank]
        out = {k: int(held[k]) for k in PIECES}
        out["total"] = sum(out.values())
        return out

    def zero_arithmetic(self, stage: int) -> dict:
        """``greenlab.techniques.lm.sharding.zero_bytes_per_rank`` for this model and world size (fp32 AdamW)."""
        return zero_bytes_per_rank(self.n_params, self.world_size, stage)

    def stages(self, rank: int = 0) -> dict:
        """{stage: bytes held on ``rank``} for ZeRO stages 0-3, from the two measured runs:
        stage 0 is DDP and stage 3 FSDP as measured; stages 1 and 2 (not run) take the pieces
        they shard (optimizer state; then gradients too) from FSDP and the rest from DDP."""
        ddp, fsdp = self.bytes_per_rank("ddp", rank), self.bytes_per_rank("fsdp", rank)
        out = {}
        for stage, sharded in ((0, ()), (1, ("optimizer",)), (2, ("grads", "optimizer")), (3, PIECES)):
            out[stage] = {k: (fsdp if k in sharded else ddp)[k] for k in PIECES}
            out[stage]["total"] = sum(out[stage][k] for k in PIECES)
        return out

    def padding_bytes(self) -> int:
        """Bytes FSDP holds, over all ranks together, beyond one copy of everything (parameters
        whose first dimension does not divide by the ranks are padded to equal shards)."""
        fsdp = sum(self.bytes_per_rank("fsdp", r)["total"] for r in range(self.world_size))
        return fsdp - self.bytes_per_rank("ddp", 0)["total"]

    def losses_match(self, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
        """True when DDP and FSDP reach the same loss at every step (``math.isclose`` per step)."""
        import math

        a, b = self.losses["ddp"], self.losses["fsdp"]
        return len(a) == len(b) == self.steps and all(
            math.isclose(x, y, rel_tol=rtol, abs_tol=atol) for x, y in zip(a, b))

    @property
    def allreduce_seconds(self) -> float:
        """Median seconds of the timed all-reduces (rank 0)."""
        return statistics.median(self.allreduce["seconds"])

    @property
    def ring_bytes(self) -> float:
        """Bytes each rank sends in a ring all-reduce of the gradients: 2 (N - 1) / N x payload."""
        return ring_allreduce_bytes(self.allreduce["payload_bytes"], self.world_size)

    @property
    def bytes_written(self) -> int | None:
        """The largest count of bytes any rank wrote during one all-reduce (None: not readable)."""
        counts = [b for per_rank in self.allreduce["bytes_written"] for b in (per_rank or [])]
        return max(counts) if counts and all(self.allreduce["bytes_written"]) else None

    def table(self) -> str:
        """Per-rank bytes of each run beside ZeRO's arithmetic for stages 0 and 3, in kB (1000 B)."""
        head = f"{'':24s} {'params kB':>10s} {'grads kB':>9s} {'optimizer kB':>13s} {'total kB':>9s}"
        lines = [head]

        def row(name, b):
            lines.append(f"{name:24s} {b['params'] / 1e3:10.1f} {b['grads'] / 1e3:9.1f} "
                         f"{b['optimizer'] / 1e3:13.1f} {b['total'] / 1e3:9.1f}")

        for r in range(self.world_size):
            row(f"DDP rank {r} measured", self.bytes_per_rank("ddp", r))
        row("ZeRO stage 0 arithmetic", self.zero_arithmetic(0))
        for r in range(self.world_size):
            row(f"FSDP rank {r} measured", self.bytes_per_rank("fsdp", r))
        row("ZeRO stage 3 arithmetic", self.zero_arithmetic(3))
        return "\n".join(lines)

    def summary(self) -> str:
        """The memory table, the losses, step times, the measured all-reduce and the launch time."""
        steps = self.memory["ddp"][0]["optimizer_steps"]
        spread = self.allreduce["seconds"]
        written = self.bytes_written
        shutdown = max(0.0, self.wall_seconds - self.startup_seconds - self.work_seconds)
        measured = (f"{written:,} B written per rank" if written is not None
                    else "bytes written: not readable here")
        losses = {k: " ".join(f"{x:.4f}" for x in self.losses[k]) for k in KINDS}
        lines = [
            (f"{self.world_size} CPU processes (torchrun, gloo), TinyGPT {self.model}: {self.n_params:,} "
             f"parameters in {self.n_tensors} tensors, fp32 AdamW, {self.steps} steps of "
             f"{self.batch_size} x {self.seq_len} tokens per rank"),
            self.table(),
            (f"(plus {steps} B of AdamW step counters per rank in both runs; FSDP padding over all "
             f"ranks: {self.padding_bytes()} B)"),
            (f"loss per step  DDP: {losses['ddp']}   FSDP: {losses['fsdp']}   "
             f"(largest parameter difference {self.max_param_difference:.2g})"),
            (f"median step (after the first): DDP {_median_after_first(self.step_seconds['ddp']) * 1e3:.1f} ms, "
             f"FSDP {_median_after_first(self.step_seconds['fsdp']) * 1e3:.1f} ms"),
            (f"all-reduce of the gradients ({self.allreduce['payload_bytes']:,} B): median "
             f"{self.allreduce_seconds * 1e3:.2f} ms (range {min(spread) * 1e3:.2f}-{max(spread) * 1e3:.2f} ms, "
             f"{len(spread)} repeats); ring arithmetic 2(N-1)/N x payload = {self.ring_bytes:,.0f} B sent "
             f"per rank; measured {measured}"),
            (f"launch: {self.wall_seconds:.1f} s: {self.startup_seconds:.1f} s start-up (interpreters, "
             f"imports, rendezvous), {self.work_seconds:.1f} s both runs and the all-reduces, "
             f"{shutdown:.1f} s shut-down"),
        ]
        return "\n".join(lines + [f"note: {n}" for n in self.notes])

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return self.summary()

    def to_dict(self) -> dict:
        return asdict(self)


# --- public API ---------------------------------------------------------------------------------


def run_ddp_vs_fsdp(world_size: int = 2, d_model: int = 64, n_layers: int = 2, n_heads: int = 4,
                    max_seq_len: int = 256, seq_len: int = 64, batch_size: int = 8, steps: int = 3,
                    lr: float = 1e-2, allreduce_repeats: int = 7, corpus: str = "pydoc-topics",
                    seed: int = 0, timeout_s: float = 180.0) -> ShardingRun:
    """Train ``greenlab.techniques.lm.gpt.TinyGPT(d_model, n_layers, n_heads, max_seq_len)`` for ``steps`` AdamW
    steps with DDP and then with FSDP in ``world_size`` torchrun CPU processes, and time
    ``allreduce_repeats`` all-reduces of the gradients; returns a ``ShardingRun``.

    Each rank draws its own ``batch_size`` windows of ``seq_len`` bytes per step from ``corpus``
    (``greenlab.techniques.lm.corpus.load_corpus``), the same batches in both runs. The launch is killed after
    ``timeout_s`` seconds (``greenlab.techniques.ddp.launch.DDPError``), and on an interrupt, with every worker.
    Raises ``ValueError`` for bad arguments before starting any process."""
    config = make_config(world_size=world_size, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                         max_seq_len=max_seq_len, seq_len=seq_len, batch_size=batch_size, steps=steps,
                         lr=lr, allreduce_repeats=allreduce_repeats, corpus=corpus, seed=seed)
    timeout_s = validation.number("timeout_s", timeout_s, low=0, low_open=True)


    with Janitor() as janitor:  # the run's folder goes however this process ends (see ddp.launch._launch)
        folder = Path(janitor.make_temp_dir("greenlab-fsdp-"))
        result_file = folder / "result.json"
        config.update(result_path=str(result_file), error_dir=str(folder), launched=time.time())
        config_path = folder / "config.json"
        config_path.write_text(json.dumps(config, indent=1), encoding="utf-8")
        command = launch.launch_command(config_path, world_size, module=WORKER_MODULE)
        started = time.perf_counter()
        returncode, stderr = launch.run_launch(command, launch.worker_env(1), timeout_s)
        wall = time.perf_counter() - started
        raw = launch.collect_result(folder, result_file, world_size, returncode, stderr, timeout_s)
    return ShardingRun(**raw, wall_seconds=wall)


def make_config(world_size: int = 2, d_model: int = 64, n_layers: int = 2, n_heads: int = 4,
                max_seq_len: int = 256, seq_len: int = 64, batch_size: int = 8, steps: int = 3,
                lr: float = 1e-2, allreduce_repeats: int = 7, corpus: str = "pydoc-topics",
                seed: int = 0) -> dict:
    """The validated worker config ``run_ddp_vs_fsdp`` writes (see there for the arguments), with
    the model's parameter and tensor counts (the model is built once here to check its shape)."""
    world_size = validation.integer("world_size", world_size, low=2, high=64)
    cores = os.cpu_count() or 1
    if world_size > 4 * cores:
        raise ValueError(f"world_size must be at most 4 x this machine's {cores} CPU cores "
                         f"({4 * cores}), got {world_size}")
    spec = {"d_model": d_model, "n_layers": n_layers, "n_heads": n_heads, "max_seq_len": max_seq_len}
    model = TinyGPT(**spec)  # checks d_model, n_heads, n_layers, max_seq_len with clear messages
    seq_len = validation.integer("seq_len (at most max_seq_len)", seq_len, low=1, high=max_seq_len)
    params = list(model.parameters())
    return {
        "world_size": world_size,
        "model": spec,
        "n_params": sum(p.numel() for p in params),
        "n_tensors": len(params),
        "seq_len": seq_len,
        "batch_size": validation.integer("batch_size", batch_size, low=1, high=4096),
        "steps": validation.integer("steps", steps, low=1, high=1000),
        "lr": validation.number("lr", lr, low=0, low_open=True, high=10),
        "allreduce_repeats": validation.integer("allreduce_repeats", allreduce_repeats, low=1, high=1000),
        "corpus": validation.choice("corpus", corpus, CORPORA),
        "seed": validation.integer("seed", seed, low=0, high=2**32 - 1),
    }


def held_bytes(tensors) -> int:
    """Bytes allocated for ``tensors``, each distinct storage counted once (views and shared
    weights are not counted twice); a DTensor counts its local shard's storage, padding included.
    None entries (no gradient) count 0."""
    storages = {}
    for t in tensors:
        if t is None:
            continue
        if hasattr(t, "to_local"):  # a DTensor: this rank's shard
            t = t.to_local()
        s = t.untyped_storage()
        storages[(s.data_ptr(), s.nbytes())] = s.nbytes()
    return sum(storages.values())


# --- the worker (runs inside each torchrun process) ---------------------------------------------


def worker_main(argv=None) -> int:
    """Entry point of one torchrun worker: both runs and the all-reduce; rank 0 writes the result."""
    return run_worker(argv, _worker, WORKER_MODULE, "one worker of a greenlab DDP-against-FSDP run")


def _worker(config: dict) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if world != config["world_size"]:
        raise RuntimeError(f"torchrun started {world} workers but the config asks for {config['world_size']}")
    dist.init_process_group(backend="gloo")
    try:
        ready = time.time()
        corpus = load_corpus(config["corpus"])
        gen = torch.Generator().manual_seed(config["seed"] * 1000 + rank)
        batches = [batch(corpus.train, config["seq_len"], config["batch_size"], gen)
                   for _ in range(config["steps"])]
        dist.barrier()
        ddp_run = _train(config, batches, sharded=False)
        fsdp_run = _train(config, batches, sharded=True)
        difference = 0.0
        for a, b in zip(ddp_run["model"].parameters(), fsdp_run["model"].parameters()):
            difference = max(difference, float((a.detach() - b.detach().full_tensor()).abs().max()))
        grads = torch.cat([p.grad.reshape(-1) for p in ddp_run["model"].parameters()])
        seconds, written = _time_allreduce(grads, config["allreduce_repeats"])
        mine = {"ready": ready, "memory": {"ddp": ddp_run["memory"], "fsdp": fsdp_run["memory"]},
                "losses": {"ddp": ddp_run["losses"], "fsdp": fsdp_run["losses"]},
                "step_seconds": {"ddp": ddp_run["seconds"], "fsdp": fsdp_run["seconds"]},
                "written": written, "allreduce_seconds": seconds}
        gathered = [None] * world
        dist.all_gather_object(gathered, mine)
        result = None
        if rank == 0:
            result = {
                "world_size": world, "n_params": config["n_params"], "n_tensors": config["n_tensors"],
                "model": config["model"], "steps": config["steps"], "seq_len": config["seq_len"],
                "batch_size": config["batch_size"],
                "memory": {k: [g["memory"][k] for g in gathered] for k in KINDS},
                "losses": {k: [sum(g["losses"][k][i] for g in gathered) / world
                               for i in range(config["steps"])] for k in KINDS},
                "step_seconds": mine["step_seconds"],
                "max_param_difference": difference,
                "allreduce": {"payload_bytes": grads.numel() * grads.element_size(), "seconds": seconds,
                              "bytes_written": [g["written"] for g in gathered]},
                "startup_seconds": max(g["ready"] for g in gathered) - config["launched"],
                "work_seconds": time.time() - max(g["ready"] for g in gathered),
                "notes": ["each worker is one CPU process with 1 thread"],
            }
        finish_worker(dist, config, rank, result)
    finally:
        dist.destroy_process_group()


def _train(config: dict, batches: list, sharded: bool) -> dict:
    """``steps`` AdamW steps of a freshly seeded TinyGPT, wrapped in DDP or fully sharded; the
    model, this rank's losses and step seconds, and the bytes held after the last step."""
    import torch
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(config["seed"])
    model = TinyGPT(**config["model"])
    if sharded:
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        wrapped = model
    else:  # gradients as views of the all-reduce buckets: no second copy of them
        wrapped = DistributedDataParallel(model, gradient_as_bucket_view=True)
    opt = torch.optim.AdamW(model.parameters(), lr=config["lr"])
    losses, seconds = [], []
    for x, y in batches:
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = lm_loss(wrapped, x, y)
        loss.backward()
        opt.step()
        seconds.append(time.perf_counter() - start)
        losses.append(float(loss.detach()))
    params = list(model.parameters())
    states = [opt.state[p] for p in params]
    memory = {"params": held_bytes(params), "grads": held_bytes(p.grad for p in params),
              "optimizer": held_bytes(s[k] for s in states for k in ("exp_avg", "exp_avg_sq")),
              "optimizer_steps": held_bytes(s["step"] for s in states)}
    return {"model": model, "losses": losses, "seconds": seconds, "memory": memory}


def _time_allreduce(buffer, repeats: int) -> tuple:
    """Seconds of each of ``repeats`` all-reduces of ``buffer`` (after one untimed), and the bytes
    this process wrote during each (None where /proc/self/io cannot be read)."""
    import torch.distributed as dist

    dist.all_reduce(buffer)
    seconds, written = [], []
    for _ in range(repeats):
        dist.barrier()
        before = _bytes_written()
        start = time.perf_counter()
        dist.all_reduce(buffer)
        seconds.append(time.perf_counter() - start)
        after = _bytes_written()
        written.append(None if before is None or after is None else after - before)
    return seconds, (None if None in written else written)


def _bytes_written() -> int | None:
    """Bytes this process (all its threads) has passed to write calls, sockets included: Linux's
    ``wchar`` in /proc/self/io; None where there is no such file."""
    try:
        with open("/proc/self/io", encoding="ascii") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _median_after_first(seconds: list) -> float:
    return statistics.median(seconds[1:] if len(seconds) > 1 else seconds)


if __name__ == "__main__":
    code = worker_main()
    # The result is written and the process group destroyed: skip the interpreter's teardown of
    # torch (about a second per worker on a small CPU, paid while the launch waits).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
