"""A small language model, trained on text every Python installation ships, measured in joules per token
(lessons 10 (10_language_model), 12 (12_adapting_and_serving) and 11 (11_fitting_in_memory); part of layer 6,
techniques). One module per idea; the model's names are also here, as ``gl.lm.<name>``:

    corpus = gl.lm.load_corpus()                       # CPython's pydoc topics, bytes, PSF licence
    model = gl.lm.TinyGPT(d_model=64, n_layers=2, n_heads=4, max_seq_len=64)
    run = gl.lm.train_lm(model, corpus, gl.lm.LMConfig(seq_len=64, batch_size=16, steps=200))
    run.joules_per_token, run.val_loss, run.joules_to_target

- ``corpus``: byte corpora (a vocabulary of 256, so no tokenizer is downloaded) and random windows as batches.
- ``gpt``: ``TinyGPT``, a decoder-only transformer whose attention is
  ``torch.nn.functional.scaled_dot_product_attention`` (causal), with optional activation checkpointing per
  block (``torch.utils.checkpoint``); ``lm_loss``.
- ``training``: ``train_lm``, one ``greenlab.measure`` window around the training steps; each evaluation point in
  ``history`` carries the cumulative joules, so the energy to reach a validation loss is read off it.
- ``comparison``: ``compare_lm`` runs paired repeats and returns a ``greenlab.experiments.Comparison`` (verdicts
  with intervals); ``tune_lr``; verdicts in words.
- ``costs``: FLOPs of a training step and of attention; when compiling pays back.

Beside them, with their own ``gl`` names: ``compiling`` (``gl.lm_compile``), ``serving`` (``gl.lm_serve``),
``lora``, ``sharding`` and ``sharding_run``. Losses are in nats per byte (cross-entropy with the natural log).
"""

from greenlab.techniques.lm.comparison import compare_lm, explain_bf16, plain_verdict, tune_lr
from greenlab.techniques.lm.corpus import (
    CORPORA, MAX_COUNT, MAX_TOKENS_PER_BATCH, STDLIB_MODULES, VOCAB, Corpus, batch, load_corpus)
from greenlab.techniques.lm.costs import attention_flops, compile_break_even_steps, train_step_flops
from greenlab.techniques.lm.gpt import (
    MAX_PARAMS, Block, TinyGPT, causal_attention, checkpoint_blocks, lm_loss, use_attention)
from greenlab.techniques.lm.training import (
    LR_SCHEDULES, PRECISIONS, LMConfig, LMRun, evaluate, joules_per_token, make_optimizer, make_scheduler, train_lm,
    train_step)

__all__ = [
    "VOCAB", "CORPORA", "STDLIB_MODULES", "MAX_COUNT", "MAX_TOKENS_PER_BATCH", "Corpus", "load_corpus", "batch",
    "MAX_PARAMS", "causal_attention", "checkpoint_blocks", "use_attention", "Block", "TinyGPT", "lm_loss",
    "PRECISIONS", "LR_SCHEDULES", "LMConfig", "LMRun", "joules_per_token", "evaluate", "make_optimizer",
    "make_scheduler", "train_step", "train_lm",
    "compare_lm", "tune_lr", "plain_verdict", "explain_bf16",
    "train_step_flops", "attention_flops", "compile_break_even_steps",
]
