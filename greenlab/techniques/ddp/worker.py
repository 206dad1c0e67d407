"""One torchrun worker of a data-parallel run (lesson 08 (08_scaling_out)); ``python -m greenlab.techniques.ddp.worker
--config FILE`` in every process.

Each worker memory-maps the dataset the parent saved, wraps the same model in
``torch.nn.parallel.DistributedDataParallel`` (gradients are averaged across workers by DDP's own all-reduce),
reads its own shard of every epoch through ``DistributedSampler`` and trains. Rank 0 evaluates on the test split
and writes a JSON result. The training window (between two barriers, without start-up or evaluation) is a
collective window (``greenlab.energy.distributed``). Gradient accumulation (``accum_steps > 1``) runs the first
micro-batches of every optimizer step inside ``DistributedDataParallel.no_sync()``, so gradients are all-reduced
once per step, not once per micro-batch. ``run_worker`` and ``finish_worker`` are the shell that other torchrun
workers share.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from greenlab.base.processes import die_with_parent
from greenlab.base.storage import atomic_write_text
from greenlab.energy.distributed import CollectiveWindow
from greenlab.session.devices import synchronize
from greenlab.training import models
from greenlab.training.accuracy import accuracy
from greenlab.training.dataset_files import load_dataset
from greenlab.training.step import backward, classifier_loss, make_scaler, optimizer_step


def worker_main(argv=None) -> int:
    """Entry point of one torchrun worker: train, and on rank 0 write the result JSON."""
    return run_worker(argv, _train_worker, "greenlab.techniques.ddp.worker",
                      "one worker of a greenlab data-parallel run")


def run_worker(argv, work, module: str, description: str) -> int:
    """A torchrun worker's shell: read ``--config`` (the JSON file the launcher wrote), run
    ``work(config)``, and on any failure leave ``error.rank<N>.txt`` for the launcher's report."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    parser.add_argument("--config", required=True, help="JSON file written by the launcher")
    args = parser.parse_args(argv)

    die_with_parent(sig=signal.SIGKILL)  # torchrun's death (or kill) ends this worker too
    config = json.loads(Path(args.config).read_text(encoding="utf-8"))
    rank = int(os.environ.get("RANK", "0"))
    try:
        work(config)
    except BaseException as exc:
        folder = Path(config.get("error_dir") or Path(args.config).parent)
        (folder / f"error.rank{rank}.txt").write_text(f"{type(exc).__name__}: {exc}", encoding="utf-8")
        raise
    return 0


def _train_worker(config: dict) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(int(config["threads_per_worker"]))
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if world != config["nprocs"]:
        raise RuntimeError(f"torchrun started {world} workers but the config asks for {config['nprocs']}")
    if config["device"] == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend=config["backend"])
    try:
        ds = load_dataset(config["data"])
        runs = config.get("runs") or [config]
        # every rank creates every subgroup, in the same order (torch.distributed.new_group's rule)
        groups = {k: dist.new_group(list(range(k))) for k in sorted({r["nprocs"] for r in runs}) if k < world}
        results = []
        for run in runs:
            run = {**run, "measure_energy": config.get("measure_energy"), "launch_nprocs": world}
            group = groups.get(run["nprocs"])
            if rank < run["nprocs"]:
                results.append(_train_one(run, ds, device, rank, local_rank, group))
            dist.barrier()  # a rank outside a smaller run's group waits here while it trains
        finish_worker(dist, config, rank, {"runs": results} if rank == 0 else None)
    finally:
        dist.destroy_process_group()


def _train_one(config: dict, ds, device, rank: int, local_rank: int, group=None) -> dict | None:
    """One run on the first ``config["nprocs"]`` ranks (``group``: their process group, None for
    the whole job): a fresh model from the run's seed, its own training window between two
    barriers, rank 0's evaluation. Returns rank 0's result dict (None elsewhere)."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data.distributed import DistributedSampler

    torch.manual_seed(config["seed"])
    model_spec = dict(config["model"])
    model_name = model_spec.pop("name")
    if model_name in ("cnn", "resnet"):
        model_spec.setdefault("in_channels", ds.input_shape[0])
    if model_name == "mlp":
        model_spec.setdefault("input_shape", ds.input_shape)
    model_spec.setdefault("num_classes", ds.num_classes)
    net = models.build(model_name, **model_spec).to(device)
    world = config["nprocs"]
    ddp = DistributedDataParallel(net, device_ids=[local_rank] if device.type == "cuda" else None,
                                  process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=config["lr"], momentum=config["momentum"])
    scaler = make_scaler(device.type, "fp32")  # data-parallel runs are fp32 (passes through)
    n_train = config.get("n_train") or ds.n_train
    train_x, train_y = ds.train_x[:n_train].to(device), ds.train_y[:n_train].to(device)
    sampler = DistributedSampler(range(n_train), num_replicas=world, rank=rank, shuffle=True,
                                 seed=config["seed"], drop_last=True)
    batch, accum = config["per_worker_batch"], config["accum_steps"]
    steps, samples, losses = 0, 0, []
    window = None
    dist.barrier(group=group)
    if config.get("measure_energy"):  # every rank of the run: a collective window, reduced at stop()

        window = CollectiveWindow("ddp training", group=group).start()
    t0 = time.perf_counter()
    for epoch in range(config["epochs"]):
        sampler.set_epoch(epoch)
        order = torch.tensor(list(sampler), dtype=torch.long, device=device)
        micro = [order[i:i + batch] for i in range(0, len(order) - batch + 1, batch)]
        for start in range(0, len(micro) - accum + 1, accum):
            step_loss = 0.0
            for j, idx in enumerate(micro[start:start + accum]):
                last = j == accum - 1
                with (ddp.no_sync() if not last else _nullcontext()):
                    loss = classifier_loss(ddp, train_x[idx], train_y[idx], idx.numel() * accum,
                                           torch.float32, autocast=False)
                    backward(loss, scaler)
                step_loss += float(loss.detach())
                samples += int(idx.numel())
            optimizer_step(opt, scaler)
            steps += 1
            losses.append(step_loss)
            if config["max_steps"] is not None and steps >= config["max_steps"]:
                break
        if config["max_steps"] is not None and steps >= config["max_steps"]:
            break
    synchronize(device)
    dist.barrier(group=group)
    train_seconds = time.perf_counter() - t0
    train_energy = window.stop().to_dict() if window is not None else None
    gathered = [None] * world
    dist.all_gather_object(gathered, {"steps": steps, "samples": samples, "losses": losses}, group=group)
    if rank != 0:
        return None
    accuracy = _accuracy(net, ds.test_x.to(device), ds.test_y.to(device))
    val_accuracy = _accuracy(net, ds.val_x.to(device), ds.val_y.to(device))
    n_steps = min(len(g["losses"]) for g in gathered)
    history = [sum(g["losses"][i] for g in gathered) / world for i in range(n_steps)]
    total_samples = sum(g["samples"] for g in gathered)
    return {
        "nprocs": world, "backend": config["backend"], "device": config["device"],
        "threads_per_worker": config["threads_per_worker"],
        "per_worker_batch": batch, "global_batch": config["global_batch"],
        "accum_steps": accum, "epochs": config["epochs"], "lr": config["lr"],
        "steps": steps, "per_rank_steps": [g["steps"] for g in gathered],
        "per_rank_samples": [g["samples"] for g in gathered], "samples": total_samples,
        "train_seconds": train_seconds,
        "samples_per_second": total_samples / train_seconds if train_seconds > 0 else 0.0,
        "final_accuracy": accuracy, "val_accuracy": val_accuracy,
        "final_loss": history[-1] if history else float("nan"), "loss_history": history,
        "dataset": {"name": ds.name, "source": ds.source, "n_train": n_train,
                    "n_test": ds.n_test, "n_val": ds.n_val, "note": ds.note},
        "model": dict(config["model"]), "train_energy": train_energy,
        "notes": _notes(config, ds), "label": config.get("label", ""),
    }


def finish_worker(dist, config: dict, rank: int, result: dict | None) -> None:
    """A worker's last collective step: rank 0 writes ``result`` to ``config["result_path"]``
    (atomically), every rank waits at a barrier, then marks itself finished. Past that marker a
    crash in the process group's shut-down no longer loses the run (see ``collect_result``)."""
    if rank == 0:
        atomic_write_text(config["result_path"], json.dumps(result))
    dist.barrier()
    (Path(config["error_dir"]) / f"finished-{rank}").touch()


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _accuracy(net, x, y, batch: int = 1000) -> float:
    return accuracy(net, x, y, batch_size=batch)


def _notes(config: dict, ds) -> list:
    notes = []
    if ds.source == "generated":
        notes.append("dataset is a generated stand-in (no cached download): " + ds.note)
    if config["device"] == "cpu":
        notes.append(f"each worker is one CPU process with {config['threads_per_worker']} thread(s)")
    launched = config.get("launch_nprocs", config["nprocs"])
    if config["nprocs"] < launched:
        notes.append(f"trained by the first {config['nprocs']} of the launch's {launched} worker processes "
                     "(a process group of their own); the others waited at a barrier, outside its "
                     "energy window")
    return notes


if __name__ == "__main__":
    code = worker_main()
    # The result is written, every rank passed the last barrier and the process group is destroyed:
    # skip the interpreter's teardown, where gloo's threads sometimes aborted the process ("terminate
    # called without an active exception", about 1 launch in 8 here) and which costs about a second.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
