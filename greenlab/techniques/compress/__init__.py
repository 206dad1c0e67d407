"""Compression: pruning, quantisation, distillation and transfer learning (lesson 06), and
whether it pays back. One module per technique; every name is also here, as ``gl.compress.<name>``.

Every function that compresses a model returns a new model and leaves the one passed in untouched.

- ``pruning``: ``prune_unstructured`` (zeros, same shapes: not faster on dense kernels) and
  ``prune_channels`` (smaller dense layers), and the one-tensor reference answers.
- ``quantization``: int8 through ``torch.ao.quantization`` (``quantize_dynamic``, ``quantize_static``)
  and affine quantisation of one tensor (``linear_quantize``, ``dequantize``, ``fake_quantize``).
- ``distillation``: ``distill`` (Hinton, Vinyals and Dean, 2015) and ``fine_tune`` (transfer learning).
- ``payback``: ``energy_per_inference``, paired inference comparisons and ``break_even_inferences``:
  when does compression pay back?
"""

from greenlab.techniques.compress.distillation import DistillResult, distill, distillation_loss, fine_tune
from greenlab.techniques.compress.payback import (
    BreakEven, InferenceComparison, InferenceCost, SpeedComparison, break_even_inferences, break_even_interval,
    compare_inference, compare_inference_speed, energy_per_inference, joules_text)
from greenlab.techniques.compress.pruning import (
    PRUNABLE, channel_prune, fine_grained_prune, keep_masks, prune_channels, prune_unstructured, prune_with_masks,
    sparsity)
from greenlab.techniques.compress.quantization import (
    dequantize, fake_quantize, fake_quantized, linear_quantize, model_size_bytes, quantization_range,
    quantize_dynamic, quantize_static)

__all__ = [
    "PRUNABLE", "prune_unstructured", "sparsity", "prune_channels", "fine_grained_prune", "channel_prune",
    "prune_with_masks", "keep_masks",
    "quantize_dynamic", "quantize_static", "model_size_bytes", "quantization_range", "linear_quantize",
    "dequantize", "fake_quantize", "fake_quantized",
    "distillation_loss", "DistillResult", "distill", "fine_tune",
    "InferenceCost", "energy_per_inference", "SpeedComparison", "compare_inference_speed", "joules_text",
    "BreakEven", "break_even_interval", "InferenceComparison", "compare_inference", "break_even_inferences",
]
