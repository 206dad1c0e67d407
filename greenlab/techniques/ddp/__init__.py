"""A real data-parallel training run, launched through torchrun (lessons 08 (08_scaling_out) and 02
(02_gradient_accumulation)). One module per idea; every name is also here, as ``gl.ddp.<name>``.

- ``launch``: ``run_ddp(nprocs, ...)`` writes a JSON config, starts::

      python -m torch.distributed.run --standalone --nproc_per_node=N -m greenlab.techniques.ddp.worker --config FILE

  as a subprocess and waits for it. The parent loads the dataset once (``greenlab.training.data.load``, or a
  ``Dataset`` you pass) and saves its tensors to the run's temporary folder. ``--standalone`` picks a free local
  port, so several runs never collide. ``run_ddp_series(nprocs, runs, ...)`` runs several configurations
  (batch sizes, training-set sizes, seeds) one after another inside the same torchrun workers, so a comparison
  pays torchrun's start-up (process start, imports, rendezvous: seconds) once rather than once per
  configuration. Every run builds its model afresh from its own seed and has its own training window, barriers
  and evaluation.
- ``worker``: each worker process memory-maps the dataset file, wraps the same model in
  ``torch.nn.parallel.DistributedDataParallel`` (gradients are averaged across workers by DDP's own all-reduce),
  reads its own shard of every epoch through ``DistributedSampler`` and trains. Rank 0 evaluates on the test
  split and writes a JSON result. Gradient accumulation (``accum_steps > 1``) runs the first micro-batches of
  every optimizer step inside ``DistributedDataParallel.no_sync()``, so gradients are all-reduced once per step,
  not once per micro-batch.
- ``results``: ``DDPResult``, ``scaling_report``, ``stakeholder_summary``, ``energy_breakdown``,
  ``power_profile``.

Energy: the training window (between two barriers, without start-up or evaluation) is a collective window
(``greenlab.measure(..., distributed=True)``): every worker measures its own process and its own device, and the
figures are reduced across workers, each shared device counted once (see ``greenlab.energy.distributed``);
per-worker and per-node figures are kept. The parent also wraps the whole launch (start-up included) in
``greenlab.measure``, which counts the parent and its children (the torchrun tree) on this node.

A "device" is one worker process. On a CPU each worker is one process with one thread (``threads_per_worker=1``),
so two workers on two cores is a fair comparison with one; on a machine with GPUs each worker drives one GPU
(backend NCCL).
"""

from greenlab.techniques.ddp.launch import (
    BACKENDS, DEVICES, RUN_KEYS, STDERR_TAIL_LINES, DDPError, collect_result, launch_command, make_config,
    parse_worker_counts, pick_device, run_ddp, run_ddp_series)
from greenlab.techniques.ddp.results import (
    DDPResult, ScalingReport, energy_breakdown, power_profile, scaling_report, stakeholder_summary)
from greenlab.techniques.ddp.worker import finish_worker, run_worker, worker_main

__all__ = [
    "BACKENDS", "DEVICES", "STDERR_TAIL_LINES", "DDPError", "run_ddp", "RUN_KEYS", "run_ddp_series", "make_config",
    "launch_command", "collect_result", "pick_device", "parse_worker_counts",
    "DDPResult", "ScalingReport", "scaling_report", "stakeholder_summary", "energy_breakdown", "power_profile",
    "worker_main", "run_worker", "finish_worker",
]
