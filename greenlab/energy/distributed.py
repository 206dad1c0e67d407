"""Energy of a ``torch.distributed`` job: one collective window, every device counted once.

    with gl.measure("train", distributed=True) as m:   # on every rank
        train()
    print(m.result.summary())                          # the whole job, on every rank

Each rank measures its own devices and its own process (children included) over the window, then
the ranks exchange their figures with ``torch.distributed.all_gather_object`` (works on gloo and
NCCL) and every rank builds the same reduced :class:`DistributedMeasurement`.

What is summed and what is counted once, by each source's *scope*:

- ``process``: a figure attributed to one rank's process (the CPU estimate in its per-process
  mode). Summed over ranks.
- ``device``: one GPU, identified by its NVML UUID. Two ranks on one node that both read the same
  GPU count it once.
- ``node``: a machine-wide figure (RAPL package/DRAM, the CPU estimate in machine mode). Counted
  once per node.

A source may state its scope with a ``scope`` attribute (``"process"``, ``"device"``, ``"node"``)
and a device with a ``device_id`` attribute; otherwise it follows the source's ``attribution``
(``"process"``, ``"device"`` for an NVML GPU, identified by its UUID, and ``"machine"``, which is
node-wide).
A node is named by ``GREENLAB_NODE_ID`` when set, else by the host name.

A per-process CPU estimate holds two parts: the busy part (this process's CPU time) and the idle
share of the CPUs the process may use. The idle share is the node's, not the rank's: two ranks on
one node that may use the same CPUs would each charge it, so it is split off and counted once
per node and CPU set (summing the ranks' whole estimates could exceed the model's own P_max).

A figure seen by several ranks is counted once, from the rank whose reading is largest (the
longest of their windows, the closest to the whole job's). A rank that failed to
measure (or lost a component) makes the whole result incomplete, naming the rank and the reason;
its figures are never silently left out of a whole-looking total.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import socket
import sys
import time
from dataclasses import dataclass, field

from greenlab.base.units import plain_number
from greenlab.energy.measure import ComponentEnergy, EnergyWindow, IdlePower, Measurement
from greenlab.energy.sources import discover

NODE_ID_ENV = "GREENLAB_NODE_ID"
SCOPES = ("process", "device", "node")


# --- public API ---------------------------------------------------------------------------------


def process_group_active() -> bool:
    """True inside a job whose ``torch.distributed`` process group is initialised."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    dist = torch.distributed
    return bool(dist.is_available() and dist.is_initialized())


def node_id() -> str:
    """This node's name in distributed reports: ``$GREENLAB_NODE_ID``, else the host name."""
    return os.environ.get(NODE_ID_ENV, "").strip() or socket.gethostname()


def rank_sources() -> list:
    """The sources one rank measures: the GPUs this process uses, and the CPU estimate
    attributed to this process and its children (RAPL, where readable, is node-wide). The list
    carries discovery's ``problems``, as ``default_sources()`` does."""
    return discover(gpus="used", attribution="process").sources


def source_scope(source) -> tuple:
    """(scope, device identity) of one source; see the module docstring."""
    scope = getattr(source, "scope", None)
    if scope is not None:
        if scope not in SCOPES:
            raise ValueError(f"{source!r}: scope must be one of {SCOPES}, got {scope!r}")
        identity = getattr(source, "device_id", None) if scope == "device" else None
        return scope, str(identity) if identity is not None else None
    attribution = getattr(source, "attribution", "machine")
    if attribution == "device" or str(getattr(source, "name", "")).startswith("nvml"):
        return "device", _gpu_uuid(source)
    if attribution == "process":
        return "process", None
    return "node", None


class CollectiveWindow:
    """A window every rank of a process group opens and closes together; ``result`` is the
    reduced :class:`DistributedMeasurement` (the same on every rank) and ``local_result`` this
    rank's own ``Measurement`` (None when it failed to measure). Use as a context manager,
    decorator or ``start()``/``stop()``, like :class:`~greenlab.energy.EnergyWindow`.

    ``sources``: this rank's EnergySource objects (default: :func:`rank_sources`).
    ``group``: a ``torch.distributed`` process group (default: the whole job).
    """

    def __init__(self, label: str = "window", idle: IdlePower | None = None,
                 sources: list | None = None, sync: bool = True, group=None):
        if idle is not None and not isinstance(idle, IdlePower):
            raise ValueError("idle must be an IdlePower from measure_idle(), or None")
        self.label = str(label)
        self.idle = idle
        self.sync = bool(sync)
        self.group = group
        self._given_sources = sources  # as given: a list from default_sources() carries problems
        self.result: DistributedMeasurement | None = None
        self.results: list[DistributedMeasurement] = []
        self.local_result: Measurement | None = None
        self._state: _RankWindow | None = None

    def start(self) -> "CollectiveWindow":
        """Begin the window on this rank (every rank of the group must call it); RuntimeError without an
        initialised process group or when already running."""
        if self._state is not None:
            raise RuntimeError(f"window {self.label!r} is already running; stop() it first")
        if not process_group_active():
            raise RuntimeError("a distributed window needs an initialised torch.distributed "
                               "process group (torch.distributed.init_process_group); use "
                               "measure(..., distributed=False) outside one")
        state = _RankWindow(self)
        state.begin()  # an interrupt in the first read leaves the window not running, not half started
        self._state = state
        return self

    def stop(self) -> "DistributedMeasurement":
        """End the window on this rank and reduce every rank's figures (a collective call); the reduced
        ``DistributedMeasurement``, also kept as ``result``."""
        if self._state is None:
            raise RuntimeError(f"window {self.label!r} was not started")
        state, self._state = self._state, None
        self.local_result = state.end()
        self.result = gather_and_reduce(state.record(), self.label, group=self.group)
        self.results.append(self.result)
        return self.result

    @property
    def running(self) -> bool:
        """True between ``start()`` and ``stop()``."""
        return self._state is not None

    def __enter__(self) -> "CollectiveWindow":
        return self.start()

    def __exit__(self, *exc) -> bool:
        if self._state is not None:
            self.stop()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            self.start()
            try:
                return fn(*args, **kwargs)
            finally:
                self.stop()

        wrapper.window = self
        return wrapper


@dataclass
class DistributedMeasurement(Measurement):
    """The reduced result of a collective window: ``components`` per kind (``cpu``, ``dram``,
    ``gpu``) summed over every counted device and process of every node; ``joules`` their sum.

    ``world_size``: ranks in the group. ``ranks``: one plain dict per rank (node, pid, its own
    figures, whether it measured). ``nodes``: per node, its ranks and the joules counted there.
    ``devices``: every counted figure with its key, scope and the rank it was taken from.
    ``problems``: why the result is incomplete (empty when complete).
    ``short_ranks``: the ranks whose own window was shorter than their sources read reliably. A
    sum of windows is short when any of its parts is, so ``short`` is True when this list is not
    empty, even where the longest rank's window was long enough.
    """

    world_size: int = 1
    ranks: list = field(default_factory=list)
    nodes: dict = field(default_factory=dict)
    devices: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    short_ranks: list = field(default_factory=list)

    @property
    def short(self) -> bool:
        """True when the reduced window, or any rank's own window, was short: its energy is not
        measurable at this size."""
        return bool(self.short_ranks) or Measurement.short.fget(self)

    @property
    def complete(self) -> bool:
        """False when any rank failed to measure or lost a component."""
        return not self.problems

    def summary(self) -> str:
        """One line: the measurement's summary with the nodes and ranks it covers, and its problems when
        incomplete."""
        head = (f"{len(self.nodes)} node(s), {self.world_size} rank(s), each device counted once")
        text = super().summary().replace(f"{self.label}: ", f"{self.label} ({head}): ", 1)
        if self.problems and "incomplete: " not in text:
            text += "; incomplete: " + "; ".join(self.problems)
        return text

    def node_summary(self) -> str:
        """One line per node: its ranks and the joules counted there, per kind."""
        lines = []
        for name, node in self.nodes.items():
            parts = ", ".join(f"{k} {plain_number(j, 4)} J" for k, j in node["joules_by_kind"].items())
            ranks = ", ".join(str(r) for r in node["ranks"])
            lines.append(f"{name}: ranks {ranks}; {plain_number(node['joules'], 4)} J [{parts or 'nothing'}]")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """The measurement as plain values, with the world size, completeness, problems and per-rank, per-node and
        per-device figures."""
        out = super().to_dict()
        out.update({"world_size": self.world_size, "complete": self.complete,
                    "problems": list(self.problems), "short_ranks": list(self.short_ranks), "ranks": list(self.ranks),
                    "nodes": dict(self.nodes), "devices": list(self.devices)})
        return out


def rank_record(measurement: Measurement | None, sources: list, error: str = "",
                problems=(), idle: IdlePower | None = None, rank: int | None = None,
                local_rank: int | None = None, node: str | None = None) -> dict:
    """This rank's figures as plain data (what ``all_gather_object`` sends).

    ``measurement``: the rank's own window result, or None when it failed (``error`` says why).
    ``problems``: notes on components this rank could not measure.
    """
    problems = [str(p) for p in problems]
    components = {}
    if measurement is not None:
        problems += [str(p) for p in getattr(measurement, "problems", []) or []]
        by_name = {s.component: s for s in sources}
        for name, c in measurement.components.items():
            source = by_name.get(name)
            scope, identity = source_scope(source) if source is not None else ("node", None)
            item = {"joules": float(c.joules), "seconds": float(c.seconds), "source": c.source,
                    "estimated": bool(c.estimated), "rel_uncertainty": float(c.rel_uncertainty),
                    "scope": scope, "device_id": identity, "note": c.note, "model": c.model,
                    "attribution": str(getattr(c, "attribution", "") or ""), "kind": _kind(name),
                    "complete": bool(getattr(c, "complete", True)),
                    "problems": [str(p) for p in getattr(c, "problems", []) or []]}
            if idle is not None and name in idle.watts_by_component:
                item["idle_watts"] = float(idle.watts_by_component[name])
            components[name] = item
            idle_part = _idle_share(source, item) if scope == "process" else None
            if idle_part is not None:
                item["joules"] -= idle_part["joules"]
                item["part"] = "busy"
                if "idle_watts" in item:  # measured idle power: the model's idle share is its floor
                    idle_part["idle_watts"] = min(item["idle_watts"], idle_part["idle_watts_model"])
                    item["idle_watts"] -= idle_part["idle_watts"]
                components[f"{name} idle share"] = idle_part
        for name in [s.component for s in sources if s.component not in components]:
            if any(p.startswith(f"{name}:") for p in problems):
                continue
            said = [str(w) for w in measurement.warnings if str(w).startswith(f"{name}:")]
            problems.append(said[0] if said else f"{name}: not measured")
    return {
        "rank": _env_int("RANK", 0) if rank is None else int(rank),
        "local_rank": _env_int("LOCAL_RANK", 0) if local_rank is None else int(local_rank),
        "node": node_id() if node is None else str(node),
        "pid": os.getpid(),
        "ok": measurement is not None and not error,
        "error": str(error),
        "seconds": float(measurement.seconds) if measurement is not None else None,
        # the shortest window this rank's sources read reliably, and whether its own window was shorter
        "reliable_from_s": getattr(measurement, "reliable_from_s", None),
        "short": bool(getattr(measurement, "short", False)),
        "components": components,
        "problems": list(dict.fromkeys(problems)),
    }


def reduce_records(records: list, label: str = "window") -> DistributedMeasurement:
    """Reduce every rank's :func:`rank_record` into one :class:`DistributedMeasurement`.

    Key of a figure: process scope ``(node, rank, component)``; device scope ``(node, device
    id)``; node scope ``(node, component, source, CPU set)``. A key seen by several ranks is
    counted once, from the rank with the largest reading (the longest window).
    """
    records = sorted(records, key=lambda r: r["rank"])
    counted: dict = {}
    problems: list = []
    for rec in records:
        where = f"rank {rec['rank']} on {rec['node']}"
        if not rec["ok"]:
            problems.append(f"{where} failed to measure ({rec['error'] or 'no reason given'}); "
                            "its energy is missing from this total")
        problems += [f"{where}: {p}" for p in rec["problems"]]
        for name, item in rec["components"].items():
            key = _key(rec, name, item)
            seen_by = counted[key]["seen_by"] + [rec["rank"]] if key in counted else [rec["rank"]]
            if key not in counted or item["joules"] > counted[key]["joules"]:
                counted[key] = dict(item, component=name, kind=item.get("kind") or _kind(name),
                                    node=rec["node"], rank=rec["rank"], key=list(key))
            counted[key]["seen_by"] = seen_by
            if not item["complete"]:
                reasons = "; ".join(item["problems"]) or "no reason given"
                problems.append(f"{where}: {name} ({item['source']}) is incomplete: {reasons}")
    devices = list(counted.values())
    warnings_cap = _cap_busy_parts(devices)
    seconds = max((r["seconds"] for r in records if r["seconds"] is not None), default=0.0)
    components = {kind: _combine(kind, [d for d in devices if d["kind"] == kind], seconds)
                  for kind in dict.fromkeys(d["kind"] for d in devices)}
    idle_watts = None
    if devices and all("idle_watts" in d for d in devices):
        idle_watts = sum(d["idle_watts"] for d in devices)
    nodes: dict = {}
    for rec in records:
        node = nodes.setdefault(rec["node"], {"ranks": [], "joules": 0.0, "joules_by_kind": {}})
        node["ranks"].append(rec["rank"])
    for d in devices:
        node = nodes[d["node"]]
        node["joules"] += d["joules"]
        node["joules_by_kind"][d["kind"]] = node["joules_by_kind"].get(d["kind"], 0.0) + d["joules"]
    ranks = [{"rank": r["rank"], "local_rank": r["local_rank"], "node": r["node"], "pid": r["pid"],
              "ok": r["ok"], "error": r["error"], "seconds": r["seconds"], "short": bool(r.get("short")),
              "joules": sum(c["joules"] for c in r["components"].values()),
              "components": r["components"], "problems": r["problems"]} for r in records]
    warnings = [f"{len(nodes)} node(s), {len(records)} rank(s): process figures summed over "
                "ranks, devices and node-wide figures counted once"]
    warnings += warnings_cap
    warnings += [f"{d['component']} ({d['device_id']}) on {d['node']} is used by ranks "
                 f"{', '.join(str(r) for r in d['seen_by'])}: counted once; NVML cannot split a "
                 "GPU's energy between the processes on it"
                 for d in devices if d["scope"] == "device" and len(d["seen_by"]) > 1]
    # a sum of windows is short when any part is: the slowest source of any rank sets the floor,
    # and a rank whose own window was short makes the whole short
    reliable = [r["reliable_from_s"] for r in records if r.get("reliable_from_s") is not None]
    short_ranks = [r["rank"] for r in records if r.get("short")]
    if short_ranks:
        warnings.append(f"rank(s) {_ranges(short_ranks)}: window shorter than its sources read reliably, "
                        "so the summed energy is not measurable at this size")
    return DistributedMeasurement(label=label, seconds=seconds, components=components,
                                  idle_watts=idle_watts, warnings=warnings,
                                  world_size=len(records), ranks=ranks, nodes=nodes,
                                  devices=devices, problems=problems,
                                  reliable_from_s=max(reliable) if reliable else None,
                                  short_ranks=short_ranks)


def gather_and_reduce(record: dict, label: str = "window", group=None) -> DistributedMeasurement:
    """All-gather every rank's record (``torch.distributed.all_gather_object``) and reduce them.
    Every rank of ``group`` must call this. On NCCL the exchange runs on this rank's GPU
    (``LOCAL_RANK``) unless a device other than 0 is already current."""
    import torch
    import torch.distributed as dist

    world = dist.get_world_size(group)
    gathered = [None] * world
    with _collective_device(dist.get_backend(group), torch):
        dist.all_gather_object(gathered, record, group=group)
    return reduce_records(gathered, label)


# --- helpers ------------------------------------------------------------------------------------


class _RankWindow:
    """One rank's part of a collective window; failures become a record, never an exception,
    so every rank still reaches the exchange (a missing rank would hang the others)."""

    def __init__(self, window: CollectiveWindow):
        self.window = window
        self.sources: list = []
        self.problems: list = []
        self.error = ""
        self.local: EnergyWindow | None = None

    def begin(self) -> None:
        try:
            given = self.window._given_sources
            self.sources = given if given is not None else rank_sources()
            self.problems = [str(p) for p in getattr(self.sources, "problems", [])]
            self.local = EnergyWindow(self.window.label, idle=self.window.idle,
                                      sources=self.sources, sync=self.window.sync)
            self.local.start()
        except Exception as exc:
            self.error = f"window start: {type(exc).__name__}: {exc}"
            self.local = None
        self.t0 = time.perf_counter()

    def end(self) -> Measurement | None:
        self.seconds = time.perf_counter() - self.t0
        if self.local is None:
            return None
        try:
            self.measurement = self.local.stop()
        except Exception as exc:
            self.error = f"window end: {type(exc).__name__}: {exc}"
            self.measurement = None
        return self.measurement

    def record(self) -> dict:
        measurement = getattr(self, "measurement", None)
        rec = rank_record(measurement, self.sources, self.error, self.problems, self.window.idle)
        if rec["seconds"] is None:
            rec["seconds"] = self.seconds
        return rec


def _key(rec: dict, name: str, item: dict) -> tuple:
    if item["scope"] == "process":
        return ("process", rec["node"], rec["rank"], name)
    if item["scope"] == "device" and item.get("device_id"):
        return ("device", rec["node"], item["device_id"])
    return ("node", rec["node"], name, item["source"], item.get("device_id") or "")


def _idle_share(source, item: dict) -> dict | None:
    """The node-wide idle part of a per-process estimate over the window, as its own item
    (None when the source has no idle term). Keyed by the CPUs the process may use."""
    idle_watts = getattr(source, "idle_watts", None)
    if not item["estimated"] or not isinstance(idle_watts, (int, float)) or idle_watts <= 0:
        return None
    joules = min(float(idle_watts) * item["seconds"], max(item["joules"], 0.0))
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = []
    item = {k: v for k, v in item.items() if k != "idle_watts"}
    max_watts = getattr(source, "max_watts", None)
    return dict(item, joules=joules, scope="node", part="idle share", idle_watts_model=idle_watts,
                max_watts_model=float(max_watts) if isinstance(max_watts, (int, float)) else None,
                device_id=f"idle share of CPUs {_ranges(cpus) or 'all'} at {idle_watts:g} W",
                note=f"idle share of the CPUs this process may use ({idle_watts:g} W), split off "
                     "the per-process estimate so it is counted once per node")


def _cap_busy_parts(devices: list) -> list:
    """Per node, the busy parts of per-process estimates sum to at most what the node's CPUs
    can do in the window, (P_max - P_idle) x seconds: ranks' clock-tick rounding and slightly
    different window edges can add up past it, as a single estimate's reads are capped too.
    Scales those parts down in place; returns a warning for each node capped."""
    said = []
    for share in [d for d in devices if d.get("part") == "idle share" and d.get("max_watts_model")]:
        busy = [d for d in devices if d.get("part") == "busy" and d["node"] == share["node"]
                and d["kind"] == share["kind"] and d["joules"] > 0]
        limit = (share["max_watts_model"] - share["idle_watts_model"]) * share["seconds"]
        total = sum(d["joules"] for d in busy)
        if limit > 0 and total > limit:
            for d in busy:
                d["joules"] *= limit / total
            said.append(f"{share['kind']} on {share['node']}: the ranks' busy CPU time added up to "
                        f"{total / limit:.3f}x what its CPUs can do in the window (clock-tick rounding "
                        "at the window edges); capped at the model's maximum power")
    return said


def _ranges(numbers: list) -> str:
    """[0, 1, 2, 5] -> "0-2,5"."""
    out, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            out.append(str(start) if start == n else f"{start}-{n}")
            start = None
    return ",".join(out)


def _kind(component: str) -> str:
    """``gpu:1`` -> ``gpu``; ``cpu`` -> ``cpu``."""
    return component.split(":", 1)[0]


def _combine(kind: str, items: list, seconds: float) -> ComponentEnergy:
    """One ComponentEnergy for a kind. Its uncertainty is the joule-weighted mean of the parts'
    (exact when their errors are fully correlated, as with one model's constants)."""
    joules = sum(d["joules"] for d in items)
    names = list(dict.fromkeys(d["source"] for d in items))
    weights = [abs(d["joules"]) for d in items]
    total_weight = sum(weights)
    if total_weight > 0:
        rel = sum(w * d["rel_uncertainty"] for w, d in zip(weights, items)) / total_weight
    else:
        rel = max((d["rel_uncertainty"] for d in items), default=0.0)
    scopes = sorted({d["scope"] for d in items})
    note = (f"{len(items)} figure(s) ({', '.join(scopes)} scope) from "
            f"{len({d['node'] for d in items})} node(s)")
    models = list(dict.fromkeys(d["model"] for d in items if d["model"]))
    extra = {}
    attributions = list(dict.fromkeys(d.get("attribution", "") for d in items if d.get("attribution")))
    if attributions and "attribution" in {f.name for f in dataclasses.fields(ComponentEnergy)}:
        extra["attribution"] = "+".join(attributions)
    return ComponentEnergy(component=kind, source="+".join(names), joules=joules, seconds=seconds,
                           watts=joules / seconds if seconds > 0 else 0.0,
                           estimated=any(d["estimated"] for d in items), rel_uncertainty=rel,
                           note=note, model=" | ".join(models), **extra)


def _gpu_uuid(source) -> str | None:
    uuid = getattr(source, "uuid", None)
    if uuid:
        return str(uuid)
    nvml, handle = getattr(source, "_nvml", None), getattr(source, "_handle", None)
    if nvml is None or handle is None:
        return None
    try:
        return nvml.uuid(handle)
    except Exception:
        return None


class _collective_device:
    """On NCCL, make this rank's GPU current for the exchange (object collectives stage their
    bytes on ``torch.cuda.current_device()``); a no-op on other backends."""

    def __init__(self, backend, torch):
        self.context = None
        if str(backend).lower() == "nccl" and torch.cuda.is_available():
            current = torch.cuda.current_device()
            local = _env_int("LOCAL_RANK", 0) % max(1, torch.cuda.device_count())
            self.context = torch.cuda.device(current if current != 0 else local)

    def __enter__(self):
        if self.context is not None:
            self.context.__enter__()
        return self

    def __exit__(self, *exc):
        if self.context is not None:
            return self.context.__exit__(*exc)
        return False


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


__all__ = ["CollectiveWindow", "DistributedMeasurement", "NODE_ID_ENV", "gather_and_reduce",
           "node_id", "process_group_active", "rank_record", "rank_sources", "reduce_records",
           "source_scope"]
