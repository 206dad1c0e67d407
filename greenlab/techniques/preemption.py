"""Pre-emptible training, measured (lesson 13): a training process killed at random times and
resumed from its last checkpoint, and the checkpoint interval that minimises the expected cost.

- ``Launcher`` / ``run_preemptible``: trains ``gl.train`` in a separate process that is killed (SIGKILL, no
  warning) after each of the given lifetimes and restarted from its last checkpoint until the job
  is done; returns what each process life cost (steps kept and lost, start-up, checkpoint writes)
  and the job's wall time and energy, measured in this process (its children included).
- ``lifetimes``: seeded exponential process lifetimes (pre-emptions as a Poisson process).
- ``young_interval`` / ``daly_interval``: the optimum compute time between checkpoints,
  Young (1974) and Daly's higher-order form (2006), from the checkpoint cost and the mean time
  between pre-emptions.
- ``expected_wall_seconds``: the first-order expected wall time of a job with checkpoints and
  pre-emptions; ``spot_vs_on_demand``: that arithmetic turned into money and energy.
- ``checkpoint_write_cost``: seconds and joules of writing one checkpoint, measured.

Lives are forked by a ``Launcher`` process that has imported torch and greenlab once: a restart
pays for a new process, rebuilding the model and reading the checkpoint, but not for the Python
interpreter's start, which the launcher's own start (``Launcher.cold_start_s``) measures once.
"""

from __future__ import annotations

import math
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from greenlab.base import limits, progress, validation
from greenlab.base.janitor import Janitor, end_by_closing_stdin
from greenlab.base.units import plain_number
from greenlab.energy import measure
from greenlab.session import config as gl_config
from greenlab.training import loop
from greenlab.training.checkpoint import load_checkpoint, save_checkpoint
from greenlab.training.loop import TrainConfig
from greenlab.training.models import build



# --- the optimum interval --------------------------------------------------------------------

def young_interval(checkpoint_s: float, mtbf_s: float) -> float:
    """Young (1974): compute seconds between checkpoints that minimise the expected lost time,
    ``sqrt(2 * checkpoint_s * mtbf_s)`` (checkpoint cost and mean time between failures in s)."""
    _positive("checkpoint_s", checkpoint_s)
    _positive("mtbf_s", mtbf_s)
    return math.sqrt(2.0 * checkpoint_s * mtbf_s)


def daly_interval(checkpoint_s: float, mtbf_s: float) -> float:
    """Daly (2006), the higher-order estimate: for ``checkpoint_s < 2 * mtbf_s``,
    ``sqrt(2 d M) * (1 + sqrt(d / (2 M)) / 3 + d / (18 M)) - d``; otherwise ``mtbf_s``."""
    _positive("checkpoint_s", checkpoint_s)
    _positive("mtbf_s", mtbf_s)
    d, m = float(checkpoint_s), float(mtbf_s)
    if d >= 2.0 * m:
        return m
    x = d / (2.0 * m)
    return math.sqrt(2.0 * d * m) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - d


def expected_wall_seconds(work_s: float, interval_s: float, checkpoint_s: float, restart_s: float,
                          mtbf_s: float) -> float:
    """First-order expected wall time of ``work_s`` seconds of compute checkpointed every
    ``interval_s`` compute seconds (each write ``checkpoint_s``), pre-empted on average every
    ``mtbf_s`` seconds of wall time, each pre-emption costing ``restart_s`` plus half an interval
    of lost work: ``work (1 + d / tau) / (1 - (R + (tau + d) / 2) / M)``. ``inf`` when pre-emptions
    come faster than the job can make progress."""
    _positive("work_s", work_s, zero=True)
    _positive("interval_s", interval_s)
    _positive("checkpoint_s", checkpoint_s, zero=True)
    _positive("restart_s", restart_s, zero=True)
    _positive("mtbf_s", mtbf_s)
    lost_share = (restart_s + (interval_s + checkpoint_s) / 2.0) / mtbf_s
    if lost_share >= 1.0:
        return math.inf
    return work_s * (1.0 + checkpoint_s / interval_s) / (1.0 - lost_share)


@dataclass(frozen=True)
class SpotComparison:
    """On-demand against spot for one job: hours, money and energy of each (inputs as stated)."""

    on_demand_hours: float
    spot_hours: float
    on_demand_cost: float
    spot_cost: float
    on_demand_kwh: float
    spot_kwh: float
    interval_hours: float
    assumptions: dict

    def summary(self) -> str:
        return (f"on demand: {plain_number(self.on_demand_hours)} h, "
                f"{plain_number(self.on_demand_cost, 4)} money units, "
                f"{plain_number(self.on_demand_kwh)} kWh; spot: {plain_number(self.spot_hours)} h, "
                f"{plain_number(self.spot_cost, 4)} money units, {plain_number(self.spot_kwh)} kWh "
                f"(checkpoint every {plain_number(self.interval_hours * 60)} min of compute)")


def spot_vs_on_demand(work_hours: float, on_demand_price_per_hour: float, spot_price_ratio: float,
                      mtbf_hours: float, checkpoint_s: float, restart_s: float, watts: float) -> SpotComparison:
    """The same job on demand (never pre-empted, no checkpoints needed) and on spot capacity
    (pre-empted every ``mtbf_hours`` on average, checkpointed at Daly's interval): wall hours,
    cost at ``on_demand_price_per_hour`` and ``spot_price_ratio`` x that, and energy at ``watts``
    of average draw for every wall hour (restarts and lost work draw power too)."""
    _positive("work_hours", work_hours)
    _positive("on_demand_price_per_hour", on_demand_price_per_hour, zero=True)
    _positive("spot_price_ratio", spot_price_ratio)
    _positive("mtbf_hours", mtbf_hours)
    _positive("watts", watts, zero=True)
    mtbf_s = mtbf_hours * 3600.0
    tau = daly_interval(checkpoint_s, mtbf_s)
    spot_h = expected_wall_seconds(work_hours * 3600.0, tau, checkpoint_s, restart_s, mtbf_s) / 3600.0
    return SpotComparison(
        on_demand_hours=work_hours, spot_hours=spot_h,
        on_demand_cost=work_hours * on_demand_price_per_hour,
        spot_cost=spot_h * on_demand_price_per_hour * spot_price_ratio,
        on_demand_kwh=work_hours * watts / 1000.0, spot_kwh=spot_h * watts / 1000.0,
        interval_hours=tau / 3600.0,
        assumptions={"spot_price_ratio": spot_price_ratio, "mtbf_hours": mtbf_hours,
                     "checkpoint_s": checkpoint_s, "restart_s": restart_s, "watts": watts})


# --- pre-emptions, for real ------------------------------------------------------------------

def lifetimes(mean_s: float, count: int, seed: int = 0) -> list:
    """``count`` seeded exponential process lifetimes with mean ``mean_s`` seconds (pre-emptions
    arriving as a Poisson process in wall time); the same seed gives the same list."""
    _positive("mean_s", mean_s)
    validation.integer("count", count, low=0, high=1_000_000)
    rng = random.Random(seed)
    return [rng.expovariate(1.0 / mean_s) for _ in range(count)]


@dataclass
class Life:
    """One process life: when it started (s since the job began), how long until its first
    training step ended (``first_step_s``, None when it never got there), the step it resumed at
    and reached, the step of its last checkpoint, and whether it was killed."""

    started_s: float
    seconds: float
    resumed_at: int
    reached: int
    checkpointed: int
    killed: bool
    first_step_s: float | None

    @property
    def lost_steps(self) -> int:
        """Steps done after the last checkpoint, lost to the kill (0 for the life that finished)."""
        return max(0, self.reached - self.checkpointed) if self.killed else 0

    def settle(self, next_resumed_at: int) -> None:
        """Correct a killed life's last checkpoint from where the next life resumed: the file, not
        the last report, says what the kill left. A kill between a checkpoint's rename and its
        report leaves the newer checkpoint unreported; the step it holds was reached."""
        if not self.killed:
            raise ValueError("only a killed life is settled by the next one")
        self.checkpointed = int(next_resumed_at)
        self.reached = max(self.reached, self.checkpointed)


@dataclass
class PreemptibleRun:
    """A job run to the end through pre-emptions: its lives, wall seconds, the energy measured
    over all of them (this process and its children), checkpoint writes and their seconds.
    ``checkpoints`` counts every write; ``unreported_writes`` of them were made by a life killed
    before it could report them (found from where the next life resumed), so their seconds are
    not in ``checkpoint_seconds``."""

    checkpoint_every: int | None
    steps: int
    lives: list
    seconds: float
    measurement: object
    checkpoints: int
    checkpoint_seconds: float
    final_accuracy: float | None = None
    notes: list = field(default_factory=list)
    unreported_writes: int = 0

    @property
    def joules(self) -> float:
        return self.measurement.joules

    @property
    def estimated(self) -> bool:
        return bool(self.measurement.estimated)

    @property
    def preemptions(self) -> int:
        return sum(life.killed for life in self.lives)

    @property
    def lost_steps(self) -> int:
        return sum(life.lost_steps for life in self.lives)

    @property
    def steps_run(self) -> int:
        """Optimizer steps run over all lives (the job's steps plus the lost ones)."""
        return sum(max(0, life.reached - life.resumed_at) for life in self.lives)

    @property
    def seconds_per_checkpoint(self) -> float | None:
        timed = self.checkpoints - self.unreported_writes
        return self.checkpoint_seconds / timed if timed > 0 else None

    def restart_seconds(self, step_s: float) -> list:
        """Start-up of each life after the first that reached a step: start to the end of its
        first step, less one step of ``step_s`` seconds."""
        return [life.first_step_s - step_s for life in self.lives[1:] if life.first_step_s is not None]

    def preemption_costs(self, step_s: float) -> list:
        """(seconds, joules) each pre-emption cost: the steps since its last checkpoint, redone at
        ``step_s`` seconds each, plus the next life's start-up; joules at the run's mean power
        (an estimate whenever the run's energy is one)."""
        watts = self.joules / self.seconds if self.seconds > 0 else 0.0
        killed = [life for life in self.lives if life.killed]
        costs = []
        for life, restart in zip(killed, self.restart_seconds(step_s)):
            lost_s = life.lost_steps * step_s + restart
            costs.append((lost_s, lost_s * watts))
        return costs

    def summary(self) -> str:
        every = "never" if self.checkpoint_every is None else f"every {self.checkpoint_every} steps"
        return (f"checkpoint {every}: {self.preemptions} pre-emption(s), {self.lost_steps} steps lost, "
                f"{self.checkpoints} checkpoint(s) written, {plain_number(self.seconds)} s, "
                f"{plain_number(self.joules)} J"
                f"{' (estimate)' if self.estimated else ''}")


class Launcher:
    """A process that has imported torch and greenlab once and forks one training process per
    life on request, so that a restart pays for a new process, the model and the checkpoint, but
    not for the interpreter's start. ``cold_start_s``: seconds from starting it until it was ready
    (a fresh interpreter importing torch and greenlab: what a restart on a new machine pays first).
    Use as a context manager, or call ``close()``; it dies with this process."""

    def __init__(self, folder, timeout_s: float = 300.0):
        _positive("timeout_s", timeout_s)

        Path(folder).mkdir(parents=True, exist_ok=True)
        self.timeout_s = float(timeout_s)
        self._proc = None
        self._life = None
        # a watcher removes this launcher's folder and kills its processes (the server and the life
        # it forked share one process group) when this process ends, even by SIGKILL
        self._janitor = Janitor()
        try:
            self.folder = Path(self._janitor.make_temp_dir("preemptible-", dir=folder))  # this launcher's own files
            env = {**os.environ, "GREENLAB_PARENT_PID": str(os.getpid())}
            t0 = time.monotonic()
            self._proc = subprocess.Popen([sys.executable, "-m", "greenlab.techniques.preemption_server"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True,
                                          bufsize=1, start_new_session=True)
            self._janitor.watch_group(self._proc.pid)
            self._expect("ready", self.timeout_s)
        except BaseException:
            self.close()
            raise
        self.cold_start_s = time.monotonic() - t0
        self._data_files: dict = {}

    def run(self, model: dict, data, config, checkpoint_every: int | None, kill_after_s) -> "PreemptibleRun":
        """See :func:`run_preemptible`."""
        kills = _check_job(model, config, checkpoint_every, kill_after_s)
        if self._proc.poll() is not None:
            raise RuntimeError("the launcher has ended; start a new one")
        import torch

        job = {"model": dict(model), "data": str(self._data_file(data)), "config": config.to_dict(),
               "every": checkpoint_every, "threads": torch.get_num_threads(),
               "device": str(gl_config.device()),
               "checkpoint": str(self.folder / f"preemptible_every_{checkpoint_every or 'never'}.pt"),
               "progress": str(self.folder / "progress.bin")}
        Path(job["checkpoint"]).unlink(missing_ok=True)
        lives, checkpoints, unreported, write_s, accuracy = [], 0, 0, 0.0, None
        with measure(f"pre-emptible, checkpoint every {checkpoint_every or 'never'}") as window:
            t0 = time.monotonic()
            for life in range(len(kills) + 1):
                last = life == len(kills)
                Path(job["progress"]).unlink(missing_ok=True)  # a life killed before it reports leaves none
                started = time.monotonic()
                self._send({"cmd": "life", **job})
                pid = self._life = int(self._expect("pid", self.timeout_s))
                ended = self._wait_line(self.timeout_s if last else kills[life])
                killed = ended is None
                if killed:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:  # it ended just now
                        pass
                    ended = self._expect("exit", self.timeout_s)
                    self._life = None
                    killed = int(ended) == -signal.SIGKILL
                    if last and killed:
                        raise RuntimeError(f"the job did not finish within {self.timeout_s} s")
                else:
                    ended = self._parse(ended, "exit")
                self._life = None
                kept = lives[-1].checkpointed if lives else 0
                progress = _read_progress(job["progress"], kept)
                if not killed and (int(ended) != 0 or not progress["done"]):
                    log = Path(job["progress"]).with_suffix(".log")
                    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                    raise RuntimeError(f"the training process failed (exit code {ended}):\n{tail}")
                first = progress["first_step_at"]
                lives.append(Life(started_s=started - t0, seconds=time.monotonic() - started,
                                  resumed_at=int(progress["resumed_at"]), reached=int(progress["reached"]),
                                  checkpointed=int(progress["checkpointed"]) if killed else int(progress["reached"]),
                                  killed=killed, first_step_s=(first - started) if first > 0 else None))
                if len(lives) > 1 and lives[-2].killed:
                    reported = lives[-2].checkpointed
                    lives[-2].settle(lives[-1].resumed_at)
                    # a write the kill kept from its report still happened (its seconds are unknown)
                    unreported += max(0, lives[-2].checkpointed - reported) // (checkpoint_every or 1)
                checkpoints += int(progress["writes"])
                write_s += progress["write_seconds"]
                if not killed:
                    accuracy = progress["accuracy"] if progress["accuracy"] >= 0 else None
                    break
            seconds = time.monotonic() - t0
        Path(job["checkpoint"]).unlink(missing_ok=True)
        return PreemptibleRun(checkpoint_every=checkpoint_every, steps=config.max_steps, lives=lives,
                              seconds=seconds, measurement=window.result, checkpoints=checkpoints + unreported,
                              checkpoint_seconds=write_s, final_accuracy=accuracy, unreported_writes=unreported)

    def close(self) -> None:
        """End the launcher process (and any training process it still runs) and remove its folder."""
        if self._life is not None:  # a life still training (an interrupted run): it goes first
            try:
                os.kill(self._life, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self._life = None
        if self._proc is not None and self._proc.poll() is None:
            end_by_closing_stdin(self._proc)
        self._janitor.close()  # the process group and the folder

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- protocol: one JSON object per line ---
    def _data_file(self, data) -> Path:
        key = id(data)
        if key not in self._data_files:
            import dataclasses

            import torch

            path = self.folder / f"data_{len(self._data_files)}.pt"
            fields = {f.name: getattr(data, f.name) for f in dataclasses.fields(data)}
            # on the host: the launcher must not touch CUDA before it forks (a forked child cannot use it then)
            torch.save({k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in fields.items()}, path)
            self._data_files[key] = path
        return self._data_files[key]

    def _send(self, message: dict) -> None:
        self._proc.stdin.write(json.dumps(message) + "\n")
        self._proc.stdin.flush()

    def _wait_line(self, timeout_s: float) -> str | None:
        import select

        ready, _, _ = select.select([self._proc.stdout], [], [], max(0.0, timeout_s))
        return self._proc.stdout.readline() if ready else None

    def _expect(self, key: str, timeout_s: float):
        line = self._wait_line(timeout_s)
        if line is None:
            raise RuntimeError(f"the launcher did not answer within {timeout_s} s")
        return self._parse(line, key)

    @staticmethod
    def _parse(line: str, key: str):
        if not line:
            raise RuntimeError("the launcher process ended unexpectedly")
        message = json.loads(line)
        if key not in message:
            raise RuntimeError(f"the launcher answered {message!r}, expected {key!r}")
        return message[key]


def run_preemptible(model: dict, data, config, checkpoint_every: int | None, kill_after_s,
                    folder, launcher: Launcher | None = None) -> "PreemptibleRun":
    """Train ``gl.train(build(**model), data, config)`` in a separate process, SIGKILL it after each
    lifetime in ``kill_after_s`` (seconds since that process started) and start it again from its
    last checkpoint (``resume_from``), until a life finishes the job. ``model`` is a
    ``gl.models.build`` spec such as ``{"name": "mlp", "hidden": (128,)}``, built with the
    config's seed; ``checkpoint_every`` steps (``None``: never, so each kill restarts from
    scratch); ``config.max_steps`` is the job. Energy (this process and its children) and wall
    time cover every life and restart. Pass a ``Launcher`` to reuse one across runs."""
    _check_job(model, config, checkpoint_every, kill_after_s)
    with progress.heartbeat(f"greenlab.preemption: {config.max_steps} steps through pre-emptions"):
        if launcher is not None:
            return launcher.run(model, data, config, checkpoint_every, kill_after_s)
        with Launcher(folder) as own:
            return own.run(model, data, config, checkpoint_every, kill_after_s)


def checkpoint_write_cost(model, optimizer, folder, writes: int = 10, min_seconds: float = 0.3) -> tuple:
    """Write checkpoints of ``model`` and ``optimizer`` (``save_checkpoint``: atomic, checksummed)
    inside one energy window: at least ``writes`` of them, and more until the window lasts
    ``min_seconds`` (long enough for the energy counter). ``folder`` is an existing folder on the
    file system to measure: the writes go to a temporary folder created inside it and removed
    afterwards, so nothing already in ``folder`` is touched. Returns (seconds per write, joules per
    write, writes, Measurement)."""
    import shutil
    import tempfile

    limits.steps("writes", writes, what="checkpoint writes")
    limits.measure_seconds("min_seconds", min_seconds, low=0)
    if not isinstance(folder, (str, os.PathLike)):
        raise validation.ArgumentTypeError(f"folder must be a path to a folder, got {folder!r}")
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise ValueError(f"folder must be an existing folder (the checkpoints are written to a temporary "
                         f"folder created inside it), got {str(folder)!r}"
                         + (", which is not a folder" if folder.exists() else ", which does not exist"))
    own = Path(tempfile.mkdtemp(prefix=".checkpoint-write-cost-", dir=folder))  # only what this call made
    try:
        path = own / "checkpoint.pt"
        done = 0
        with measure("checkpoint writes") as window:
            t0 = time.perf_counter()
            while done < writes or time.perf_counter() - t0 < min_seconds:
                save_checkpoint(path, model, optimizer, step=done)
                done += 1
                if done == 1:  # the rest would take as long each: refuse a count no run could finish
                    limits.measure_time("writes", writes, time.perf_counter() - t0, "checkpoint writes")
            seconds = (time.perf_counter() - t0) / done
    finally:
        shutil.rmtree(own, ignore_errors=True)
    return seconds, window.result.joules / done, done, window.result


def median(values) -> float:
    """The median of a non-empty list of numbers (statistics.median, for the lesson's tables)."""
    return statistics.median(values)


# --- helpers ---------------------------------------------------------------------------------

PROGRESS_FIELDS = ("resumed_at", "reached", "checkpointed", "writes", "write_seconds", "first_step_at",
                   "done", "accuracy")
_FORMAT = "<" + "d" * len(PROGRESS_FIELDS)


def _read_progress(path, checkpointed: int) -> dict:
    """What a life published; a life killed before its first report published nothing, so it
    resumed at, reached and kept ``checkpointed`` (the step of the checkpoint it would have read)."""
    import struct

    path = Path(path)
    raw = path.read_bytes() if path.exists() else b""
    if len(raw) < struct.calcsize(_FORMAT):
        return {**dict.fromkeys(PROGRESS_FIELDS, 0.0), "resumed_at": checkpointed, "reached": checkpointed,
                "checkpointed": checkpointed, "accuracy": -1.0}
    return dict(zip(PROGRESS_FIELDS, struct.unpack(_FORMAT, raw[:struct.calcsize(_FORMAT)])))


class _Progress:
    """The training process's callback: publishes the step reached and that of the last
    checkpoint, and times each checkpoint write, in a memory-mapped file the parent reads after
    a kill (a killed process cannot report anything)."""

    def __init__(self, path, checkpoint, every, resumed_at: int):
        import mmap
        import struct

        self.struct = struct
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:  # whole before it has its name: the parent never reads a short file
            f.write(struct.pack(_FORMAT, *(float(resumed_at if k in ("resumed_at", "reached", "checkpointed")
                                                 else -1.0 if k == "accuracy" else 0.0) for k in PROGRESS_FIELDS)))
        os.replace(tmp, path)
        self._file = open(path, "r+b")
        self.map = mmap.mmap(self._file.fileno(), 0)
        self.values = dict.fromkeys(PROGRESS_FIELDS, 0.0)
        self.checkpoint, self.every, self.first = checkpoint, every, True
        self.set(resumed_at=resumed_at, reached=resumed_at, checkpointed=resumed_at, accuracy=-1.0)

    def set(self, **values) -> None:
        self.values.update(values)
        self.map[:] = self.struct.pack(_FORMAT, *(float(self.values[k]) for k in PROGRESS_FIELDS))

    def on_step(self, state) -> None:
        if self.every is not None and state.step % self.every == 0:
            t0 = time.perf_counter()
            state.checkpoint(self.checkpoint)
            self.set(write_seconds=self.values["write_seconds"] + time.perf_counter() - t0,
                     writes=self.values["writes"] + 1, checkpointed=state.step)
        self.set(reached=state.step)
        if self.first:
            self.set(first_step_at=time.monotonic())
            self.first = False


def life(job: dict, data) -> None:
    """One process life (run by the launcher in a forked process): resume from the job's
    checkpoint when it exists, train to the end or until killed, publishing progress."""
    import torch

    torch.set_num_threads(int(job["threads"]))
    config = TrainConfig(**job["config"])
    every, path = job["every"], job["checkpoint"]
    resume = path if (every is not None and os.path.exists(path)) else None
    step = int(load_checkpoint(resume)["step"]) if resume is not None else 0
    progress = _Progress(job["progress"], path, every, step)
    torch.manual_seed(config.seed)
    spec = dict(job["model"])
    net = build(spec.pop("name"), **spec)
    result = loop.train(net, data, config, callbacks=[progress], device=job["device"], log=False, save=False,
                   resume_from=resume)
    progress.set(accuracy=-1.0 if result.final_accuracy is None else float(result.final_accuracy),
                 reached=int(result.steps), done=1)


def _check_job(model, config, checkpoint_every, kill_after_s) -> list:
    """Refuse a bad job before any process starts; returns the lifetimes as floats."""
    if not isinstance(model, dict) or not isinstance(model.get("name"), str):
        raise validation.ArgumentTypeError(f"model must be a gl.models.build spec like "
                                           f"{{'name': 'mlp', 'hidden': (128,)}}, got {model!r}")
    if not isinstance(config, TrainConfig):
        raise validation.ArgumentTypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    if config.max_steps is None:
        raise ValueError("config.max_steps must be set: the job is a fixed number of steps")
    try:
        plain = TrainConfig(**json.loads(json.dumps(config.to_dict()))) == config
    except (TypeError, ValueError):
        plain = False
    if not plain:
        raise ValueError("config must hold plain values only (no callables or Augment objects): it is "
                         "sent to the training process as JSON")
    if checkpoint_every is not None:
        validation.integer("checkpoint_every", checkpoint_every, low=1)
    try:
        kills = [float(k) for k in kill_after_s]
    except (TypeError, ValueError):
        raise validation.ArgumentTypeError(f"kill_after_s must be a list of seconds, got {kill_after_s!r}") from None
    if any(not (math.isfinite(k) and k >= 0) for k in kills):
        raise ValueError(f"kill_after_s must be seconds >= 0, got {kill_after_s!r}")
    return kills


def _positive(label, value, zero: bool = False) -> None:
    ok = (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
          and (value >= 0 if zero else value > 0))
    if not ok:
        raise ValueError(f"{label} must be a finite number {'>= 0' if zero else '> 0'}, got {value!r}")
