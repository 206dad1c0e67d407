"""``measure()``: the one way to open an energy window, on this process alone or, inside a
``torch.distributed`` job, on every rank together (reduced across ranks)."""

from __future__ import annotations

from greenlab.base import validation
from greenlab.energy.distributed import CollectiveWindow, process_group_active
from greenlab.energy.measure import EnergyWindow, IdlePower


def measure(label: str = "window", idle: IdlePower | None = None, sources: list | None = None,
            sync: bool = True, distributed: bool | None = False, gpus="used",
            attribution: str = "process") -> EnergyWindow:
    """A measurement window: context manager, decorator, or ``start()``/``stop()``.

    ``sources``: EnergySource objects (default: what this machine offers, see
    ``default_sources()``; a list from ``default_sources()`` brings its problems along).
    ``idle``: an :class:`IdlePower` to report energy above idle too.
    ``sync``: synchronise the CUDA devices this process uses at the window edges.
    ``gpus`` (``"used"``, ``"all"`` or CUDA indices) and ``attribution`` (``"process"`` or
    ``"machine"``, for the CPU estimate) choose the default sources; see ``discover()``.
    ``distributed``: True for a window every rank of a ``torch.distributed`` job opens, reduced
    across ranks (see ``greenlab.energy.distributed``); None for that whenever a process group
    is initialised; False for this process alone.
    """

    # a window labelled with a number, or sync=0 / distributed="no", used to open without a word
    label = validation.text("label", label, allow_empty=False)  # it names the window in every report
    sync = validation.flag("sync", sync)
    if distributed is not None:
        distributed = validation.flag("distributed", distributed)
    if distributed is None or distributed:
        if distributed or process_group_active():
            return CollectiveWindow(label, idle=idle, sources=sources, sync=sync)
    return EnergyWindow(label, idle=idle, sources=sources, sync=sync, gpus=gpus,
                        attribution=attribution)
