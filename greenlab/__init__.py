"""greenlab: train neural networks with less time, money, energy and carbon.

The public surface the lessons use. Every energy figure carries its source
(``nvml-counter``, ``nvml-power``, ``rapl`` or ``estimate``); see ``greenlab.energy``.

Each ``gl.*`` name is imported on first use (``_PUBLIC`` says from where): ``import greenlab``
itself loads no PyTorch, so a process that needs one module (nbgrader loading the course's
preprocessor, ``python -m greenlab.course``) does not pay for the others, and a lesson pays for
what it uses.
"""

from greenlab.base.version import __version__

# name -> (module, attribute in it; None: the module itself), in the groups the lessons use
_PUBLIC: dict[str, tuple[str, str | None]] = {}


def _names(module: str, names: str) -> None:
    for name in names.split():
        _PUBLIC[name] = (module, name)


def _modules(**modules: str) -> None:
    for name, module in modules.items():
        _PUBLIC[name] = (module, None)


# --- measurement core (energy, hardware, units) ---
_modules(units="greenlab.base.units")
_names("greenlab.energy", "ComponentEnergy IdlePower Measurement PowerMonitor default_sources measure measure_idle")
_names("greenlab.session.hardware", "doctor")

# --- carbon and cost ---
_modules(carbon="greenlab.impact.carbon", scaling="greenlab.impact.scaling")
_names("greenlab.impact.carbon", "co2e_g compare_regions equivalents format_mass intensity regions")
_names("greenlab.base.units", "format_bytes format_energy plain_number")  # '1.5 MiB', '3.6 kJ', '1,080'
_modules(report="greenlab.impact.report", scheduling="greenlab.impact.scheduling")

# --- harness (setup, data, models, training, experiments) ---
_modules(batching="greenlab.techniques.batching", ddp="greenlab.techniques.ddp", search="greenlab.techniques.search",
         data="greenlab.training.data", models="greenlab.training.models", experiments="greenlab.experiments",
         bills="greenlab.course.bills", recipes="greenlab.course.recipes", results="greenlab.base.results")
_names("greenlab.session.config", "Settings budget device is_quick setup")
_names("greenlab.experiments", "Comparison compare")
_names("greenlab.training.models", "count_params flops")
_modules(memory="greenlab.training.memory")  # gl.memory.saved_for_backward: what autograd keeps
_names("greenlab.training.loop", "RunResult StopTraining TrainConfig train")
_names("greenlab.training.loop", "Interrupted last_interrupted")  # Ctrl-C: one line, the partial result kept

# --- lesson topics: compression, profiling and monitoring, leaderboard ---
_modules(active="greenlab.techniques.active", compress="greenlab.techniques.compress",
         prefetch="greenlab.techniques.prefetch", profiling="greenlab.techniques.profiling",
         stopping="greenlab.techniques.stopping")
# lessons 00-02: roofline, fp16, accumulation
_modules(accumulation="greenlab.techniques.accumulation", numerics="greenlab.techniques.numerics",
         roofline="greenlab.techniques.roofline")
# lesson 15: FedAvg against centralised, edge inference; the energy of bytes sent, from a cited kWh/GB figure
_modules(edge="greenlab.techniques.edge", federated="greenlab.techniques.federated", network="greenlab.impact.network")
# lesson 13: operating training; idle capacity and scale to zero
_modules(monitoring="greenlab.techniques.monitoring", preemption="greenlab.techniques.preemption",
         storage="greenlab.techniques.storage", idle="greenlab.impact.idle")
# gl.lm: a small language model in joules per token
_modules(lm="greenlab.techniques.lm", lm_compile="greenlab.techniques.lm.compiling",
         lm_serve="greenlab.techniques.lm.serving", lora="greenlab.techniques.lm.lora",
         sharding="greenlab.techniques.lm.sharding", optional="greenlab.base.optional",
         optimizers="greenlab.training.optimizers",  # gl.optimizers: fp32 or 8-bit AdamW states, counted state bytes
         sharding_run="greenlab.techniques.lm.sharding_run")  # gl.sharding_run: DDP against FSDP, in 2 processes
_names("greenlab.course.leaderboard", "Leaderboard LeaderboardError")
_names("greenlab.course.headline", "headline")  # gl.headline: a lesson's verdict as a record for the results table
_modules(lifecycle="greenlab.techniques.lifecycle")  # lesson 16: the whole bill of a model's life
# lesson 14: scheduling, tuning, asynchronous training
_modules(cluster="greenlab.techniques.cluster", hogwild="greenlab.techniques.hogwild", tuning="greenlab.techniques.tuning")

# --- widgets and quizzes ---
_names("greenlab.widgets.quiz_display", "quiz")  # gl.quiz(questions): knowledge checks graded in Python
# gl.widgets needs ipywidgets and matplotlib, which a headless machine (a GPU box running benchmarks, a
# script) may not have or want
_modules(widgets="greenlab.widgets")

# --- course machinery (checkers, reference runs) ---
_modules(check="greenlab.course.checks",  # gl.check.<exercise>(answer)
         reference="greenlab.course.reference")  # gl.reference.show("experiment")

# --- gl.<module> names the lessons use, from their packages ---
_modules(config="greenlab.session.config", hardware="greenlab.session.hardware")


def load_ipython_extension(ipython) -> None:
    """``%load_ext greenlab``: the ``%%energy`` and ``%energy_meter`` magics (needs IPython,
    which ``import greenlab`` itself does not)."""
    from greenlab.widgets.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython) -> None:
    from greenlab.widgets.magics import unload_ipython_extension as unload

    unload(ipython)


def __getattr__(name: str):
    """``gl.NAME``, imported on first use and then kept as an attribute; a package of greenlab's
    own (``gl.energy``) is imported by its name."""
    import importlib.util  # lazy: only a name not yet used needs it

    if name in _PUBLIC:
        module, attribute = _PUBLIC[name]
        found = importlib.import_module(module)
        value = found if attribute is None else getattr(found, attribute)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module 'greenlab' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
