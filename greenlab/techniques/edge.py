"""Edge inference against sending the input to a data centre (lesson 15).

On the device, a prediction costs the measured joules of the model there (``gl.compress``'s
interleaved rounds). Sent away, it costs the network's share (input bytes x a cited joules per
byte, ``greenlab.impact.network``) plus the data centre's own energy per inference, read from a
recorded GPU run when there is one. Without a recorded run the data-centre share is *missing*:
the remote cost is then the network's share alone, a lower bound, and says so.

``edge_against_remote`` pairs the two per measured round and gives the break-even (predictions
that repay a one-off cost such as downloading the model) and the input size at which sending
costs as much as computing on the device, both only when the saving is detectable.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from greenlab.base import validation
from greenlab.experiments import summarize
from greenlab.impact import network as _network
from greenlab.techniques.compress import BreakEven, break_even_interval, joules_text

EXPERIMENT = "beyond_the_data_centre"  # the GPU suite's record the lesson reads


@dataclass(frozen=True)
class DatacentreFigure:
    """A data-centre model's energy per inference from a recorded run: ``joules_per_inference``
    (the GPU's energy per image, from NVML), ``gpu`` and ``date`` of the run, the row's ``label``."""

    joules_per_inference: float
    gpu: str
    date: str
    label: str

    def describe(self) -> str:
        return (f"{joules_text(self.joules_per_inference)} per inference, recorded on {self.gpu} "
                f"({self.date}, {self.label})")


def datacentre_figure(runs) -> DatacentreFigure | None:
    """The newest recorded figure from ``runs`` (``gl.reference.load(EXPERIMENT)``): the first
    row with a ``joules_per_sample`` of the newest run; None when no run has one."""
    for run in reversed(list(runs or [])):
        for row in getattr(run, "results", []):
            value = row.get("joules_per_sample")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                return DatacentreFigure(float(value), run.gpu, run.date, str(row.get("label", "")))
    return None


@dataclass(frozen=True)
class RemoteCost:
    """What one prediction sent to a data centre costs: the network's share (an estimate from
    the cited figure) plus the data centre's (recorded, or None when missing)."""

    input_bytes: int
    network: _network.NetworkFigure
    datacentre: DatacentreFigure | None

    @property
    def network_joules(self) -> float:
        return _network.transfer_joules(self.input_bytes, self.network)

    @property
    def complete(self) -> bool:
        """False while the data centre's share is missing (the total is then a lower bound)."""
        return self.datacentre is not None

    @property
    def joules(self) -> float:
        """Network share plus the data centre's share when recorded (else the network's alone)."""
        return self.network_joules + (self.datacentre.joules_per_inference if self.datacentre else 0.0)

    def describe(self) -> str:
        dc = (self.datacentre.describe() if self.datacentre else
              "missing (no recorded GPU run yet), so the total below is a lower bound")
        return (f"network: {self.input_bytes:,} bytes x {self.network.joules_per_byte * 1e6:.3g} µJ/byte = "
                f"{joules_text(self.network_joules)} ({self.network.short()}, an estimate); "
                f"data centre: {dc}")


def remote_cost(input_bytes: int, datacentre: DatacentreFigure | None = None,
                network: _network.NetworkFigure | None = None) -> RemoteCost:
    """The cost of sending one input of ``input_bytes`` bytes to a data-centre model."""
    input_bytes = validation.integer("input_bytes", input_bytes, low=0)
    if datacentre is not None and not isinstance(datacentre, DatacentreFigure):
        raise TypeError(f"datacentre must be a DatacentreFigure or None, got {type(datacentre).__name__}")
    if network is not None and not isinstance(network, _network.NetworkFigure):
        raise TypeError(f"network must be a greenlab.network NetworkFigure (gl.network.energy_per_byte()) or None, "
                        f"got {type(network).__name__}")
    return RemoteCost(input_bytes, _network.energy_per_byte() if network is None else network, datacentre)


@dataclass
class EdgeVerdict:
    """The device's measured joules per inference (one per round) against the remote cost.
    ``break_even``: predictions that repay ``one_off_joules`` (a ``compress.BreakEven``: stated
    only when detectable)."""

    edge_joules: list
    remote: RemoteCost
    break_even: BreakEven

    @property
    def detectable(self) -> bool:
        """True when the interval of the per-prediction saving (remote - edge) lies above zero."""
        return self.break_even.detectable

    @property
    def costs_more(self) -> bool:
        return self.break_even.costs_more

    def outcome(self) -> str:
        """The verdict in a few words: "the device lower", "sending lower" or "no detectable
        difference" (per prediction, paired by round); "no interval" with too few rounds."""
        if self.break_even.low is None:
            return "no interval"
        if self.detectable:
            return "the device lower"
        if self.costs_more:
            return "sending lower"
        return "no detectable difference"

    @property
    def edge_median(self) -> float:
        return statistics.median(self.edge_joules)

    def break_even_bytes(self) -> tuple | None:
        """(bytes, low, high): the input size at which sending it costs what computing on the
        device does (from the mean edge energy and its 95% interval, less the data centre's
        share when recorded); None unless the saving is detectable."""
        if not self.detectable:
            return None
        per_byte = self.remote.network.joules_per_byte
        dc = self.remote.datacentre.joules_per_inference if self.remote.datacentre else 0.0

        stat = summarize(self.edge_joules)
        half = stat.ci95 or 0.0
        values = [max(0.0, (e - dc) / per_byte) for e in (stat.mean, stat.mean - half, stat.mean + half)]
        return values[0], max(0.0, values[1]), values[2]

    def sentence(self) -> str:
        """The comparison in words, following the verdict on the saving."""
        bound = "" if self.remote.complete else " (network share only: a lower bound)"
        head = (f"on the device {joules_text(self.edge_median)} per prediction (median of "
                f"{len(self.edge_joules)} rounds) against {joules_text(self.remote.joules)} sent away{bound}")
        return head + "; " + self.break_even.sentence()


def edge_against_remote(edge_joules, remote: RemoteCost, one_off_joules: float = 0.0) -> EdgeVerdict:
    """Pair the device's per-round joules per inference (``edge_joules``) with the remote cost
    (the same each round) and state the break-even of ``one_off_joules`` (e.g. downloading the
    model to the device) only when the saving is detectable."""
    edge = [validation.number("edge_joules", e, low=0) for e in edge_joules]
    if not edge:
        raise ValueError("edge_joules must hold at least one round's joules per inference")
    if not isinstance(remote, RemoteCost):
        raise TypeError(f"remote must be a RemoteCost (remote_cost(...)), got {type(remote).__name__}")
    be = break_even_interval(one_off_joules, [remote.joules] * len(edge), edge, what="prediction")
    return EdgeVerdict(edge, remote, be)
