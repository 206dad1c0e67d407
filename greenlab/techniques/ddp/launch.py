"""The launch of a data-parallel run (lessons 08 (08_scaling_out) and 02 (02_gradient_accumulation)):
``run_ddp(nprocs, ...)`` writes a JSON config, starts::

    python -m torch.distributed.run --standalone --nproc_per_node=N -m greenlab.techniques.ddp.worker --config FILE

as a subprocess and waits for it; ``run_ddp_series`` trains several configurations in one launch. The parent
loads the dataset once and saves its tensors to the run's temporary folder, wraps the whole launch (start-up
included) in ``greenlab.measure``, and collects rank 0's result or the workers' errors (``DDPError``). A timeout
or Ctrl-C kills the whole process tree.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from greenlab.base import limits, paths, processes, progress
from greenlab.base.interrupts import Interrupted
from greenlab.base.processes import PARENT_ENV, kill_group
from greenlab.base.units import plain_number
from greenlab.energy import measure
from greenlab.base.janitor import Janitor
from greenlab.techniques.ddp.results import DDPResult
from greenlab.training import data as gl_data
from greenlab.training.dataset_files import save_dataset

BACKENDS = ("gloo", "nccl")
DEVICES = ("cpu", "cuda")
STDERR_TAIL_LINES = 40


class DDPError(RuntimeError):
    """A torchrun launch failed or timed out; the message holds the workers' errors and the
    tail of their stderr."""


def run_ddp(nprocs: int, data="synthetic", model="cnn", per_worker_batch: int | None = None,
            global_batch: int | None = None, epochs: int = 1, max_steps: int | None = None,
            lr: float = 0.05, momentum: float = 0.9, accum_steps: int = 1, backend: str | None = None,
            device: str | None = None, threads_per_worker: int = 1, seed: int = 0,
            timeout_s: float = 300.0, measure_energy: bool = True, label: str = "") -> DDPResult:
    """Train with ``nprocs`` data-parallel worker processes via torchrun; return a ``DDPResult``.

    ``data``: a ``greenlab.training.data.Dataset`` (loaded once, reused across runs), a dataset name for
    ``greenlab.training.data.load`` or a dict of its arguments, e.g.
    ``{"name": "fashion-mnist", "n_train": 2000, "n_test": 500}``.
    ``model``: a family name for ``greenlab.training.models.build`` or a dict ``{"name": "cnn", **options}``.
    Give exactly one of ``per_worker_batch`` (global batch = per_worker_batch x nprocs x
    accum_steps, it grows with workers) or ``global_batch`` (must divide by nprocs x accum_steps;
    each worker's batch shrinks as workers are added).
    ``max_steps``: stop after this many optimizer steps (None: run all ``epochs``).
    ``backend``: None picks "nccl" on CUDA and "gloo" on CPU. ``device``: None picks "cuda" when
    there is one GPU per worker, else "cpu" (see ``pick_device``).
    ``threads_per_worker``: CPU threads per worker (OMP_NUM_THREADS and torch.set_num_threads).
    ``timeout_s``: the launch is killed after this long and ``DDPError`` is raised.
    Raises ``ValueError`` for bad arguments and ``DDPError`` when a worker fails.
    """
    config = make_config(nprocs, data=_spec_of(data), model=model, per_worker_batch=per_worker_batch,
                         global_batch=global_batch, epochs=epochs, max_steps=max_steps, lr=lr,
                         momentum=momentum, accum_steps=accum_steps, backend=backend, device=device,
                         threads_per_worker=threads_per_worker, seed=seed)
    config["label"] = label
    return _launch(nprocs, [config], data, timeout_s, measure_energy, label or f"ddp x{nprocs}")[0]


RUN_KEYS = ("label", "workers", "per_worker_batch", "global_batch", "accum_steps", "epochs", "max_steps", "lr",
            "momentum", "seed", "n_train")


def run_ddp_series(nprocs: int, runs, data="synthetic", model="cnn", epochs: int = 1,
                   max_steps: int | None = None, lr: float = 0.05, momentum: float = 0.9,
                   backend: str | None = None, device: str | None = None, threads_per_worker: int = 1,
                   seed: int = 0, timeout_s: float = 300.0, measure_energy: bool = True) -> list:
    """Several data-parallel runs in ONE torchrun launch of ``nprocs`` workers, one after another;
    a list of ``DDPResult`` in the order of ``runs``.

    ``runs``: a list of dicts, one per run, each with exactly one of ``per_worker_batch`` or
    ``global_batch`` and optionally ``label``, ``workers`` (1 to ``nprocs``, default ``nprocs``:
    a run on fewer workers trains on the first ranks, over a process group of its own, while the
    others wait at a barrier, so a 1-worker baseline needs no launch of its own), ``accum_steps``,
    ``n_train`` (train on the first
    ``n_train`` samples of the training split: a training set that grows with the workers is weak
    scaling), and its own ``epochs``, ``max_steps``, ``lr``, ``momentum`` or ``seed`` (the other
    arguments' values otherwise). Every run builds its model from its own seed, so a run gives
    the same updates as it would in a launch of its own. The launch's wall time and whole-launch
    energy are shared: every result carries them with ``launch_runs = len(runs)``.
    Raises ``ValueError`` for bad arguments (naming the run) and ``DDPError`` when a worker fails.
    """
    if not isinstance(runs, (list, tuple)) or not runs:
        raise ValueError("runs must be a non-empty list of dicts, e.g. [{'per_worker_batch': 256}]")
    shared = dict(epochs=epochs, max_steps=max_steps, lr=lr, momentum=momentum, seed=seed)
    configs = []
    for i, run in enumerate(runs):
        if not isinstance(run, dict):
            raise ValueError(f"runs[{i}] must be a dict of run arguments, got {type(run).__name__}")
        unknown = sorted(set(run) - set(RUN_KEYS))
        if unknown:
            raise ValueError(f"runs[{i}] has unknown keys {unknown}; a run takes {', '.join(RUN_KEYS)}")
        args = {**shared, **{k: v for k, v in run.items() if k not in ("label", "n_train", "workers")}}
        workers = run.get("workers", nprocs)
        if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= nprocs:
            raise ValueError(f"runs[{i}] workers must be an integer from 1 to nprocs={nprocs}, got {workers!r}")
        try:
            config = make_config(workers, data=_spec_of(data), model=model, backend=backend,
                                 device=device, threads_per_worker=threads_per_worker, **args)
        except ValueError as exc:
            raise ValueError(f"runs[{i}]: {exc}") from None
        n_train = run.get("n_train")
        config["n_train"] = None if n_train is None else _positive_int(f"runs[{i}] n_train", n_train)
        config["label"] = str(run.get("label", ""))
        configs.append(config)
    return _launch(nprocs, configs, data, timeout_s, measure_energy, f"ddp x{nprocs} series")


def _spec_of(data):
    return data if isinstance(data, (str, dict)) else {"name": getattr(data, "name", "dataset")}


def _launch(nprocs: int, configs: list, data, timeout_s, measure_energy: bool, window_label: str) -> list:
    """One torchrun launch that trains every config of ``configs`` in turn; their DDPResults."""
    timeout_s = _positive_number("timeout_s", timeout_s)
    dataset = _dataset(data)
    for i, config in enumerate(configs):
        n_train = config.get("n_train")
        if n_train is not None and n_train > dataset.n_train:
            raise ValueError(f"runs[{i}] n_train={n_train} is more than the dataset's {dataset.n_train} "
                             "training samples; load more")

    # the run's folder (a copy of the dataset) goes however this process ends: registered with the
    # janitor before it exists, so that a kill before torchrun's supervisor starts leaves it neither
    with Janitor() as janitor:
        folder = Path(janitor.make_temp_dir("greenlab-ddp-"))
        launch = dict(configs[0])
        launch["nprocs"] = nprocs
        launch["runs"] = configs
        launch["result_path"] = str(folder / "result.json")
        launch["error_dir"] = str(folder)
        launch["measure_energy"] = bool(measure_energy)
        launch["data"] = save_dataset(dataset, folder / "data.pt")
        config_path = folder / "config.json"
        config_path.write_text(json.dumps(launch, indent=1), encoding="utf-8")
        command = launch_command(config_path, nprocs)
        window = None
        if measure_energy:
            window = measure(window_label).start()
        started = time.perf_counter()
        try:
            what = f"{len(configs)} runs" if len(configs) > 1 else "1 run"
            returncode, stderr = run_launch(command, worker_env(launch["threads_per_worker"]), timeout_s,
                                            label=f"greenlab: torchrun launch ({nprocs} workers, {what})")
        except KeyboardInterrupt:  # the workers are already stopped (run_launch): one line, as gl.train's
            raise _interrupted_launch(nprocs, len(configs), time.perf_counter() - started) from None
        finally:
            wall = time.perf_counter() - started
            energy = window.stop() if window is not None else None
        raw = collect_result(folder, Path(launch["result_path"]), nprocs, returncode, stderr, timeout_s)
    notes = list(raw.get("notes", []))
    out = []
    for run in raw["runs"]:
        run = dict(run)
        label = run.pop("label", "")
        if len(configs) > 1:
            run["notes"] = list(run.get("notes", [])) + [
                f"one of {len(configs)} runs in one torchrun launch: wall time and whole-launch energy "
                "are the launch's"]
        run["notes"] = list(run.get("notes", [])) + notes
        out.append(DDPResult(**run, wall_seconds=wall, energy=energy, label=label,
                             launch_runs=len(configs)))
    return out


def make_config(nprocs: int, data="synthetic", model="cnn", per_worker_batch: int | None = None,
                global_batch: int | None = None, epochs: int = 1, max_steps: int | None = None,
                lr: float = 0.05, momentum: float = 0.9, accum_steps: int = 1,
                backend: str | None = None, device: str | None = None, threads_per_worker: int = 1,
                seed: int = 0) -> dict:
    """The worker config ``run_ddp`` writes as JSON (validated; see ``run_ddp`` for the arguments)."""
    nprocs = limits.processes("nprocs", nprocs)
    accum_steps = limits.steps("accum_steps", accum_steps, what="micro-batches per optimizer step")
    if (per_worker_batch is None) == (global_batch is None):
        raise ValueError("give exactly one of per_worker_batch (global batch grows with workers) "
                         "or global_batch (split across workers)")
    if per_worker_batch is not None:
        per_worker = limits.held("per_worker_batch", per_worker_batch, what="samples in one batch")
    else:
        total = limits.held("global_batch", global_batch, what="samples in one step, across workers")
        if total % (nprocs * accum_steps):
            raise ValueError(f"global_batch {total} must divide by nprocs x accum_steps = "
                             f"{nprocs * accum_steps}")
        per_worker = total // (nprocs * accum_steps)
    device = pick_device(nprocs) if device is None else device
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES} or None, got {device!r}")
    if device == "cuda":
        _check_gpus(nprocs)
    if backend is None:
        backend = "nccl" if device == "cuda" else "gloo"
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS} or None, got {backend!r}")
    if backend == "nccl" and device != "cuda":
        raise ValueError("backend 'nccl' needs device='cuda'; use 'gloo' on the CPU")
    if max_steps is not None:
        max_steps = limits.steps("max_steps", max_steps, what="optimizer steps")
    return {
        "nprocs": nprocs,
        "data": _as_spec(data, "data"),
        "model": _as_spec(model, "model"),
        "per_worker_batch": per_worker,
        "global_batch": per_worker * nprocs * accum_steps,
        "accum_steps": accum_steps,
        "epochs": _positive_int("epochs", epochs),
        "max_steps": max_steps,
        "lr": _positive_number("lr", lr),
        "momentum": _non_negative_number("momentum", momentum),
        "backend": backend,
        "device": device,
        "threads_per_worker": _positive_int("threads_per_worker", threads_per_worker),
        "seed": _non_negative_int("seed", seed),
    }


def launch_command(config_path, nprocs: int, module: str = "greenlab.techniques.ddp.worker") -> list:
    """The torchrun command line ``run_ddp`` starts (a list for ``subprocess``); ``module`` is the
    worker's module, run with ``python -m`` in every process. torchrun runs inside
    ``greenlab/base/processes.py`` run as a script (see ``greenlab.base.processes.supervise_main``; as a
    script it imports only the standard library, so it starts at once): it dies with the process
    that launched it and then removes the run's folder (the config's), which holds the dataset
    copy; each worker dies with torchrun (``run_worker``)."""
    folder = str(Path(config_path).parent)

    supervisor = str(Path(processes.__file__).resolve())
    return [sys.executable, supervisor, "--remove", folder, "--",
            "torch.distributed.run", "--standalone",
            f"--nproc_per_node={_positive_int('nprocs', nprocs)}", "--max-restarts=0",
            # torchrun's log folder (else a torchelastic_* folder in TMPDIR, left when torchrun is killed)
            f"--log-dir={os.path.join(folder, 'torchelastic')}",
            "-m", module, "--config", str(config_path)]


def collect_result(folder: Path, result_file: Path, nprocs: int, returncode, stderr: str,
                   timeout_s: float) -> dict:
    """The result rank 0 wrote to ``result_file`` after a torchrun launch (``returncode`` None
    when it was killed at ``timeout_s``). Each worker writes ``error.rank<N>.txt`` in ``folder``
    when it fails and touches ``finished-<N>`` there once it is past its last collective: a
    launch whose workers all finished keeps its result even when one then died in shutdown
    (gloo can abort there), with a note saying so. Otherwise ``DDPError`` with the workers'
    errors and the tail of their stderr."""
    errors = _worker_errors(folder)
    finished = all((folder / f"finished-{r}").exists() for r in range(nprocs))
    if not result_file.is_file() or (returncode != 0 and not finished):
        raise DDPError(_failure_message(nprocs, returncode, timeout_s, errors, stderr))
    raw = json.loads(result_file.read_text(encoding="utf-8"))
    if returncode != 0:  # a worker died in shutdown, after every rank had finished its work
        raw["notes"] = list(raw.get("notes", [])) + [
            f"torchrun exited with code {returncode}: a worker failed while shutting down, "
            "after every worker had finished its work and the result was written "
            f"({_last_line(stderr)})"]
    return raw


def pick_device(nprocs: int) -> str:
    """"cuda" when this machine has at least one GPU per worker, else "cpu"."""
    import torch

    return "cuda" if torch.cuda.is_available() and torch.cuda.device_count() >= nprocs else "cpu"


def parse_worker_counts(text) -> list:
    """``"1,2,4"`` -> [1, 2, 4] (for ``greenlab run --workers``); ValueError names the problem."""
    counts = []
    for part in str(text).split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            raise ValueError(f"--workers takes worker counts >= 1 separated by commas, e.g. 1,2; "
                             f"got {text!r}")
        counts.append(limits.processes("--workers", int(part)))
    if len(set(counts)) != len(counts):
        raise ValueError(f"--workers lists a count twice: {text}")
    return counts


def _interrupted_launch(nprocs: int, runs: int, seconds: float):
    """The one-line ``Interrupted`` for a Ctrl-C during a torchrun launch (no partial result: the
    workers report only when every run of the launch is done)."""
    what = f"{runs} runs" if runs > 1 else "the run"
    return Interrupted(f"greenlab.ddp: interrupted a {nprocs}-worker torchrun launch ({what}) after "
                       f"{plain_number(seconds)} s; its workers are stopped and nothing was recorded", None)


def run_launch(command: list, env: dict, timeout_s: float, label: str = "greenlab: torchrun launch") -> tuple:
    """Run ``command`` in its own process group; kill the whole group on timeout or on any
    exception here (Ctrl-C, SIGTERM turned into SystemExit). Returns (returncode or None on
    timeout, stderr text). The command learns this process's pid (it dies with it). While it
    runs, ``label ... N s`` is printed every few seconds (``greenlab.base.progress.heartbeat``)."""
    env = {**env, PARENT_ENV: str(os.getpid())}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        with progress.heartbeat(label):
            out, err = proc.communicate(timeout=timeout_s)
        return proc.returncode, (err or "") + (out or "")
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        return None, (err or "") + (out or "")
    except BaseException:  # KeyboardInterrupt in a notebook: leave no workers behind
        kill_group(proc)
        proc.communicate()
        raise


def worker_env(threads: int) -> dict:
    """The environment of a launch's worker processes: this one's, with ``threads`` CPU threads each
    (OpenMP and MKL), this greenlab first on ``PYTHONPATH`` and unbuffered output."""
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    env["MKL_NUM_THREADS"] = str(threads)

    package_parent = str(paths.package_folder().parent)
    parts = [package_parent] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # runpy warns when greenlab/__init__ already imported greenlab.techniques.ddp.worker; harmless here
    env["PYTHONWARNINGS"] = ",".join(filter(None, [env.get("PYTHONWARNINGS"), "ignore::RuntimeWarning:runpy"]))
    return env


def _worker_errors(folder: Path) -> list:
    return [f"rank {p.name.split('rank')[1].split('.')[0]}: {p.read_text(encoding='utf-8').strip()}"
            for p in sorted(folder.glob("error.rank*.txt"))]


def _last_line(stderr: str) -> str:
    """The first line of the workers' stderr that says why a process ended, or 'no message'."""
    for line in (stderr or "").splitlines():
        if "terminate called" in line or "exitcode" in line:
            return line.strip()[:200]
    return "no message"


def _failure_message(nprocs: int, returncode, timeout_s: float, errors: list, stderr: str) -> str:
    if returncode is None:
        head = f"the {nprocs}-worker torchrun launch was killed after its timeout of {timeout_s:g} s"
    else:
        head = f"the {nprocs}-worker torchrun launch failed (exit code {returncode})"
    lines = [head + "."]
    if errors:
        lines.append("worker errors:")
        lines += [f"  {e}" for e in errors]
    tail = (stderr or "").strip().splitlines()[-STDERR_TAIL_LINES:]
    lines.append(f"last {len(tail)} lines of the workers' stderr:")
    lines += [f"  | {line}" for line in tail] or ["  | (empty)"]
    return "\n".join(lines)


def _check_gpus(nprocs: int) -> None:
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count < nprocs:
        raise ValueError(f"device='cuda' needs one GPU per worker: {nprocs} workers but {count} GPU(s) "
                         "here; use device='cpu' (or None to choose automatically)")


def _dataset(data):
    """A ``greenlab.training.data.Dataset`` from a Dataset, a name, or a dict of ``load`` arguments."""
    if isinstance(data, gl_data.Dataset):
        return data
    spec = _as_spec(data, "data")
    name = spec.pop("name")
    return gl_data.load(name, verbose=False, **spec)


def _as_spec(value, what: str) -> dict:
    if isinstance(value, str) and value.strip():
        return {"name": value.strip()}
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        return json.loads(json.dumps(value))  # a JSON-safe copy (tuples become lists)
    example = ('"synthetic" or {"name": "fashion-mnist", "n_train": 2000}' if what == "data"
               else '"cnn" or {"name": "cnn", "width": 8, "norm": "none"}')
    raise ValueError(f"{what} must be a name or a dict with a 'name' key, e.g. {example}; got {value!r}")


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def _non_negative_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    return value


def _positive_number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _non_negative_number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)
