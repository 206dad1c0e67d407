"""Memory and communication arithmetic of data, sharded, tensor and pipeline parallelism (lessons 08
(08_scaling_out) and 11 (11_fitting_in_memory)).

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

ZeRO stage 1 simulated in one process (:func:`rank_optimizers`, :func:`zero1_step`,
:func:`train_zero1`): every rank holds the whole parameter vector but the AdamW moments of only its
own slice, 1/N of the elements (the last slice zero-padded to equal size). One step averages the
ranks' gradients (the all-reduce; a reduce-scatter would deliver each rank only its slice, the
same numbers), lets each rank update its slice with its own PyTorch AdamW (over a leaf tensor that
is that slice) and puts the updated slices together again (the all-gather). AdamW is element-wise,
so the parameters are those of one plain AdamW over the whole vector.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from greenlab.base import validation
from greenlab.training.optimizers import state_bytes

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


# --- ZeRO stage 1, simulated in one process ---------------------------------------------------


def rank_optimizers(flat_params: torch.Tensor, world_size: int, lr: float, **adamw_options) -> list:
    """One ``torch.optim.AdamW`` per rank, each over a new leaf tensor holding that rank's slice
    of the 1-D ``flat_params`` (``ceil(n / world_size)`` elements, the last zero-padded)."""
    if not isinstance(flat_params, torch.Tensor) or flat_params.dim() != 1:
        raise ValueError("flat_params must be a 1-D tensor (e.g. torch.nn.utils.parameters_to_vector)")
    world = validation.integer("world_size", world_size, low=1, high=4096)
    lr = validation.number("lr", lr, low=0, low_open=True, high=10)
    shard = math.ceil(flat_params.numel() / world)
    padded = F.pad(flat_params.detach(), (0, shard * world - flat_params.numel()))
    return [torch.optim.AdamW([padded[r * shard:(r + 1) * shard].clone().requires_grad_(True)], lr=lr,
                              **adamw_options) for r in range(world)]


def zero1_step(flat_params: torch.Tensor, rank_grads: list, optimizers: list) -> None:
    """One ZeRO-1 step in place on ``flat_params``: the mean of ``rank_grads`` (one flat gradient per
    rank), each rank's slice updated by its optimizer from :func:`rank_optimizers`, then gathered."""
    world = len(optimizers)
    grad = torch.stack(list(rank_grads)).mean(dim=0)                       # all-reduce (average)
    shard = optimizers[0].param_groups[0]["params"][0].numel()
    grad = F.pad(grad, (0, shard * world - grad.numel()))
    for r, optimizer in enumerate(optimizers):                               # each rank, its slice
        piece = optimizer.param_groups[0]["params"][0]
        piece.grad = grad[r * shard:(r + 1) * shard].clone()
        optimizer.step()
    gathered = torch.cat([o.param_groups[0]["params"][0].detach() for o in optimizers])  # all-gather
    with torch.no_grad():
        flat_params.copy_(gathered[:flat_params.numel()])


def train_zero1(model: nn.Module, rank_batches: list, loss_fn, lr: float, world_size: int = 2,
                step=None, **adamw_options) -> dict:
    """Train ``model`` in place with simulated ZeRO-1: for each element of ``rank_batches`` (a list
    of ``world_size`` batches, one per rank), every rank's gradient of ``loss_fn(model, batch)``,
    then ``step(flat_params, rank_grads, optimizers)`` (default :func:`zero1_step`, or a learner's).
    Returns {"optimizers", "state_bytes_per_rank"} (bytes counted from each rank's AdamW state)."""
    step = step or zero1_step
    params = [p for p in model.parameters() if p.requires_grad]
    flat = nn.utils.parameters_to_vector(params).detach().clone()
    optimizers = rank_optimizers(flat, world_size, lr, **adamw_options)
    for batches in rank_batches:
        if len(batches) != world_size:
            raise ValueError(f"each element of rank_batches must hold {world_size} batches, got {len(batches)}")
        grads = []
        for b in batches:
            model.zero_grad(set_to_none=True)
            loss_fn(model, *b).backward()
            grads.append(torch.cat([p.grad.reshape(-1) for p in params]))
        step(flat, grads, optimizers)
        nn.utils.vector_to_parameters(flat, params)
    model.zero_grad(set_to_none=True)
    return {"optimizers": optimizers, "state_bytes_per_rank": [state_bytes(o) for o in optimizers]}


def train_plain(model: nn.Module, rank_batches: list, loss_fn, lr: float, **adamw_options) -> torch.optim.AdamW:
    """The same steps with one plain AdamW over all of ``model``'s parameters and the ranks'
    gradients averaged: what :func:`train_zero1` must reproduce. Returns the optimizer."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, **adamw_options)
    for batches in rank_batches:
        optimizer.zero_grad(set_to_none=True)
        for b in batches:
            (loss_fn(model, *b) / len(batches)).backward()
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return optimizer


def pipeline_bytes_per_rank_per_step(batch_size: int, seq_len: int, d_model: int, stages: int,
                                     activation_bytes: int = 4) -> int:
    """Bytes one middle pipeline stage sends per step (the busiest rank; the first and last stages
    send half): its output activations forward to the next stage and the gradient of its input
    back to the previous one, batch x seq x d_model each. 0 with one stage."""
    total = pipeline_bytes_per_step(batch_size, seq_len, d_model, stages, activation_bytes)
    if stages == 1:
        return 0
    per_boundary = total // (stages - 1)  # forward and backward, 2 x batch x seq x d_model
    return per_boundary if stages >= 3 else per_boundary // 2


def _stage(stage) -> int:
    """A ZeRO stage: 0, 1, 2 or 3."""
    return validation.integer("stage (ZeRO stage 0, 1, 2 or 3)", stage, low=0, high=3)
