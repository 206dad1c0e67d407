"""Pruning (lesson 06): zero the smallest weights, or remove whole channels.

- ``prune_unstructured``: zero the smallest weights (global L1 magnitude, through
  ``torch.nn.utils.prune.global_unstructured``). The tensors keep their shape, so dense
  kernels do the same arithmetic: smaller when compressed on disk, not faster.
- ``prune_channels``: remove whole output channels of convolutions (chosen by L2 norm with
  ``torch.nn.utils.prune.ln_structured``) and rebuild smaller dense layers, so every later
  layer does less arithmetic. Works on greenlab's ``"cnn"`` models and plain ``nn.Sequential``
  conv nets (no residual connections).
- ``fine_grained_prune``, ``channel_prune``, ``prune_with_masks`` and ``keep_masks``: the same
  techniques one tensor at a time, the reference answers of the lesson's exercises.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn as nn
from torch.nn.utils import prune

from greenlab.base import validation


PRUNABLE = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)


def prune_unstructured(model: nn.Module, amount: float, permanent: bool = True) -> nn.Module:
    """A copy of ``model`` with the fraction ``amount`` of all conv/linear weights set to zero,
    chosen by global L1 magnitude (smallest absolute values across all layers together).

    ``permanent=True`` bakes the zeros into ``weight`` (``prune.remove``); ``False`` keeps torch's
    ``weight_orig`` + ``weight_mask`` so that fine-tuning keeps pruned weights at zero.
    """
    validation.module("model", model)
    amount = _check_amount(amount)
    validation.flag("permanent", permanent)
    pruned = copy.deepcopy(model)
    targets = [(m, "weight") for m in pruned.modules() if isinstance(m, PRUNABLE)]
    if not targets:
        raise ValueError("the model has no Conv/Linear layers to prune")
    prune.global_unstructured(targets, pruning_method=prune.L1Unstructured, amount=amount)
    if permanent:
        for module, name in targets:
            prune.remove(module, name)
    return pruned


def sparsity(model: nn.Module) -> float:
    """Fraction (0..1) of conv/linear weight entries that are exactly zero."""
    zeros = total = 0
    for m in model.modules():
        if isinstance(m, PRUNABLE):
            w = m.weight.detach()
            zeros += int((w == 0).sum())
            total += w.numel()
    if total == 0:
        raise ValueError("the model has no Conv/Linear weights")
    return zeros / total


def prune_channels(model: nn.Module, amount: float, channel_fn=None) -> nn.Module:
    """A smaller dense copy of ``model`` with the fraction ``amount`` of output channels removed
    from every Conv2d whose output feeds another conv or linear layer.

    Channels are chosen per layer by the L2 norm of their filters (``prune.ln_structured``); the
    conv, its normalisation layer and the next layer's inputs are rebuilt with fewer channels.
    At least one channel stays; with GroupNorm the kept count is a multiple of its groups.
    Supports greenlab's ``"cnn"`` models (``features`` + ``head``) and plain ``nn.Sequential``
    nets of Conv2d, BatchNorm2d/GroupNorm, pooling, activations, Flatten and Linear layers.

    ``channel_fn(conv, next_layer, keep) -> (new_conv, new_next, kept)`` (e.g. a learner's
    ``channel_prune``; sorted kept indices) chooses and slices a conv and the layer that reads its
    channels wherever that layer is a plain Conv2d, or a Linear reading one value per channel,
    with no GroupNorm or depthwise conv between; elsewhere the L2 choice above applies.
    """
    amount = _check_amount(amount)
    if channel_fn is not None and not callable(channel_fn):
        raise ValueError(f"channel_fn must be a function (conv, next_layer, keep), got {channel_fn!r}")
    pruned = copy.deepcopy(model)
    leaves = _chain_leaves(pruned)
    pending = None  # indices of the channels kept so far, or None when unchanged
    channels = None  # channel count reaching the current layer before pruning
    replaced = {}  # leaf index -> the consumer layer channel_fn already sliced
    for i, (parent, name, module) in enumerate(leaves):
        if i in replaced:  # already sliced on its inputs; its own outputs may still be pruned
            module, pending = replaced.pop(i), None
        if isinstance(module, nn.Conv2d) and channel_fn is not None and pending is None \
                and module.groups == 1 and amount > 0 and _consumer(leaves, i) is not None:
            j = _consumer(leaves, i)
            n = module.out_channels
            keep = max(1, n - int(round(amount * n)))
            module, replaced[j], kept = channel_fn(module, leaves[j][2], keep)
            channels = n
            pending = torch.as_tensor(kept, dtype=torch.long).flatten().sort().values
        elif isinstance(module, nn.Conv2d):
            if _is_depthwise(module):
                if pending is not None:
                    module = _slice_depthwise(module, pending)
            else:
                if pending is not None:
                    module = _slice_conv(module, inputs=pending)
                    pending = None
                channels = module.out_channels
                groups = _lookahead(leaves, i) if module.groups == 1 else None
                if groups is not None and amount > 0:
                    keep = _choose_channels(module, amount, groups)
                    module = _slice_conv(module, outputs=keep)
                    pending = keep
        elif isinstance(module, nn.BatchNorm2d) and pending is not None:
            module = _slice_batchnorm(module, pending)
        elif isinstance(module, nn.GroupNorm) and pending is not None:
            module = _slice_groupnorm(module, pending)
        elif isinstance(module, nn.Linear):
            if pending is not None:
                module = _slice_linear_inputs(module, pending, channels)
                pending = None
        setattr(parent, name, module)
        leaves[i] = (parent, name, module)
    return pruned


def fine_grained_prune(weight: torch.Tensor, sparsity: float):
    """Magnitude pruning of one tensor: ``(pruned, mask)``, where ``mask`` (bool, same shape) is
    False for the ``round(sparsity * numel)`` entries of smallest absolute value (ties broken by
    torch's ``topk``) and ``pruned = weight * mask``. ``weight`` itself is left untouched.
    Through ``torch.nn.utils.prune.L1Unstructured``."""
    if not isinstance(weight, torch.Tensor) or weight.numel() == 0:
        raise ValueError("weight must be a non-empty torch.Tensor")
    sparsity = validation.number("sparsity (a fraction of entries to zero)", sparsity, low=0, high=1)
    w = weight.detach()
    mask = prune.L1Unstructured(amount=sparsity).compute_mask(w, default_mask=torch.ones_like(w))
    mask = mask.bool()
    return w * mask, mask


def channel_prune(conv: nn.Conv2d, next_layer: nn.Module, keep: int):
    """Keep the ``keep`` output channels of ``conv`` whose filters have the largest L1 norm:
    ``(new_conv, new_next, kept)``, with ``kept`` the sorted indices of the kept channels,
    ``new_conv`` holding only those filters (and biases) and ``new_next`` (a Conv2d or a Linear
    that reads ``conv``'s channels directly) only the matching input channels. On the kept
    channels ``new_conv``'s output equals ``conv``'s. Channels chosen with
    ``torch.nn.utils.prune.ln_structured(n=1)``; the layers passed in are left untouched."""
    if not isinstance(conv, nn.Conv2d) or conv.groups != 1:
        raise ValueError("conv must be an nn.Conv2d with groups=1")
    if not isinstance(next_layer, (nn.Conv2d, nn.Linear)):
        raise ValueError(f"next_layer must be an nn.Conv2d or nn.Linear, got {type(next_layer).__name__}")
    inputs = next_layer.in_channels if isinstance(next_layer, nn.Conv2d) else next_layer.in_features
    if inputs != conv.out_channels or getattr(next_layer, "groups", 1) != 1:
        raise ValueError(f"next_layer must read conv's {conv.out_channels} channels directly, "
                         f"it reads {inputs}")
    keep = validation.integer("keep (output channels to keep)", keep, low=1, high=conv.out_channels)
    n = conv.out_channels
    if keep == n:
        kept = torch.arange(n)
    else:
        probe = nn.Conv2d(conv.in_channels, n, conv.kernel_size, bias=False)
        probe.weight.data.copy_(conv.weight.detach().cpu())
        prune.ln_structured(probe, "weight", amount=n - keep, n=1, dim=0)
        kept = torch.nonzero(probe.weight_mask.flatten(1).amax(dim=1), as_tuple=False).flatten()
    new_conv = _slice_conv(conv, outputs=kept)
    if isinstance(next_layer, nn.Conv2d):
        new_next = _slice_conv(next_layer, inputs=kept)
    else:
        new_next = _slice_linear_inputs(next_layer, kept, n)
    return new_conv, new_next, kept


def prune_with_masks(model: nn.Module, amount: float, prune_fn=None):
    """A copy of ``model`` with the fraction ``amount`` of all conv/linear weights zeroed,
    chosen globally by ``prune_fn(weights, sparsity) -> (pruned, mask)`` (default
    ``fine_grained_prune``) applied to every such weight flattened into one vector; returns
    ``(pruned_model, masks)``, ``masks`` a dict of parameter name -> bool mask, for
    ``keep_masks`` during fine-tuning. Lets a lesson prune a model with a learner's function."""
    validation.module("model", model)
    amount = _check_amount(amount)
    prune_fn = fine_grained_prune if prune_fn is None else prune_fn
    if not callable(prune_fn):
        raise ValueError(f"prune_fn must be a function (weights, sparsity) -> (pruned, mask), got {prune_fn!r}")
    pruned = copy.deepcopy(model)
    params = [(f"{name}.weight", m.weight) for name, m in pruned.named_modules() if isinstance(m, PRUNABLE)]
    if not params:
        raise ValueError("the model has no Conv/Linear layers to prune")
    flat = torch.cat([p.detach().flatten() for _, p in params])
    _values, mask = prune_fn(flat.clone(), amount)
    mask = torch.as_tensor(mask).to(device=flat.device).flatten().bool()
    if mask.numel() != flat.numel():
        raise ValueError(f"prune_fn returned a mask of {mask.numel()} entries for {flat.numel()} weights")
    masks, start = {}, 0
    with torch.no_grad():
        for name, p in params:
            m = mask[start:start + p.numel()].view_as(p)
            p.mul_(m)
            masks[name] = m.clone()
            start += p.numel()
    return pruned, masks


def keep_masks(masks: dict):
    """A ``greenlab.training.loop`` callback that multiplies each masked parameter by its mask after every
    optimizer step, so pruned weights stay exactly zero while a pruned model is fine-tuned."""
    if not isinstance(masks, dict) or not masks:
        raise ValueError("masks must be a non-empty dict of parameter name -> mask")

    def keep(state):
        with torch.no_grad():
            for name, p in state.model.named_parameters():
                if name in masks:
                    p.mul_(masks[name].to(p.device, p.dtype))

    return keep


def _check_amount(amount) -> float:
    return validation.number("amount (a fraction, e.g. 0.5 removes half)", amount, low=0, high=1,
                             high_open=True)


_PASS_THROUGH = (nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.GELU, nn.SiLU, nn.Hardswish, nn.Tanh,
                 nn.Sigmoid, nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d,
                 nn.Dropout, nn.Dropout2d, nn.Identity, nn.Flatten)


_CHANNEL_LAYERS = (nn.Conv2d, nn.BatchNorm2d, nn.GroupNorm, nn.Linear)


def _chain_leaves(model: nn.Module) -> list:
    """(parent, attribute, module) for each layer in forward order, for chain-shaped models."""
    if isinstance(model, nn.Sequential):
        containers = [model]
    elif isinstance(getattr(model, "features", None), nn.Sequential) and isinstance(
            getattr(model, "head", None), nn.Linear) and set(dict(model.named_children())) == {"features", "head"}:
        containers = [model.features, (model, "head")]  # greenlab SmallCNN: features, pool, head
    else:
        raise ValueError(f"prune_channels supports greenlab 'cnn' models and plain nn.Sequential "
                         f"conv nets, not {type(model).__name__} (residual or branching models need "
                         "their channels pruned together)")
    leaves = []
    for c in containers:
        if isinstance(c, tuple):
            leaves.append((c[0], c[1], getattr(*c)))
        else:
            _flatten_sequential(c, leaves)
    return leaves


def _flatten_sequential(seq: nn.Sequential, out: list) -> None:
    for name, child in seq.named_children():
        if isinstance(child, nn.Sequential):
            _flatten_sequential(child, out)
        elif isinstance(child, _CHANNEL_LAYERS) or isinstance(child, _PASS_THROUGH):
            out.append((seq, name, child))
        else:
            raise ValueError(f"prune_channels cannot rebuild layer {type(child).__name__}; supported: "
                             "Conv2d, BatchNorm2d, GroupNorm, Linear, pooling, activations, Flatten, Dropout")


def _is_depthwise(conv: nn.Conv2d) -> bool:
    return conv.groups > 1 and conv.groups == conv.in_channels == conv.out_channels


def _lookahead(leaves: list, i: int):
    """If the output channels of conv ``i`` may be pruned, the group count they must be a multiple
    of (1 without GroupNorm); None when no conv/linear layer consumes them."""
    groups = 1
    for _parent, _name, m in leaves[i + 1:]:
        if isinstance(m, nn.GroupNorm):
            groups = math.lcm(groups, m.num_groups)
        elif isinstance(m, nn.Conv2d):
            if _is_depthwise(m):
                continue
            return groups if m.groups == 1 else None
        elif isinstance(m, nn.Linear):
            return groups
    return None


def _consumer(leaves: list, i: int):
    """Index of the layer reading conv ``i``'s channels when ``channel_fn`` can slice it: a plain
    Conv2d, or a Linear with one input per channel, reached through BatchNorm, activations and
    pooling only; else None."""
    channels = leaves[i][2].out_channels
    for j in range(i + 1, len(leaves)):
        m = leaves[j][2]
        if isinstance(m, nn.Conv2d):
            return j if m.groups == 1 and m.in_channels == channels else None
        if isinstance(m, nn.Linear):
            return j if m.in_features == channels else None
        if isinstance(m, nn.GroupNorm):
            return None
    return None


def _choose_channels(conv: nn.Conv2d, amount: float, groups: int) -> torch.Tensor:
    """Sorted indices of the output channels to keep, by the L2 norm of each filter."""
    n = conv.out_channels
    keep = n - int(round(amount * n))
    keep = max(groups, keep // groups * groups) if groups > 1 else max(1, keep)
    if keep >= n:
        return torch.arange(n)
    probe = nn.Conv2d(conv.in_channels, n, conv.kernel_size, bias=False)
    probe.weight.data.copy_(conv.weight.detach().cpu())
    prune.ln_structured(probe, "weight", amount=n - keep, n=2, dim=0)
    mask = probe.weight_mask.flatten(1).amax(dim=1)
    return torch.nonzero(mask, as_tuple=False).flatten()


def _slice_conv(conv: nn.Conv2d, inputs=None, outputs=None) -> nn.Conv2d:
    w = conv.weight.detach()
    b = conv.bias.detach() if conv.bias is not None else None
    if inputs is not None:
        w = w[:, inputs.to(w.device)]
    if outputs is not None:
        w = w[outputs.to(w.device)]
        b = b[outputs.to(w.device)] if b is not None else None
    new = nn.Conv2d(w.shape[1], w.shape[0], conv.kernel_size, stride=conv.stride, padding=conv.padding,
                    dilation=conv.dilation, groups=1, bias=b is not None, padding_mode=conv.padding_mode)
    return _fill(new, conv, w, b)


def _slice_depthwise(conv: nn.Conv2d, keep: torch.Tensor) -> nn.Conv2d:
    idx = keep.to(conv.weight.device)
    w = conv.weight.detach()[idx]
    b = conv.bias.detach()[idx] if conv.bias is not None else None
    k = len(keep)
    new = nn.Conv2d(k, k, conv.kernel_size, stride=conv.stride, padding=conv.padding,
                    dilation=conv.dilation, groups=k, bias=b is not None, padding_mode=conv.padding_mode)
    return _fill(new, conv, w, b)


def _slice_batchnorm(bn: nn.BatchNorm2d, keep: torch.Tensor) -> nn.BatchNorm2d:
    new = nn.BatchNorm2d(len(keep), eps=bn.eps, momentum=bn.momentum, affine=bn.affine,
                         track_running_stats=bn.track_running_stats)
    new = new.to(device=_any_tensor(bn).device)
    with torch.no_grad():
        idx = keep.to(_any_tensor(bn).device)
        if bn.affine:
            new.weight.copy_(bn.weight[idx])
            new.bias.copy_(bn.bias[idx])
        if bn.track_running_stats:
            new.running_mean.copy_(bn.running_mean[idx])
            new.running_var.copy_(bn.running_var[idx])
            new.num_batches_tracked.copy_(bn.num_batches_tracked)
    new.train(bn.training)
    return new


def _slice_groupnorm(gn: nn.GroupNorm, keep: torch.Tensor) -> nn.GroupNorm:
    new = nn.GroupNorm(gn.num_groups, len(keep), eps=gn.eps, affine=gn.affine)
    if gn.affine:
        new = new.to(device=gn.weight.device, dtype=gn.weight.dtype)
        with torch.no_grad():
            idx = keep.to(gn.weight.device)
            new.weight.copy_(gn.weight[idx])
            new.bias.copy_(gn.bias[idx])
    new.train(gn.training)
    return new


def _slice_linear_inputs(linear: nn.Linear, keep: torch.Tensor, channels_before: int) -> nn.Linear:
    """Keep the input features that come from the kept channels (channel-major flattening)."""
    if linear.in_features % channels_before != 0:
        raise ValueError(f"cannot match Linear in_features={linear.in_features} to {channels_before} "
                         "channels before it")
    spatial = linear.in_features // channels_before
    idx = (keep[:, None] * spatial + torch.arange(spatial)[None, :]).flatten().to(linear.weight.device)
    w = linear.weight.detach()[:, idx]
    new = nn.Linear(w.shape[1], linear.out_features, bias=linear.bias is not None)
    return _fill(new, linear, w, linear.bias.detach() if linear.bias is not None else None)


def _fill(new: nn.Module, old: nn.Module, w: torch.Tensor, b) -> nn.Module:
    new = new.to(device=w.device, dtype=w.dtype)
    with torch.no_grad():
        new.weight.copy_(w)
        if b is not None:
            new.bias.copy_(b)
    new.weight.requires_grad_(old.weight.requires_grad)
    new.train(old.training)
    return new


def _any_tensor(module: nn.Module) -> torch.Tensor:
    for t in list(module.parameters()) + list(module.buffers()):
        return t
    return torch.empty(0)
