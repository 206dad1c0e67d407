"""greenlab: train neural networks with less time, money, energy and carbon.

The public surface the lessons use. Every energy figure carries its source
(``nvml-counter``, ``nvml-power``, ``rapl`` or ``estimate``); see ``greenlab.energy``.
"""

from greenlab.version import __version__

# --- measurement core (energy, hardware, units) ---
from greenlab import units
from greenlab.energy import (
    ComponentEnergy,
    IdlePower,
    Measurement,
    PowerMonitor,
    default_sources,
    measure,
    measure_idle,
)
from greenlab.hardware import doctor

# --- carbon and cost ---
from greenlab import carbon, scaling
from greenlab.carbon import co2e_g, compare_regions, equivalents, format_mass, intensity, regions
from greenlab import report, scheduling  # noqa: E402

# --- harness (setup, data, models, training, experiments) ---
from greenlab import batching, data, ddp, experiments, models, recipes, results, search  # noqa: E402
from greenlab.config import Settings, budget, device, is_quick, setup  # noqa: E402
from greenlab.experiments import Comparison, compare  # noqa: E402
from greenlab.models import count_params, flops  # noqa: E402
from greenlab import memory  # noqa: E402  gl.memory.saved_for_backward: what autograd keeps
from greenlab.train import RunResult, StopTraining, TrainConfig, train  # noqa: E402
from greenlab.train import Interrupted, last_interrupted  # noqa: E402  Ctrl-C: one line, the partial result kept

# --- lesson topics: compression, profiling and monitoring, leaderboard ---
from greenlab import active, compress, prefetch, profiling, stopping  # noqa: E402
from greenlab import accumulation, numerics, roofline  # noqa: E402  lessons 00-03: roofline, fp16, accumulation
from greenlab import lm, lm_compile, lm_serve, lora, sharding  # noqa: E402  gl.lm: a small language model in joules per token
from greenlab import optional, optimizers  # noqa: E402  gl.optimizers: fp32 or 8-bit AdamW states, counted state bytes
from greenlab import sharding_run  # noqa: E402  gl.sharding_run: DDP against FSDP, measured in 2 processes
from greenlab.leaderboard import Leaderboard, LeaderboardError  # noqa: E402

# --- widgets and quizzes ---
from greenlab.widgets.quiz_display import quiz  # noqa: E402  gl.quiz(questions): knowledge checks graded in Python

# --- course machinery (checkers, reference runs) ---
from greenlab import checks as check  # noqa: E402  gl.check.<exercise>(answer)
from greenlab import reference  # noqa: E402  gl.reference.show("experiment")


def load_ipython_extension(ipython) -> None:
    """``%load_ext greenlab``: the ``%%energy`` and ``%energy_meter`` magics (needs IPython,
    which ``import greenlab`` itself does not)."""
    from greenlab.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython) -> None:
    from greenlab.magics import unload_ipython_extension as unload

    unload(ipython)


def __getattr__(name: str):
    """``gl.widgets`` is imported on first use: it needs ipywidgets and matplotlib, which a
    headless machine (a GPU box running benchmarks, a script) may not have or want."""
    if name == "widgets":
        import importlib

        return importlib.import_module("greenlab.widgets")
    raise AttributeError(f"module 'greenlab' has no attribute {name!r}")
