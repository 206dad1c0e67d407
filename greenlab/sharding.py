"""Memory and communication arithmetic of data, sharded, tensor and pipeline parallelism.

Counted facts, not measurements: bytes each rank holds and sends per training step, from a
model's parameter count and activation sizes.

ZeRO (Rajbhandari et al., 2020) stages for ``world_size`` data-parallel ranks:

- stage 0 (plain data parallelism, DDP): every rank holds all parameters, gradients and optimizer
  state;
- stage 1: optimizer state sharded (each rank keeps 1/N of it);
- stage 2: gradients sharded too;
- stage 3: parameters sharded too (PyTorch's FSDP, ``fully_shard``).

Default byte counts are for fp32 training with AdamW: 4 bytes per parameter, 4 per gradient and
8 of optimizer state (two moments). The paper's mixed-precision setting is
``param_bytes=2, grad_bytes=2, optimizer_bytes=12`` (fp32 master weights and two moments).
A sharded piece is rounded up to whole elements per rank (shards are padded to equal size).
"""

from __future__ import annotations

import math

from greenlab import validation

STAGES = (0, 1, 2, 3)
_MAX = 2**62


def zero_bytes_per_rank(n_params: int, world_size: int, stage: int, param_bytes: int = 4,
                        grad_bytes: int = 4, optimizer_bytes: int = 8) -> dict:
    """Bytes one rank holds for parameters, gradients and optimizer state under ZeRO ``stage``:
    {"params", "grads", "optimizer", "total"} (activations and buffers not included)."""
    n = validation.integer("n_params", n_params, low=1, high=_MAX)
    world = validation.integer("world_size", world_size, low=1, high=2**20)
    _stage(stage)
    sizes = {}
    for name, value in (("param_bytes", param_bytes), ("grad_bytes", grad_bytes),
                        ("optimizer_bytes", optimizer_bytes)):
        sizes[name] = validation.integer(name, value, low=0, high=64)
    shard = math.ceil(n / world)
    out = {"params": (shard if stage >= 3 else n) * sizes["param_bytes"],
           "grads": (shard if stage >= 2 else n) * sizes["grad_bytes"],
           "optimizer": (shard if stage >= 1 else n) * sizes["optimizer_bytes"]}
    out["total"] = out["params"] + out["grads"] + out["optimizer"]
    return out


def ring_allreduce_bytes(payload_bytes: int, world_size: int) -> float:
    """Bytes each rank sends in a ring all-reduce of ``payload_bytes``: 2 (N - 1) / N x payload
    (a reduce-scatter and an all-gather, each (N - 1) / N)."""
    payload = validation.integer("payload_bytes", payload_bytes, low=0, high=_MAX)
    world = validation.integer("world_size", world_size, low=1, high=2**20)
    return 2 * (world - 1) / world * payload


def data_parallel_bytes_per_step(n_params: int, world_size: int, stage: int = 0, grad_bytes: int = 4) -> float:
    """Bytes each rank sends per optimizer step. Stages 0-2: one all-reduce (or reduce-scatter +
    all-gather, the same volume) of the gradients, 2 (N - 1) / N x gradient bytes. Stage 3 (FSDP)
    adds an all-gather of the parameters for the backward pass: 3 (N - 1) / N x, 1.5 times DDP
    (Rajbhandari et al., 2020, section 7)."""
    n = validation.integer("n_params", n_params, low=1, high=_MAX)
    _stage(stage)
    dp = ring_allreduce_bytes(n * validation.integer("grad_bytes", grad_bytes, low=1, high=64), world_size)
    return dp * 1.5 if stage == 3 else dp


def tensor_parallel_bytes_per_step(batch_size: int, seq_len: int, d_model: int, n_layers: int,
                                   world_size: int, activation_bytes: int = 4) -> float:
    """Bytes each rank sends per step with Megatron-style tensor parallelism (Shoeybi et al., 2019):
    every layer all-reduces its (batch x seq x d_model) activations twice in the forward pass
    (after attention and after the MLP) and twice in the backward pass."""
    for name, value in (("batch_size", batch_size), ("seq_len", seq_len), ("d_model", d_model),
                        ("n_layers", n_layers), ("activation_bytes", activation_bytes)):
        validation.integer(name, value, low=1, high=_MAX)
    activations = batch_size * seq_len * d_model * activation_bytes
    return 4 * n_layers * ring_allreduce_bytes(activations, world_size)


def pipeline_bytes_per_step(batch_size: int, seq_len: int, d_model: int, stages: int,
                            activation_bytes: int = 4) -> int:
    """Bytes sent between pipeline stages per step, all boundaries together: at each of the
    ``stages - 1`` boundaries the activations go forward and their gradients come back
    (batch x seq x d_model each way), however the batch is split into micro-batches."""
    for name, value in (("batch_size", batch_size), ("seq_len", seq_len), ("d_model", d_model),
                        ("activation_bytes", activation_bytes)):
        validation.integer(name, value, low=1, high=_MAX)
    stages = validation.integer("stages", stages, low=1, high=2**20)
    return (stages - 1) * 2 * batch_size * seq_len * d_model * activation_bytes


def _stage(stage) -> int:
    """A ZeRO stage: 0, 1, 2 or 3."""
    return validation.integer("stage (ZeRO stage 0, 1, 2 or 3)", stage, low=0, high=3)
