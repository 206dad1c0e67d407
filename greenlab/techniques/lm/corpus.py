"""The text a language model learns from (lessons 10 (10_language_model), 12 (12_adapting_and_serving) and 11
(11_fitting_in_memory)): byte corpora that ship with every Python installation, split once, and random windows
of them as batches.

Byte-level (a vocabulary of 256), so no tokenizer is downloaded; sizes in bytes are sizes in tokens.
"""

from __future__ import annotations

import dataclasses

import torch

from greenlab.base import validation

VOCAB = 256  # bytes
CORPORA = ("pydoc-topics", "stdlib-source")
# pure-Python standard-library modules whose source makes the "stdlib-source" corpus (a new kind of
# text for fine-tuning a model trained on the help texts)
STDLIB_MODULES = ("bisect", "calendar", "csv", "dataclasses", "difflib", "enum", "fractions", "functools",
                  "heapq", "json.decoder", "json.encoder", "shlex", "statistics", "string", "textwrap")


MAX_COUNT = 2**31
MAX_TOKENS_PER_BATCH = 2**27  # seq_len x batch_size: 1 GiB of int64 ids, far beyond a lesson's batch


@dataclasses.dataclass(frozen=True)
class Corpus:
    """A byte corpus split once, deterministically: ``train`` and ``val`` are uint8 tensors.

    ``name``, ``source`` and ``licence`` say what the text is; sizes are in bytes (= tokens)."""

    name: str
    source: str
    licence: str
    train: torch.Tensor
    val: torch.Tensor

    @property
    def n_bytes(self) -> int:
        """Bytes in both splits (= tokens, at one byte a token)."""
        return int(self.train.numel() + self.val.numel())

    def describe(self) -> str:
        """One line: what, where from, licence, sizes."""
        return (f"{self.name}: {self.source}; licence: {self.licence}; {self.n_bytes:,} bytes "
                f"({self.train.numel():,} train, {self.val.numel():,} validation)")

    def unigram_entropy(self) -> float:
        """Entropy of the training split's byte frequencies, nats per byte: the validation loss of
        the best model that ignores context (a model that beats it has learned from context)."""
        counts = torch.bincount(self.train.long(), minlength=VOCAB).double()
        p = counts[counts > 0] / counts.sum()
        return float(-(p * p.log()).sum())


def load_corpus(name: str = "pydoc-topics", val_fraction: float = 0.1, max_bytes: int | None = None) -> Corpus:
    """Load a corpus that ships with Python and split it: the last ``val_fraction`` of the bytes
    (after the topics are sorted by name) is the validation split.

    ``pydoc-topics``: the help texts of CPython's ``pydoc_data.topics`` (the language reference
    sections ``help()`` shows), UTF-8 bytes. ``stdlib-source``: the Python source of the
    standard-library modules in ``STDLIB_MODULES``, in that order. ``max_bytes`` keeps only the
    first bytes (both splits shrink in proportion). Both are part of CPython (PSF licence)."""
    validation.choice("name", name, CORPORA)
    val_fraction = validation.number("val_fraction", val_fraction, low=0, high=0.5, low_open=True)
    max_bytes = validation.integer("max_bytes", max_bytes, low=1024, high=MAX_COUNT, allow_none=True)
    if max_bytes is not None and max_bytes - int(max_bytes * (1 - val_fraction)) < 2:
        raise ValueError(f"val_fraction {val_fraction:g} of max_bytes {max_bytes} leaves fewer than 2 bytes "
                         "for validation (one input and its target): raise one of them")
    import sys

    if name == "pydoc-topics":
        from pydoc_data.topics import topics

        text = "\n\n".join(topics[k] for k in sorted(topics))
        what = f"pydoc_data.topics ({len(topics)} help topics)"
    else:
        import importlib
        import inspect

        text = "\n\n".join(inspect.getsource(importlib.import_module(m)) for m in STDLIB_MODULES)
        what = f"standard-library source of {len(STDLIB_MODULES)} modules ({', '.join(STDLIB_MODULES)})"
    data = torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8)
    if max_bytes is not None:
        data = data[:max_bytes]
    cut = int(len(data) * (1 - val_fraction))
    version = ".".join(map(str, sys.version_info[:3]))
    return Corpus(name=name, source=f"CPython {version} {what}",
                  licence="Python Software Foundation License (PSF-2.0)",
                  train=data[:cut].clone(), val=data[cut:].clone())


def batch(data: torch.Tensor, seq_len: int, batch_size: int, generator: torch.Generator | None = None,
          device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` random windows of ``seq_len`` bytes: inputs and next-byte targets (int64)."""
    validation.tensor("data", data, dims=1, integer=True)
    seq_len = validation.integer("seq_len", seq_len, low=1, high=len(data) - 1)
    batch_size = validation.integer("batch_size", batch_size, low=1, high=MAX_COUNT)
    _check_tokens(seq_len, batch_size)
    if device is not None:
        validation.device("device", device)
    if generator is not None:
        validation.instance("generator", generator, torch.Generator, "a torch.Generator or None")
    start = torch.randint(0, len(data) - seq_len, (batch_size,), generator=generator)
    idx = start[:, None] + torch.arange(seq_len + 1)
    chunk = data[idx].long()
    if device is not None:
        chunk = chunk.to(device)
    return chunk[:, :-1], chunk[:, 1:]


def _check_tokens(seq_len: int, batch_size: int) -> None:
    """ValueError naming both when ``seq_len`` x ``batch_size`` is beyond MAX_TOKENS_PER_BATCH."""
    if seq_len * batch_size > MAX_TOKENS_PER_BATCH:
        raise ValueError(f"seq_len x batch_size = {seq_len} x {batch_size} tokens per batch is more than "
                         f"{MAX_TOKENS_PER_BATCH:,}: lower one of them")
