"""greenlab: train neural networks with less time, money, energy and carbon.

The public surface the lessons use. Every energy figure carries its source
(``nvml-counter``, ``nvml-power``, ``rapl`` or ``estimate``); see ``greenlab.energy``.
"""

from greenlab.base.version import __version__

# --- measurement core (energy, hardware, units) ---
from greenlab.base import units
from greenlab.energy import (
    ComponentEnergy,
    IdlePower,
    Measurement,
    PowerMonitor,
    default_sources,
    measure,
    measure_idle,
)
from greenlab.session.hardware import doctor

# --- carbon and cost ---
from greenlab.impact import carbon, scaling
from greenlab.impact.carbon import (
    co2e_g,
    compare_regions,
    equivalents,
    format_mass,
    intensity,
    regions,
)
from greenlab.base.units import format_bytes, format_energy, plain_number  # '1.5 MiB', '3.6 kJ', '1,080'
from greenlab.impact import report, scheduling  # noqa: E402

# --- harness (setup, data, models, training, experiments) ---
from greenlab.techniques import batching, ddp, search
from greenlab.training import data, models
from greenlab import experiments
from greenlab.course import bills, recipes
from greenlab.base import results  # noqa: E402
from greenlab.session.config import Settings, budget, device, is_quick, setup  # noqa: E402
from greenlab.experiments import Comparison, compare  # noqa: E402
from greenlab.training.models import count_params, flops  # noqa: E402
from greenlab.training import memory  # noqa: E402  gl.memory.saved_for_backward: what autograd keeps
from greenlab.training.loop import RunResult, StopTraining, TrainConfig, train  # noqa: E402
# Ctrl-C: one line, the partial result kept
from greenlab.training.loop import Interrupted, last_interrupted  # noqa: E402

# --- lesson topics: compression, profiling and monitoring, leaderboard ---
from greenlab.techniques import active, compress, prefetch, profiling, stopping  # noqa: E402
# lessons 00-02: roofline, fp16, accumulation
from greenlab.techniques import accumulation, numerics, roofline  # noqa: E402
from greenlab.techniques import edge, federated  # noqa: E402  lesson 15: FedAvg against centralised, edge inference
from greenlab.impact import network  # noqa: E402  lesson 15: the energy of bytes sent, from a cited kWh/GB figure
from greenlab.techniques import monitoring, preemption, storage  # noqa: E402  lesson 13: operating training
from greenlab.impact import idle  # noqa: E402  lesson 13: idle capacity and scale to zero
from greenlab.techniques import lm  # noqa: E402  gl.lm: a small language model in joules per token
from greenlab.techniques.lm import (
    compiling as lm_compile,
    serving as lm_serve,
    lora,
    sharding,
)  # noqa: E402
from greenlab.base import optional
from greenlab.training import optimizers  # noqa: E402  gl.optimizers: fp32 or 8-bit AdamW states, counted state bytes
# gl.sharding_run: DDP against FSDP, measured in 2 processes
from greenlab.techniques.lm import sharding_run  # noqa: E402
from greenlab.course.leaderboard import Leaderboard, LeaderboardError  # noqa: E402
from greenlab.course.headline import headline  # noqa: E402  gl.headline: a lesson's verdict as a record for the results table
# lesson 14: scheduling, tuning, asynchronous training
from greenlab.techniques import cluster, hogwild, tuning  # noqa: E402

# --- widgets and quizzes ---
from greenlab.widgets.quiz_display import quiz  # noqa: E402  gl.quiz(questions): knowledge checks graded in Python

# --- course machinery (checkers, reference runs) ---
from greenlab.course import checks as check  # noqa: E402  gl.check.<exercise>(answer)
from greenlab.course import reference  # noqa: E402  gl.reference.show("experiment")


# --- gl.<module> names the lessons use, from their packages ---
from greenlab.session import config  # noqa: E402
from greenlab.session import hardware  # noqa: E402


def load_ipython_extension(ipython) -> None:
    """``%load_ext greenlab``: the ``%%energy`` and ``%energy_meter`` magics (needs IPython,
    which ``import greenlab`` itself does not)."""
    from greenlab.widgets.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython) -> None:
    from greenlab.widgets.magics import unload_ipython_extension as unload

    unload(ipython)


def __getattr__(name: str):
    """``gl.widgets`` is imported on first use: it needs ipywidgets and matplotlib, which a
    headless machine (a GPU box running benchmarks, a script) may not have or want."""
    if name == "widgets":
        import importlib

        return importlib.import_module("greenlab.widgets")
    raise AttributeError(f"module 'greenlab' has no attribute {name!r}")
