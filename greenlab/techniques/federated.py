"""Federated averaging against centralised training, measured (lesson 15).

- ``dirichlet_split``: label-skewed client datasets: for each class, its images are shared
  among the clients in proportions drawn from a Dirichlet(alpha) distribution (Hsu, Qi and Brown
  2019, arXiv:1909.06335); a small alpha gives each client a few dominant classes.
- ``fedavg``: the server's aggregation of McMahan et al. (2017, "Communication-Efficient
  Learning of Deep Networks from Decentralized Data", AISTATS): every tensor of the clients'
  state dicts (parameters and buffers) averaged with weights n_k / n, n_k the client's samples.
- ``run_federated`` / ``run_centralised``: the rounds loop. Each round every client trains the
  global model on its own data for ``local_epochs`` with plain SGD, the server aggregates, and
  the global model is scored on the validation split. Centralised training is the same loop
  with one client holding all the data (one round = one epoch), so both arms share the model,
  optimizer, batch size, seed and evaluation schedule.
- ``compare``: both arms over paired repeats (repeat r: the same seed, so the same initial
  weights), with verdicts on energy and rounds to a target validation accuracy.

Energy: one ``greenlab.energy.measure`` window per round around the clients' local training
(evaluation is outside it); each client's share of that window is apportioned by its training
seconds (clients run one after another in this process). Communication energy is arithmetic:
bytes counted from the tensors sent, times a cited network figure (``greenlab.impact.network``).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field, replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from greenlab.base import progress, validation
from greenlab.base.units import plain_number
from greenlab.energy import ShortWindowWarning, measure
from greenlab.energy.flags import PooledFlags
from greenlab.energy.provenance import how_measured
from greenlab.experiments import paired
from greenlab.impact import network as _network


# --- client data ---------------------------------------------------------------------------

def dirichlet_split(labels: torch.Tensor, n_clients: int, alpha: float, seed: int = 0,
                    min_samples: int = 1) -> list[torch.Tensor]:
    """Row indices of ``labels`` for each of ``n_clients`` clients, label-skewed: each class's
    rows are shuffled and cut among the clients in proportions drawn from Dirichlet(``alpha``).
    Every row goes to exactly one client. Draws again (up to 100 times, seeded) until every
    client holds at least ``min_samples`` rows. Returns sorted index tensors."""
    import numpy as np

    if not isinstance(labels, torch.Tensor) or labels.dim() != 1 or labels.numel() == 0:
        raise ValueError("labels must be a non-empty 1-D tensor of class labels")
    n_clients = validation.integer("n_clients", n_clients, low=1, high=10_000)
    alpha = validation.number("alpha", alpha, low=0, low_open=True)
    seed = validation.integer("seed", seed, low=0)
    min_samples = validation.integer("min_samples", min_samples, low=0)
    if n_clients * min_samples > labels.numel():
        raise ValueError(f"min_samples x n_clients ({n_clients * min_samples}) exceeds the {labels.numel()} rows")
    y = labels.detach().cpu().numpy()
    rng = np.random.default_rng(seed)
    for _ in range(100):
        parts: list[list[int]] = [[] for _ in range(n_clients)]
        for c in np.unique(y):
            rows = rng.permutation(np.flatnonzero(y == c))
            shares = rng.dirichlet([alpha] * n_clients)
            cuts = (np.cumsum(shares)[:-1] * len(rows)).round().astype(int)
            for k, piece in enumerate(np.split(rows, cuts)):
                parts[k].extend(piece.tolist())
        if min(len(p) for p in parts) >= min_samples:
            return [torch.tensor(sorted(p), dtype=torch.long) for p in parts]
    raise ValueError(f"no split with at least {min_samples} rows per client after 100 draws at alpha={alpha}: "
                     "lower min_samples or n_clients, or raise alpha")


def label_counts(labels: torch.Tensor, splits, num_classes: int) -> list[list[int]]:
    """Per client, how many of its rows carry each class (``num_classes`` counts each)."""
    splits = check_splits(splits, len(labels))
    return [torch.bincount(labels[idx.to(labels.device)].cpu(), minlength=num_classes).tolist() for idx in splits]


def check_splits(splits, n_rows: int) -> list:
    """Each client's row indices as a 1-D int64 tensor, refused by name when they could not be rows
    of a training split of ``n_rows``: negative (which would count from the end), fractional
    (which would be cut to an integer), out of range, or an empty client."""
    splits = validation.items("splits", splits)
    if not splits:
        raise ValueError("splits must hold at least one client, each with at least one training row")
    out = []
    for k, s in enumerate(splits):
        try:
            t = torch.as_tensor(s)
        except (TypeError, ValueError, RuntimeError):
            raise validation.ArgumentTypeError(f"splits[{k}] must be row indices, got {type(s).__name__}") from None
        if t.dtype == torch.bool or t.dim() != 1:
            raise ValueError(f"splits[{k}] must be a 1-D list of row indices, got {t.dtype} of shape {tuple(t.shape)}")
        if t.is_floating_point() or t.is_complex():
            if not bool(torch.isfinite(t).all()) or not bool((t == t.round()).all()):
                raise ValueError(f"splits[{k}] must hold whole row numbers, got {t.dtype} values such as "
                                 f"{t[~torch.isfinite(t) | (t != t.round())][0].item()!r}")
        t = t.to(torch.long)
        if t.numel() == 0:
            raise ValueError(f"splits[{k}] is empty: every client needs at least one training row")
        if int(t.min()) < 0 or int(t.max()) >= n_rows:
            raise ValueError(f"splits[{k}] must index rows 0..{n_rows - 1} of the training split, got "
                             f"{int(t.min()) if int(t.min()) < 0 else int(t.max())}")
        out.append(t)
    return out


# --- what the server does ------------------------------------------------------------------

def fedavg(states: list, sample_counts: list) -> dict:
    """FedAvg's aggregate: for every key of the state dicts (parameters and buffers), the
    average of the clients' tensors weighted by ``sample_counts[k] / sum(sample_counts)``.
    Floating tensors keep their dtype; integer tensors (counters such as BatchNorm's
    ``num_batches_tracked``) are rounded to the nearest integer."""
    states, weights = _check_states(states, sample_counts)
    out = {}
    for key, first in states[0].items():
        total = sum(w * s[key].detach().double() for w, s in zip(weights, states))
        out[key] = total.to(first.dtype) if first.is_floating_point() else torch.round(total).to(first.dtype)
    return out


def payload_bytes(state) -> int:
    """Bytes of the tensors in ``state`` (a state dict, a module, or one tensor), as sent:
    elements x bytes per element, parameters and buffers alike."""
    if isinstance(state, nn.Module):
        state = state.state_dict()
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if not isinstance(state, dict):
        raise TypeError(f"state must be a state dict, a module or a tensor, got {type(state).__name__}")
    return sum(t.numel() * t.element_size() for t in state.values() if isinstance(t, torch.Tensor))


def round_bytes(state, n_clients: int) -> int:
    """Bytes one FedAvg round moves: every client downloads the global model and uploads its own."""
    return 2 * validation.integer("n_clients", n_clients, low=0) * payload_bytes(state)


def raw_data_bytes(x: torch.Tensor, y: torch.Tensor | None = None) -> int:
    """Bytes to send images as 8-bit pixels (one byte per value, as a camera stores them,
    uncompressed) plus one byte per label: what centralising the data costs to upload."""
    return x.numel() + (0 if y is None else y.numel())


# --- the rounds loop -----------------------------------------------------------------------

@dataclass
class RoundRecord:
    """One round: the validation accuracy after it, the measured compute (joules, seconds) of
    all clients' local training, each client's share, the bytes sent, and the round's energy
    window (``energy``, a ``Measurement``: its sources, estimate flag and problems)."""

    round: int
    val_accuracy: float
    joules: float
    seconds: float
    bytes_sent: int
    client_joules: list
    client_seconds: list
    short_window: bool = False
    energy: object = None


@dataclass
class FederatedRun(PooledFlags):
    """A run of the rounds loop. ``one_off_bytes``: bytes sent once before training (the
    centralised arm's data upload). ``target``: the validation accuracy it trains towards.
    ``estimated``, ``complete``, ``problems`` and ``sources`` come from the rounds' windows."""

    label: str
    rounds: list
    target: float | None
    client_samples: list
    bytes_per_round: int
    one_off_bytes: int
    network: _network.NetworkFigure
    test_accuracy: float | None = None
    model: nn.Module | None = field(default=None, repr=False)

    def measurements(self) -> list:
        """(label, Measurement) of every round's energy window."""
        return [(f"{self.label} round {r.round}", r.energy) for r in self.rounds if r.energy is not None]

    @property
    def rounds_to_target(self) -> int | None:
        """The first round (1-based) whose validation accuracy reached the target; None if none did."""
        if self.target is None:
            return None
        return next((r.round for r in self.rounds if r.val_accuracy >= self.target), None)

    def _upto(self, n: int | None):
        return self.rounds if n is None else self.rounds[:n]

    def compute_joules(self, upto: int | None = None) -> float:
        """Measured compute energy of the clients' training, rounds 1..``upto`` (default all)."""
        return sum(r.joules for r in self._upto(upto))

    def bytes_sent(self, upto: int | None = None) -> int:
        """Bytes sent up to round ``upto`` (default all), the one-off upload included."""
        return self.one_off_bytes + sum(r.bytes_sent for r in self._upto(upto))

    def network_joules(self, upto: int | None = None) -> float:
        """Communication energy up to round ``upto``: bytes x the cited figure (an estimate)."""
        return _network.transfer_joules(self.bytes_sent(upto), self.network)

    @property
    def compute_joules_to_target(self) -> float | None:
        n = self.rounds_to_target
        return None if n is None else self.compute_joules(n)

    @property
    def joules_to_target(self) -> float | None:
        """Compute plus communication energy until the target was reached; None if it was not."""
        n = self.rounds_to_target
        return None if n is None else self.compute_joules(n) + self.network_joules(n)

    @property
    def best_val_accuracy(self) -> float:
        return max(r.val_accuracy for r in self.rounds)

    def client_compute_joules(self) -> list:
        """Per client: its share of the measured compute over all rounds (joules)."""
        return [sum(r.client_joules[k] for r in self.rounds) for k in range(len(self.client_samples))]

    @property
    def short_windows(self) -> int:
        return sum(r.short_window for r in self.rounds)

    @property
    def short_to_target(self) -> bool:
        """True when a round's window up to the target (all rounds if it was missed) was too short
        to read: its energy to the target is then "not measurable at this size"."""
        return any(r.short_window for r in self._upto(self.rounds_to_target))


def run_federated(model_fn, data, splits, rounds: int, local_epochs: int = 1, batch_size: int = 32,
                  lr: float = 0.05, target_accuracy: float | None = None, stop_at_target: bool = True,
                  seed: int = 0, aggregate=None, network: _network.NetworkFigure | None = None,
                  label: str = "FedAvg", one_off_bytes: int = 0, exchange: bool = True,
                  show_progress: bool = True) -> FederatedRun:
    """Train ``model_fn()`` by federated averaging over the clients whose training rows of
    ``data`` are ``splits`` (index tensors), for up to ``rounds`` rounds (stopping at
    ``target_accuracy`` when ``stop_at_target``). ``aggregate(states, sample_counts) -> state``
    is the server's rule (default ``fedavg``; e.g. a learner's). ``exchange=False`` (centralised
    training) sends no model. Seeded by ``seed``: the initial weights and every client's sample
    order. Runs on the CPU. ``show_progress``: a line every few seconds while it runs (off when
    ``compare`` reports the repeats itself)."""
    rounds = validation.integer("rounds", rounds, low=1, high=100_000)
    if not isinstance(show_progress, bool):
        raise TypeError(f"show_progress must be True or False, got {show_progress!r}")
    local_epochs = validation.integer("local_epochs", local_epochs, low=1, high=1000)
    batch_size = validation.integer("batch_size", batch_size, low=1)
    lr = validation.number("lr", lr, low=0, low_open=True)
    target_accuracy = validation.number("target_accuracy", target_accuracy, low=0, high=1, low_open=True,
                                        allow_none=True)
    seed = validation.integer("seed", seed, low=0)
    aggregate = fedavg if aggregate is None else aggregate
    if not callable(aggregate) or not callable(model_fn):
        raise TypeError("model_fn and aggregate must be functions")
    splits = check_splits(splits, len(data.train_y))
    network = _network.energy_per_byte() if network is None else network

    torch.manual_seed(seed)
    global_model = model_fn().cpu()
    worker = model_fn().cpu()
    counts = [int(s.numel()) for s in splits]
    x_all, y_all = data.train_x.cpu(), data.train_y.cpu()
    per_round_bytes = round_bytes(global_model.state_dict(), len(splits)) if exchange else 0
    history = []
    with progress.heartbeat(f"greenlab.federated {label}: {rounds} round(s)", show=show_progress):
        for r in range(1, rounds + 1):
            states, seconds = [], []
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ShortWindowWarning)
                window = measure(f"{label} round {r}")
                with window:
                    for k, rows in enumerate(splits):
                        t0 = time.perf_counter()
                        worker.load_state_dict(global_model.state_dict())
                        _local_train(worker, x_all[rows], y_all[rows], local_epochs, batch_size, lr,
                                     seed=seed * 1_000_003 + r * 1009 + k)
                        states.append({key: t.detach().clone() for key, t in worker.state_dict().items()})
                        seconds.append(time.perf_counter() - t0)
            short = any(issubclass(w.category, ShortWindowWarning) for w in caught)
            for w in caught:
                if not issubclass(w.category, ShortWindowWarning):
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            result = window.result
            global_model.load_state_dict(states[0] if len(states) == 1 else aggregate(states, counts))
            total_s = sum(seconds) or 1.0
            history.append(RoundRecord(round=r, val_accuracy=_accuracy(global_model, data.val_x, data.val_y),
                                       joules=result.joules, seconds=result.seconds, bytes_sent=per_round_bytes,
                                       client_joules=[result.joules * s / total_s for s in seconds],
                                       client_seconds=seconds, short_window=short, energy=result))
            if stop_at_target and target_accuracy is not None and history[-1].val_accuracy >= target_accuracy:
                break
    return FederatedRun(label=label, rounds=history, target=target_accuracy, client_samples=counts,
                        bytes_per_round=per_round_bytes, one_off_bytes=int(one_off_bytes), network=network,
                        test_accuracy=_accuracy(global_model, data.test_x, data.test_y), model=global_model)


def run_centralised(model_fn, data, epochs: int, **options) -> FederatedRun:
    """Centralised training in the same loop: one client holding every training row, one round
    per epoch, no model exchanged; the data's upload to the data centre (``raw_data_bytes``) is
    counted once. ``options`` as for ``run_federated``."""
    options.setdefault("label", "centralised")
    options.setdefault("one_off_bytes", raw_data_bytes(data.train_x, data.train_y))
    return run_federated(model_fn, data, [torch.arange(data.n_train)], epochs, exchange=False, **options)


# --- paired repeats --------------------------------------------------------------------------

@dataclass
class FederatedComparison:
    """FedAvg against centralised training over paired repeats (repeat r: seed ``seeds[r]``)."""

    federated: list
    centralised: list
    seeds: list

    def _values(self, runs, what):
        return [getattr(run, what) for run in runs]

    def measurements(self) -> list:
        """(label, Measurement) of every round's window of every run, both arms."""
        return [m for run in self.federated + self.centralised for m in run.measurements()]

    @property
    def estimated(self) -> bool:
        """True when any round's energy is a CPU power model's estimate, not a reading."""
        return any(run.estimated for run in self.federated + self.centralised)

    def verdict(self, metric: str = "joules_to_target"):
        """FedAvg against centralised, paired by repeat: a ``greenlab.experiments.Paired`` on
        ``joules_to_target`` (compute + communication), ``compute_joules_to_target`` or
        ``rounds_to_target``. A repeat where either arm missed the target drops out."""
        if metric not in ("joules_to_target", "compute_joules_to_target", "rounds_to_target"):
            raise ValueError("metric must be 'joules_to_target', 'compute_joules_to_target' or "
                             f"'rounds_to_target', got {metric!r}")
        short = [f.short_to_target or c.short_to_target for f, c in zip(self.federated, self.centralised)]
        return paired(self._values(self.federated, metric), self._values(self.centralised, metric),
                      metric, "FedAvg", "centralised", short=short)

    def with_network(self, figure: _network.NetworkFigure) -> FederatedComparison:
        """The same runs with their bytes priced at ``figure`` (a sensitivity or a flip search:
        the compute and the bytes are the runs' own, only the network's joules per byte change)."""
        if not isinstance(figure, _network.NetworkFigure):
            raise TypeError(f"figure must be a NetworkFigure, got {type(figure).__name__}")
        return FederatedComparison(federated=[replace(r, network=figure) for r in self.federated],
                                   centralised=[replace(r, network=figure) for r in self.centralised],
                                   seeds=list(self.seeds))

    def outcome(self, metric: str = "joules_to_target") -> str:
        """The verdict on ``metric`` in three words: "FedAvg lower", "centralised lower",
        "no detectable difference" (or "no interval" with too few paired repeats)."""
        v = self.verdict(metric)
        if v.detectable is None:
            return "no interval"
        if not v.detectable:
            return "no detectable difference"
        return "FedAvg lower" if v.estimate < 1 else "centralised lower"

    def reached(self, arm: str) -> int:
        """How many repeats of ``arm`` ("federated" or "centralised") reached the target."""
        runs = {"federated": self.federated, "centralised": self.centralised}.get(arm)
        if runs is None:
            raise ValueError(f"arm must be 'federated' or 'centralised', got {arm!r}")
        return sum(run.rounds_to_target is not None for run in runs)

    @property
    def runs(self) -> dict:
        """Arm -> its runs, one per repeat: "FedAvg" and "centralised"."""
        return {"FedAvg": self.federated, "centralised": self.centralised}

    @property
    def estimated(self) -> bool:
        return any(run.estimated for run in self.federated + self.centralised)

    def table(self) -> str:
        """Per repeat: rounds to the target, compute and communication energy to it, per arm."""
        def cell(run):
            n = run.rounds_to_target
            if n is None:
                return f"not reached in {len(run.rounds)} (best {run.best_val_accuracy:.1%})"
            return (f"{n:>3} rounds  {plain_number(run.compute_joules(n)):>8} J compute + "
                    f"{plain_number(run.network_joules(n)):>8} J network")
        lines = [f"{'seed':>4}  {'FedAvg':<44}  centralised"]
        for seed, fed, cen in zip(self.seeds, self.federated, self.centralised):
            lines.append(f"{seed:>4}  {cell(fed):<44}  {cell(cen)}")
        lines.append(f"(compute: {how_measured(self, short=True)}; "
                     f"network = bytes counted x {self.federated[0].network.kwh_per_gb:.3g} kWh/GB, "
                     f"{self.federated[0].network.short()})")
        return "\n".join(lines)


def compare(model_fn, data, splits, rounds: int, repeats: int = 3, target_accuracy: float = 0.7,
            seed: int = 0, **options) -> FederatedComparison:
    """``run_federated`` and ``run_centralised`` (same ``rounds`` as epochs) for ``repeats``
    paired repeats, seeds ``seed .. seed + repeats - 1``, arms alternating first."""
    repeats = validation.integer("repeats", repeats, low=1, high=1000)
    options = {**options, "show_progress": False}  # one line per repeat below, ticking while it runs
    fed, cen, seeds = [], [], []
    steps = progress.Steps("greenlab.federated.compare", repeats, unit="repeat")
    try:
        for i in range(repeats):
            s = seed + i
            arms = [("fed", lambda: run_federated(model_fn, data, splits, rounds, target_accuracy=target_accuracy,
                                                  seed=s, **options)),
                    ("cen", lambda: run_centralised(model_fn, data, rounds, target_accuracy=target_accuracy,
                                                    seed=s, **{k: v for k, v in options.items() if k != "aggregate"}))]
            steps.start(f"repeat {i + 1}: FedAvg and centralised, seed {s}")
            with steps.ticking():
                done = dict((name, fn()) for name, fn in (arms if i % 2 == 0 else arms[::-1]))
            steps.done()
            fed.append(done["fed"])
            cen.append(done["cen"])
            seeds.append(s)
    finally:
        steps.close()
    return FederatedComparison(federated=fed, centralised=cen, seeds=seeds)


# --- helpers -----------------------------------------------------------------------------------

def _local_train(model, x, y, epochs, batch_size, lr, seed):
    """Plain SGD on one client's rows (a fresh optimizer each round: FedAvg's clients keep no state)."""
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=g)
        for i in range(0, len(y), batch_size):
            rows = order[i:i + batch_size]
            if len(rows) < 2 and any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
                continue  # BatchNorm cannot train on one sample
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(model(x[rows]), y[rows]).backward()
            optimizer.step()


def _accuracy(model, x, y) -> float:
    model.eval()
    with torch.inference_mode():
        correct = sum(int((model(x[i:i + 1024].cpu()).argmax(1) == y[i:i + 1024].cpu()).sum())
                      for i in range(0, len(y), 1024))
    return correct / max(1, len(y))


def _check_states(states, sample_counts):
    if not isinstance(states, (list, tuple)) or not states or not all(isinstance(s, dict) for s in states):
        raise TypeError("states must be a non-empty list of state dicts")
    if not isinstance(sample_counts, (list, tuple)) or len(sample_counts) != len(states):
        raise ValueError(f"sample_counts must give one count per state ({len(states)}), got {sample_counts!r}")
    counts = [validation.number("sample_counts", n, low=0) for n in sample_counts]
    if sum(counts) <= 0 or not all(math.isfinite(n) for n in counts):
        raise ValueError(f"sample_counts must be >= 0 with a positive total, got {sample_counts!r}")
    keys = list(states[0])
    for s in states[1:]:
        if list(s) != keys:
            raise ValueError("every state dict must hold the same keys, in the same order")
    scale = max(counts)  # counts near the float limit would sum to inf and weigh every client 0
    scaled = [n / scale for n in counts]
    total = sum(scaled)
    return list(states), [n / total for n in scaled]
