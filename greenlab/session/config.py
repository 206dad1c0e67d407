"""Session set-up: seeds, device choice, quick mode and the folders greenlab uses.

``setup()`` is the first call in every lesson. It seeds Python, NumPy and PyTorch,
picks a device (CUDA, then Apple MPS, then CPU; never an assertion), decides quick mode
and prints one line saying what it chose and why.

Quick mode (smaller sizes, still real training) is on when there is no CUDA GPU, because
full sizes are meant for one; ``budget()`` is the one place lessons size their work.

Environment variables:

- ``GREENLAB_QUICK=1`` (or ``true``/``yes``/``on``), or ``CI`` set: quick mode;
  ``GREENLAB_QUICK=0``: full mode even without a GPU (it wins over ``CI``).
- ``GREENLAB_GRADING=1``: grading mode, set by the nbgrader course's config: always quick mode (it
  wins over ``GREENLAB_QUICK``), so an autograder runs each lesson at its smallest size.
- ``GREENLAB_RESULTS_DIR``: where the results log goes.
- ``GREENLAB_DATA_DIR``: the data folder (cited tables; cached datasets in its ``cache`` subfolder).
- ``GREENLAB_CACHE_DIR``: the dataset cache, if it should live elsewhere.
- ``GREENLAB_LESSONS_DIR``: where ``greenlab lab`` looks for lessons.
- ``GREENLAB_THREADS=N``: PyTorch's CPU threads; unset or ``auto``, ``setup()`` chooses them
  for this machine and says why (``greenlab.session.threads``).
- ``GREENLAB_PROGRESS=0``: no progress bars or progress lines (``greenlab.base.progress``).
- ``GREENLAB_DOWNLOAD``: 1 requires dataset downloads, 0 forbids them; unset, datasets are
  downloaded outside quick mode and CI (``greenlab.training.datacache.policy``).
"""

from __future__ import annotations

import os
import random
import sys
from dataclasses import dataclass, field

from greenlab.session.devices import (
    choose_device as _choose_device,
    device_name as _device_name,
    grading_mode,
    mps_available as _mps_available,
    quick_decision,
)
from greenlab.base.interrupts import Interrupted
from greenlab.session import hardware, threads as gl_threads
from greenlab.base.paths import (
    cache_dir,
    data_dir,
    in_checkout,
    learner_copy,
    lessons_dir,
    repo_root,
    results_dir,
)


@dataclass(frozen=True)
class Settings:
    """What ``setup()`` chose: device ("cuda"/"cpu"), quick mode, seed and energy sources."""

    device: str
    quick: bool
    seed: int
    sources: dict = field(default_factory=dict)
    device_name: str = ""
    quick_reason: str = ""
    native_precisions: dict = field(default_factory=dict)
    threads: int = 0
    threads_reason: str = ""
    quick_asked: bool = False  # quick mode asked for (GREENLAB_QUICK=1, CI, setup(quick=True)), not the device's

    def line(self) -> str:
        """The one line ``setup()`` prints."""
        where = f"{self.device} ({self.device_name})" if self.device_name else self.device
        if self.sources:
            energy = ", ".join(f"{k}={v}" for k, v in self.sources.items())
        else:
            energy = "none available"
        quick = f"on ({self.quick_reason})" if self.quick else "off"
        line = (f"greenlab: device {where} | energy sources: {energy} | quick mode {quick} | seed {self.seed}"
                f" | CPU threads {self.threads}" + (f" ({self.threads_reason})" if self.threads_reason else ""))
        if self.device == "mps" and self.sources.get("gpu:0") != "apple-soc":
            line += " | Apple GPU energy: not measured (zeus-apple-silicon reads it: pip install zeus-apple-silicon)"
        slow = [p for p in ("bf16", "fp16") if not self.native_precisions.get(p, True)]
        if slow:
            line += f" | emulated here: {', '.join(slow)} (lessons size those runs down)"
        return line


_current: Settings | None = None


def setup(seed: int = 0, quick: bool | None = None, device: str | None = None,
          verbose: bool = True, threads: int | None = None) -> Settings:
    """Seed everything, choose the device and quick mode, print one line, return ``Settings``.

    ``device``: "cuda", "cuda:N", "mps" or "cpu"; None picks CUDA, then MPS, then CPU.
    ``quick``: None decides from ``GREENLAB_QUICK``, ``CI`` and the device (quick without a
    CUDA GPU).
    ``threads``: PyTorch's CPU threads (``torch.set_num_threads``); None reads
    ``GREENLAB_THREADS``, else chooses for this machine (``greenlab.session.threads.choose``: the cores
    this process may use less those other programs keep busy, one thread on 2 cores or fewer).
    In IPython/Jupyter, an interrupted ``gl.train``/``gl.compare`` then shows as one line.
    """
    global _current
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= 2**32 - 1:
        raise ValueError(f"seed must be an integer in [0, 4294967295] (numpy's range), got {seed!r}")
    if quick is not None and not isinstance(quick, bool):
        raise ValueError(f"quick must be True, False or None (decide from GREENLAB_QUICK/CI), got {quick!r}")
    if not isinstance(verbose, bool):
        raise ValueError(f"verbose must be True or False, got {verbose!r}")
    chosen = _choose_device(device)
    thread_choice = _set_threads(threads)
    _show_interrupts_as_one_line()
    seed_everything(seed)
    if quick is None:
        quick, reason = quick_decision(os.environ, chosen)
        asked = quick and quick_decision(os.environ, "cuda")[0]  # quick even with a CUDA GPU: asked for
    else:
        quick, reason = bool(quick), "set by setup(quick=...)"
        asked = quick
    _current = Settings(device=chosen, quick=quick, seed=seed, sources=_energy_sources(),
                        device_name=_device_name(chosen), quick_reason=reason,
                        native_precisions=hardware.native_precisions(chosen), threads=_torch_threads(),
                        threads_reason=thread_choice.reason, quick_asked=asked)
    if verbose:
        print(_current.line())
    return _current


def settings() -> Settings | None:
    """The ``Settings`` from the last ``setup()`` call, or None before it."""
    return _current


def budget(full=None, quick=None, *, gpu=None, cpu=None, emulated=None, precision=None, grading=None):
    """Pick a size for this machine: the single place a lesson sizes its work.

    - ``emulated`` when ``precision`` ("bf16"/"fp16") is emulated on the chosen device, where
      it runs many times slower than fp32 (e.g. bf16 on a CPU without bf16 units), in any mode;
    - else ``grading``, when given, in grading mode (``GREENLAB_GRADING``): the smallest size at
      which a course's autograder still runs what a grade needs (a run a statement cites);
    - else ``cpu``, when given, in quick mode that the device chose (no CUDA GPU) rather than
      ``GREENLAB_QUICK=1``, ``CI`` or ``setup(quick=True)``: a learner's own machine, where a lesson
      may spend a few minutes of work that CI's quick sizes would not show;
    - else ``quick`` in quick mode;
    - else ``gpu`` on a GPU (CUDA or MPS), when given: work big enough to keep it busy;
    - else ``full``.

    ``full`` and ``quick`` are required; ``emulated`` and ``precision`` go together; numbers
    must be positive. ``gl.hardware.precision_support(precision, gl.device()).note()`` says
    what the emulated case means.
    """
    if full is None or quick is None:
        raise ValueError("budget() needs both full=... and quick=..., e.g. budget(full=60000, quick=2000)")
    if (emulated is None) != (precision is None):
        raise ValueError("budget(emulated=..., precision=...) go together, e.g. "
                         "budget(full=2048, quick=2048, emulated=512, precision='bf16')")
    for name, value in (("full", full), ("quick", quick), ("gpu", gpu), ("cpu", cpu), ("emulated", emulated),
                        ("grading", grading)):
        # sizes may be any object (a list, a name), but a number must be a usable one: inf sized work forever
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not 0 < value < float("inf"):
            raise ValueError(f"budget({name}=...) must be a positive finite number, got {value!r}")
        if isinstance(value, (str, bytes, list, tuple, dict, set)) and not value:  # an empty size sized nothing
            raise ValueError(f"budget({name}=...) must not be empty, got {value!r}")
    if precision is not None:
        if not hardware.precision_support(precision, device()).native:
            return emulated
    if grading is not None and grading_mode(os.environ):
        return grading
    if is_quick():
        return cpu if cpu is not None and not quick_asked() else quick
    if gpu is not None and device() != "cpu":
        return gpu
    return full


def is_quick() -> bool:
    """True in quick mode (set by ``setup()``; before it, decided as ``setup()`` would)."""
    if _current is not None:
        return _current.quick
    return quick_decision(os.environ, _choose_device(None))[0]


def quick_asked() -> bool:
    """True when quick mode was asked for (``GREENLAB_QUICK=1``, ``CI``, ``setup(quick=True)``)
    rather than chosen because there is no CUDA GPU; False outside quick mode."""
    if _current is not None:
        return _current.quick and _current.quick_asked
    return quick_decision(os.environ, "cuda")[0]


def device() -> str:
    """The device chosen by ``setup()``; before it, CUDA, then MPS, then CPU."""
    if _current is not None:
        return _current.device
    return _choose_device(None)


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy and PyTorch (all devices)."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


# --- helpers ---------------------------------------------------------------------------

def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _set_threads(threads):
    """Choose and set PyTorch's intra-op threads; returns the ``ThreadChoice``."""
    import torch

    if threads is None:
        raw = os.environ.get("GREENLAB_THREADS", "").strip()
        explicit = bool(raw) and raw.lower() != "auto"
    else:
        explicit = True
    if explicit:  # no need to watch the machine
        choice = gl_threads.choose(os.environ, 1, None, requested=threads)
    else:
        cores = gl_threads.usable_cores()
        watch = cores > gl_threads.SMALL_MACHINE_CORES and not gl_threads.passive_waiting(os.environ)
        busy = gl_threads.busy_cores() if watch else None
        choice = gl_threads.choose(os.environ, cores, busy)
    torch.set_num_threads(choice.threads)
    return choice


def _show_interrupts_as_one_line() -> None:
    """In IPython (Jupyter), show ``greenlab.base.interrupts.Interrupted`` as its one line instead of a
    traceback; the cell still ends with an error, so Run All stops there."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return
    def one_line(shell, etype, value, tb, tb_offset=None):
        print(str(value), file=sys.stderr)  # IPython shows nothing else for it

    shell.set_custom_exc((Interrupted,), one_line)


def _energy_sources() -> dict:
    """Component -> source name from ``greenlab.energy.default_sources()``; {} if unavailable."""
    try:
        from greenlab.energy import default_sources  # lazy: setup must not fail when a meter cannot load
        found = default_sources()
    except Exception:  # noqa: BLE001 - setup must not fail because a meter cannot load
        return {}
    if isinstance(found, dict):
        return {str(k): _source_name(v) for k, v in found.items()}
    out = {}
    for item in found or ():
        comp = getattr(item, "component", None) or str(item)
        out[str(comp)] = _source_name(item)
    return out


def _source_name(item) -> str:
    if isinstance(item, str):
        return item
    return str(getattr(item, "name", None) or getattr(item, "source", None) or item)
