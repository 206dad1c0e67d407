"""The course's FLOP counter: ``torch.utils.flop_counter.FlopCounterMode`` with two corrections,
so every count in the course (a model's training step, a language model's step, a roofline
point) comes from one place.

- The CPU's fused attention kernel is counted (torch knows only the CUDA kernels' formulas), with
  the same formulas as the CUDA kernels.
- A grouped (e.g. depthwise) convolution's backward pass is counted per group: torch's own
  formula counts it as if every channel met every channel (about 8.5x too many with 16 groups).
"""

from __future__ import annotations

import torch


def flop_counter():
    """A fresh ``FlopCounterMode`` (no printed table) with the corrections above; use it as a
    context manager and read ``get_total_flops()`` or ``get_flop_counts()`` afterwards."""
    from torch.utils.flop_counter import FlopCounterMode

    return FlopCounterMode(display=False, custom_mapping=corrected_formulas())


def corrected_formulas() -> dict:
    """The operator -> formula entries ``flop_counter`` adds to torch's own."""
    return {**_sdpa_cpu_formulas(), torch.ops.aten.convolution_backward: _grouped_conv_backward_flops}


def _sdpa_cpu_formulas() -> dict:
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    aten = torch.ops.aten

    def forward(query, key, value, *args, out_shape=None, **kwargs):
        return sdpa_flop_count(query, key, value)

    def backward(grad_out, query, key, value, *args, out_shape=None, **kwargs):
        return sdpa_backward_flop_count(grad_out, query, key, value)

    formulas = {}
    if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu"):
        formulas[aten._scaled_dot_product_flash_attention_for_cpu] = forward
        formulas[aten._scaled_dot_product_flash_attention_for_cpu_backward] = backward
    return formulas


def _grouped_conv_backward_flops(grad_out_shape, x_shape, w_shape, bias, stride, padding, dilation, transposed,
                                 output_padding, groups, output_mask, out_shape=None, **kwargs) -> int:
    """torch's backward-convolution formula, applied per group."""
    from torch.utils.flop_counter import conv_backward_flop

    def per_group(shape):
        return [shape[0], shape[1] // groups, *shape[2:]]

    w = [w_shape[0] // groups, *w_shape[1:]]  # (out, in/groups, ...), or (in, out/groups, ...) transposed
    grads = [per_group(out_shape[0]) if output_mask[0] else None, w if output_mask[1] else None, None]
    return groups * conv_backward_flop(per_group(grad_out_shape), per_group(x_shape), w, bias, stride, padding,
                                       dilation, transposed, output_padding, 1, output_mask, out_val=grads)
