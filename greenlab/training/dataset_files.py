"""A dataset handed to other processes (lessons 08 (08_scaling_out) and 14 (14_sharing_a_cluster)): the
parent saves a ``Dataset``'s tensors once to one file, each worker process memory-maps it, so every worker
trains on exactly the parent's splits without loading or generating the data again.

``save_dataset(ds, path)`` returns a small JSON-safe spec (name, path, source, note, classes) to put in a
worker's config; ``load_dataset(spec)`` rebuilds the ``Dataset`` from it in the worker. Used by the torchrun
workers of ``greenlab.techniques.ddp`` and the study workers of ``greenlab.techniques.tuning``.
"""

from __future__ import annotations

from pathlib import Path

import torch

from greenlab.training.data import Dataset


def save_dataset(ds: Dataset, path: Path) -> dict:
    """Save ``ds``'s train, test and validation tensors (on the CPU) to ``path`` with ``torch.save``; return
    the spec ``load_dataset`` reads: {"name", "path", "source", "note", "num_classes"}, JSON-safe."""
    # the validation split travels too, so workers train on exactly the parent's training split
    torch.save({"train_x": ds.train_x.cpu(), "train_y": ds.train_y.cpu(), "test_x": ds.test_x.cpu(),
                "test_y": ds.test_y.cpu(), "val_x": ds.val_x.cpu(), "val_y": ds.val_y.cpu()}, path)
    return {"name": ds.name, "path": str(path), "source": ds.source, "note": ds.note,
            "num_classes": ds.num_classes}


def load_dataset(spec: dict) -> Dataset:
    """The ``Dataset`` that ``save_dataset`` wrote, from its spec: the tensors memory-mapped from the file
    (``torch.load(..., mmap=True, weights_only=True)``), so workers on one machine share its pages."""
    tensors = torch.load(spec["path"], mmap=True, weights_only=True)
    return Dataset(name=spec["name"], num_classes=spec["num_classes"], source=spec["source"],
                   note=spec["note"], **tensors)
