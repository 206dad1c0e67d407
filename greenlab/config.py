"""Session set-up: seeds, device choice, quick mode and the folders greenlab uses.

``setup()`` is the first call in every lesson. It seeds Python, NumPy and PyTorch,
picks a device (CUDA, then Apple MPS, then CPU; never an assertion), decides quick mode
and prints one line saying what it chose and why.

Quick mode (smaller sizes, still real training) is on when there is no CUDA GPU, because
full sizes are meant for one; ``budget()`` is the one place lessons size their work.

Environment variables:

- ``GREENLAB_QUICK=1`` (or ``true``/``yes``/``on``), or ``CI`` set: quick mode;
  ``GREENLAB_QUICK=0``: full mode even without a GPU (it wins over ``CI``).
- ``GREENLAB_RESULTS_DIR``: where the results log goes.
- ``GREENLAB_DATA_DIR``: the data folder (cited tables; cached datasets in its ``cache`` subfolder).
- ``GREENLAB_CACHE_DIR``: the dataset cache, if it should live elsewhere.
- ``GREENLAB_LESSONS_DIR``: where ``greenlab lab`` looks for lessons.
- ``GREENLAB_THREADS=N``: PyTorch's CPU threads; unset or ``auto``, ``setup()`` chooses them
  for this machine and says why (``greenlab.threads``).
- ``GREENLAB_PROGRESS=0``: no progress bars or progress lines (``greenlab.progress``).
- ``GREENLAB_DOWNLOAD``: 1 requires dataset downloads, 0 forbids them; unset, datasets are
  downloaded outside quick mode and CI (``greenlab.datacache.policy``).
"""

from __future__ import annotations

import os
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


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
    ``GREENLAB_THREADS``, else chooses for this machine (``greenlab.threads.choose``: the cores
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
    else:
        quick, reason = bool(quick), "set by setup(quick=...)"
    from greenlab.hardware import native_precisions

    _current = Settings(device=chosen, quick=quick, seed=seed, sources=_energy_sources(),
                        device_name=_device_name(chosen), quick_reason=reason,
                        native_precisions=native_precisions(chosen), threads=_torch_threads(),
                        threads_reason=thread_choice.reason)
    if verbose:
        print(_current.line())
    return _current


def settings() -> Settings | None:
    """The ``Settings`` from the last ``setup()`` call, or None before it."""
    return _current


def budget(full=None, quick=None, *, gpu=None, emulated=None, precision=None):
    """Pick a size for this machine: the single place a lesson sizes its work.

    - ``emulated`` when ``precision`` ("bf16"/"fp16") is emulated on the chosen device, where
      it runs many times slower than fp32 (e.g. bf16 on a CPU without bf16 units), in any mode;
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
    for name, value in (("full", full), ("quick", quick), ("gpu", gpu), ("emulated", emulated)):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not value > 0:
            raise ValueError(f"budget({name}=...) must be positive, got {value!r}")
    if precision is not None:
        from greenlab.hardware import precision_support

        if not precision_support(precision, device()).native:
            return emulated
    if is_quick():
        return quick
    if gpu is not None and device() != "cpu":
        return gpu
    return full


def is_quick() -> bool:
    """True in quick mode (set by ``setup()``; before it, decided as ``setup()`` would)."""
    if _current is not None:
        return _current.quick
    return quick_decision(os.environ, _choose_device(None))[0]


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


def repo_root() -> Path:
    """The folder that holds the ``greenlab`` package (a checkout's root)."""
    return Path(__file__).resolve().parent.parent


def in_checkout() -> bool:
    """True when greenlab runs from a source checkout (not an installed wheel)."""
    root = repo_root()
    return (root / "pyproject.toml").is_file() and (root / "greenlab").is_dir()


def results_dir() -> Path:
    """Where the results log lives: ``GREENLAB_RESULTS_DIR``, else ``<repo>/results`` in a
    checkout (git-ignored), else ``~/.greenlab/results``. Not created here."""
    env = os.environ.get("GREENLAB_RESULTS_DIR")
    if env:
        return Path(env).expanduser()
    if in_checkout():
        return repo_root() / "results"
    return Path.home() / ".greenlab" / "results"


def data_dir() -> Path:
    """The data folder: ``GREENLAB_DATA_DIR``, else ``<repo>/data`` (package-relative)."""
    env = os.environ.get("GREENLAB_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return repo_root() / "data"


def cache_dir() -> Path:
    """Dataset download cache: ``GREENLAB_CACHE_DIR``, else ``<data_dir>/cache`` (git-ignored).
    Not created here."""
    env = os.environ.get("GREENLAB_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return data_dir() / "cache"


def lessons_dir() -> Path:
    """The lessons folder: ``GREENLAB_LESSONS_DIR``, else ``<repo>/lessons``."""
    env = os.environ.get("GREENLAB_LESSONS_DIR")
    if env:
        return Path(env).expanduser()
    return repo_root() / "lessons"


def learner_copy(dest=None) -> Path:
    """The learner's own copy of the lessons (default ``my-lessons/`` beside ``lessons/``):
    lessons not yet there are copied in, nothing already there is overwritten. Returns the
    folder. ``make lab`` and ``greenlab lab`` open it, so autosave never touches ``lessons/``."""
    import shutil

    source = lessons_dir()
    dest = Path(dest).expanduser() if dest is not None else source.parent / "my-lessons"
    if dest.resolve() == source.resolve():
        raise ValueError(f"dest must not be the shipped lessons folder {source}")
    dest.mkdir(parents=True, exist_ok=True)
    for notebook in sorted(source.glob("*.ipynb")):
        if not (dest / notebook.name).exists():
            shutil.copy2(notebook, dest / notebook.name)
    return dest


# --- helpers ---------------------------------------------------------------------------

def quick_decision(environ, device: str) -> tuple[bool, str]:
    """(quick, reason) from the environment and the device: ``GREENLAB_QUICK`` (1 or 0) first,
    then ``CI``, then quick mode whenever ``device`` is not a CUDA GPU."""
    raw = environ.get("GREENLAB_QUICK")
    if raw is not None and raw.strip():
        value = raw.strip().lower()
        if value in _TRUE:
            return True, f"GREENLAB_QUICK={raw}"
        if value in _FALSE:
            return False, f"GREENLAB_QUICK={raw}"
        raise ValueError(f"GREENLAB_QUICK must be 1/true or 0/false, got {raw!r}")
    if environ.get("CI", "").strip().lower() not in _FALSE:
        return True, "CI is set"
    if not device.startswith("cuda"):
        what = "Apple GPU (MPS)" if device == "mps" else "no GPU"
        return True, f"{what}: full sizes are meant for a CUDA GPU; GREENLAB_QUICK=0 forces them"
    return False, "CUDA GPU"


def _choose_device(requested: str | None) -> str:
    import torch

    if requested is None:
        if torch.cuda.is_available():
            return "cuda"
        if _mps_available():
            return "mps"
        return "cpu"
    if not isinstance(requested, str):
        raise ValueError(f"device must be 'cuda', 'cuda:N', 'mps' or 'cpu', got {requested!r}")
    name = requested.strip().lower()
    if name == "cpu":
        return "cpu"
    if name == "mps":
        if not _mps_available():
            raise ValueError("device 'mps' was asked for but no Apple GPU (MPS) is available here; "
                             "use device='cpu' or leave device=None to pick automatically")
        return "mps"
    if name == "cuda" or name.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ValueError(f"device {requested!r} was asked for but no CUDA GPU is available here; "
                             "use device='cpu' or leave device=None to pick automatically")
        if name.startswith("cuda:"):
            index = name.split(":", 1)[1]
            if not index.isdigit() or int(index) >= torch.cuda.device_count():
                raise ValueError(f"device {requested!r}: this machine has "
                                 f"{torch.cuda.device_count()} CUDA device(s), cuda:0..")
        return name
    raise ValueError(f"device must be 'cuda', 'cuda:N', 'mps' or 'cpu', got {requested!r}")


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _set_threads(threads):
    """Choose and set PyTorch's intra-op threads; returns the ``ThreadChoice``."""
    import torch

    from greenlab import threads as gl_threads

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
    """In IPython (Jupyter), show ``greenlab.train.Interrupted`` as its one line instead of a
    traceback; the cell still ends with an error, so Run All stops there."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return
    from greenlab.train import Interrupted

    def one_line(shell, etype, value, tb, tb_offset=None):
        print(str(value), file=sys.stderr)  # IPython shows nothing else for it

    shell.set_custom_exc((Interrupted,), one_line)


def _mps_available() -> bool:
    import torch

    try:
        return bool(torch.backends.mps.is_available())
    except (AttributeError, RuntimeError):  # builds without the MPS backend
        return False


def _device_name(dev: str) -> str:
    import torch

    if dev.startswith("cuda"):
        try:
            return torch.cuda.get_device_name(torch.device(dev))
        except Exception:  # noqa: BLE001 - the name is cosmetic
            return ""
    if dev == "mps":
        return "Apple GPU"
    return ""


def _energy_sources() -> dict:
    """Component -> source name from ``greenlab.energy.default_sources()``; {} if unavailable."""
    try:
        from greenlab.energy import default_sources
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
