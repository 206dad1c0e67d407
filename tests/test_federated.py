"""Lesson 15's library: label-skewed client splits, FedAvg, bytes counted from tensors, the
rounds loop against centralised training, the cited network figure and edge arithmetic."""

import math
from types import SimpleNamespace

import pytest
import torch

from greenlab.impact import network
from greenlab.techniques import edge, federated
from greenlab.training import data as gldata, models


def test_dirichlet_split_covers_every_row_once_and_is_seeded():
    labels = torch.arange(10).repeat(30)
    a = federated.dirichlet_split(labels, 4, 0.3, seed=1, min_samples=5)
    b = federated.dirichlet_split(labels, 4, 0.3, seed=1, min_samples=5)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    rows = torch.cat(a).sort().values
    assert torch.equal(rows, torch.arange(len(labels))) and min(len(s) for s in a) >= 5
    counts = federated.label_counts(labels, a, 10)
    assert [sum(c) for c in counts] == [len(s) for s in a]


def test_a_small_alpha_skews_labels_more_than_a_large_one():
    labels = torch.arange(10).repeat(100)

    def top_share(alpha):
        counts = federated.label_counts(labels, federated.dirichlet_split(labels, 5, alpha, seed=0), 10)
        return sum(max(c) / sum(c) for c in counts) / len(counts)

    assert top_share(0.1) > top_share(100.0) + 0.2


def test_dirichlet_split_refuses_bad_input():
    with pytest.raises(ValueError, match="alpha"):
        federated.dirichlet_split(torch.zeros(5, dtype=torch.long), 2, 0)
    with pytest.raises(ValueError, match="min_samples"):
        federated.dirichlet_split(torch.zeros(5, dtype=torch.long), 3, 1.0, min_samples=2)


def test_fedavg_weights_by_samples_averages_buffers_and_rounds_counters():
    a = {"w": torch.tensor([1.0, 2.0]), "running_mean": torch.tensor([0.0]), "n": torch.tensor(1)}
    b = {"w": torch.tensor([3.0, 6.0]), "running_mean": torch.tensor([4.0]), "n": torch.tensor(4)}
    out = federated.fedavg([a, b], [3, 1])
    assert torch.allclose(out["w"], torch.tensor([1.5, 3.0]))
    assert torch.allclose(out["running_mean"], torch.tensor([1.0]))
    assert out["n"].dtype == torch.long and int(out["n"]) == 2  # 1.75 rounds to 2
    with pytest.raises(ValueError, match="sample_counts"):
        federated.fedavg([a, b], [1])
    with pytest.raises(ValueError, match="same keys"):
        federated.fedavg([a, {"w": a["w"]}], [1, 1])


def test_bytes_are_counted_from_the_tensors():
    model = models.build("cnn", width=4, depth=1)
    state = model.state_dict()
    expected = sum(t.numel() * t.element_size() for t in state.values())
    assert federated.payload_bytes(model) == federated.payload_bytes(state) == expected
    assert federated.round_bytes(state, 5) == 10 * expected
    assert federated.raw_data_bytes(torch.zeros(3, 1, 28, 28), torch.zeros(3)) == 3 * 784 + 3


def test_network_figure_is_cited_and_converts_to_joules_per_byte():
    figure = network.energy_per_byte()
    assert figure.kwh_per_gb == 0.06 and figure.year == 2015 and "Aslan" in figure.source
    assert math.isclose(figure.joules_per_byte, 0.06 * 3.6e6 / 1e9)
    assert math.isclose(network.transfer_joules(1e9, figure), 0.06 * 3.6e6)
    with pytest.raises(ValueError, match="key"):
        network.energy_per_byte("nowhere")
    with pytest.raises(ValueError, match="nbytes"):
        network.transfer_joules(-1)


@pytest.fixture(scope="module")
def tiny():
    ds = gldata.generate("fashion-mnist", n_train=240, n_test=60, seed=0)
    splits = federated.dirichlet_split(ds.train_y, 3, 0.5, seed=0, min_samples=10)
    return ds, splits


def test_the_rounds_loop_counts_rounds_bytes_and_energy(tiny):
    ds, splits = tiny
    make = lambda: models.build("mlp", hidden=(8,))  # noqa: E731
    run = federated.run_federated(make, ds, splits, rounds=2, local_epochs=1, batch_size=32, lr=0.05)
    assert len(run.rounds) == 2 and run.client_samples == [len(s) for s in splits]
    assert run.bytes_per_round == federated.round_bytes(make().state_dict(), 3)
    assert run.bytes_sent() == 2 * run.bytes_per_round
    assert run.compute_joules() > 0 and len(run.client_compute_joules()) == 3
    assert math.isclose(sum(run.client_compute_joules()), run.compute_joules(), rel_tol=1e-9)
    assert math.isclose(run.network_joules(), network.transfer_joules(run.bytes_sent()))
    central = federated.run_centralised(make, ds, epochs=1, batch_size=32, lr=0.05)
    assert central.bytes_per_round == 0 and central.one_off_bytes == federated.raw_data_bytes(ds.train_x, ds.train_y)


def test_one_client_holding_everything_is_centralised_training(tiny):
    ds, _ = tiny
    make = lambda: models.build("mlp", hidden=(16,))  # noqa: E731
    fed = federated.run_federated(make, ds, [torch.arange(ds.n_train)], rounds=2, seed=3)
    cen = federated.run_centralised(make, ds, epochs=2, seed=3)
    assert [r.val_accuracy for r in fed.rounds] == [r.val_accuracy for r in cen.rounds]


def test_a_learner_aggregate_is_what_the_loop_uses(tiny):
    ds, splits = tiny
    calls = []

    def first_client_only(states, counts):
        calls.append(counts)
        return states[0]

    federated.run_federated(lambda: models.build("mlp", hidden=(8,)), ds, splits, rounds=1,
                            aggregate=first_client_only)
    assert calls == [[len(s) for s in splits]]


def test_targets_and_verdicts_follow_the_rounds():
    fig = network.energy_per_byte()

    def run(accs, joules, one_off=0):
        rounds = [federated.RoundRecord(i + 1, a, j, 1.0, 100, [j], [1.0])
                  for i, (a, j) in enumerate(zip(accs, joules))]
        return federated.FederatedRun("x", rounds, 0.5, [10], 100, one_off, fig)

    r = run([0.2, 0.6, 0.7], [1.0, 2.0, 4.0])
    assert r.rounds_to_target == 2 and r.compute_joules_to_target == 3.0
    assert math.isclose(r.joules_to_target, 3.0 + network.transfer_joules(200, fig))
    assert run([0.1, 0.2], [1, 1]).joules_to_target is None
    cmp = federated.FederatedComparison([run([0.6], [2.0])] * 3, [run([0.6], [1.0])] * 3, [0, 1, 2])
    v = cmp.verdict("compute_joules_to_target")
    assert v.n == 3 and math.isclose(v.estimate, 2.0)
    with pytest.raises(ValueError, match="metric"):
        cmp.verdict("seconds")
    # a round window too short to read, before the target, makes energy to the target unmeasurable
    shorty = run([0.6], [2.0])
    shorty.rounds[0].short_window = True
    late = run([0.6, 0.7], [2.0, 1.0])
    late.rounds[1].short_window = True  # after the target: not part of the energy to it
    assert shorty.short_to_target and not late.short_to_target
    v = federated.FederatedComparison([shorty, late, late], [run([0.6], [1.0])] * 3, [0, 1, 2]).verdict()
    assert v.short_windows == 1 and v.detectable is None
    assert not federated.FederatedComparison([late] * 3, [run([0.6], [1.0])] * 3, [0, 1, 2]).verdict().short_windows


def test_edge_break_even_is_stated_only_when_the_saving_is_detectable():
    remote = edge.remote_cost(784)
    assert not remote.complete and math.isclose(remote.joules, network.transfer_joules(784))
    cheap = edge.edge_against_remote([1e-4, 1.1e-4, 0.9e-4], remote, one_off_joules=remote.joules * 10)
    assert cheap.detectable and cheap.break_even.uses is not None
    size, low, high = cheap.break_even_bytes()
    assert low <= size <= high and size < 784
    dearer = edge.edge_against_remote([1.0, 1.1, 0.9], remote, one_off_joules=1.0)
    assert not dearer.detectable and dearer.break_even_bytes() is None and dearer.costs_more


def test_a_recorded_data_centre_figure_joins_the_remote_cost():
    runs = [SimpleNamespace(gpu="NVIDIA H200", date="2026-05-01",
                            results=[{"label": "lesson CNN fp32, batch 4096", "joules_per_sample": 2e-5}])]
    figure = edge.datacentre_figure(runs)
    assert figure.joules_per_inference == 2e-5 and figure.gpu == "NVIDIA H200"
    remote = edge.remote_cost(100, figure)
    assert remote.complete and math.isclose(remote.joules, network.transfer_joules(100) + 2e-5)
    assert edge.datacentre_figure([]) is None


@pytest.mark.parametrize("bad, match", [([[0, 1, -1]], "splits\\[0\\].*-1"), ([[0, 1.5, 2]], "whole row"),
                                        ([torch.tensor([0.0, float("nan")])], "whole row"),
                                        ([[0, 1], [240]], "splits\\[1\\].*0..239"), ([[0, 1], []], "empty"),
                                        ([[[0, 1]]], "1-D"), ([[True, False]], "1-D")])
def test_split_indices_that_are_not_rows_are_refused(tiny, bad, match):
    ds, _ = tiny
    make = lambda: models.build("mlp", hidden=(8,))  # noqa: E731
    with pytest.raises(ValueError, match=match):
        federated.run_federated(make, ds, bad, rounds=1)
    with pytest.raises(ValueError, match=match):
        federated.label_counts(ds.train_y, bad, 10)


def test_fedavg_weights_do_not_overflow_to_zero():
    a, b = {"w": torch.tensor([1.0])}, {"w": torch.tensor([3.0])}
    out = federated.fedavg([a, b], [1e308, 1e308])
    assert out["w"].item() == pytest.approx(2.0)
    assert federated.fedavg([a, b], [3e307, 1e308])["w"].item() == pytest.approx((3 * 1 + 10 * 3) / 13)
    with pytest.raises(ValueError, match="sample_counts"):
        federated.fedavg([a, b], [float("inf"), 1.0])


def test_the_network_figure_is_applied_for_its_year_along_the_sources_trend():
    cited = network.energy_per_byte()
    assert cited.halving_years == 2 and not cited.extrapolated
    later = network.for_year(2025, cited)
    assert later.extrapolated and later.year == 2025 and later.cited_year == 2015
    assert math.isclose(later.kwh_per_gb, 0.06 / 2 ** 5)  # five halvings in ten years
    assert "EXTRAPOLATION" in later.cite() and "+10 years" in later.cite()
    assert network.for_year(2015, cited) == cited
    with pytest.raises(ValueError, match="already"):
        network.for_year(2030, later)
    with pytest.raises(ValueError, match="trend"):
        network.for_year(2020, network.NetworkFigure("k", "n", 1.0, 2015, "s", "src"))
    assert math.isclose(network.transfer_joules(1e9, later), 0.06 / 32 * 3.6e6)


def test_the_sensitivity_range_runs_from_the_trend_to_no_improvement():
    rng = network.sensitivity(2023)
    assert rng["trend"].kwh_per_gb < rng["no_improvement"].kwh_per_gb == 0.06
    assert rng["trend"].extrapolated and not rng["no_improvement"].extrapolated


def test_flips_find_the_figure_at_which_an_outcome_changes():
    # an outcome that changes at 0.003 kWh/GB: found within the 1% bisection
    found = network.flips(lambda f: "network dominates" if f.kwh_per_gb > 0.003 else "compute dominates")
    assert len(found) == 1 and found[0].below == "compute dominates" and found[0].above == "network dominates"
    assert math.isclose(found[0].kwh_per_gb, 0.003, rel_tol=0.02)
    assert network.flips(lambda f: "same") == []
    two = network.flips(lambda f: "a" if f.kwh_per_gb < 1e-4 else ("b" if f.kwh_per_gb < 0.1 else "c"))
    assert [(x.below, x.above) for x in two] == [("a", "b"), ("b", "c")]


def test_a_comparison_repriced_at_another_network_figure_keeps_its_runs():
    fig = network.energy_per_byte()

    def run(joules, per_round, one_off):
        rounds = [federated.RoundRecord(1, 0.6, joules, 1.0, per_round, [joules], [1.0])]
        return federated.FederatedRun("x", rounds, 0.5, [10], per_round, one_off, fig)

    # FedAvg: more compute, fewer bytes; centralised: less compute, a large upload
    fed = [run(j, 1_000, 0) for j in (10.0, 11.0, 12.0)]
    cen = [run(j, 0, 10**9) for j in (1.0, 1.2, 1.1)]
    cmp = federated.FederatedComparison(fed, cen, [0, 1, 2])
    assert cmp.outcome() == "FedAvg lower"  # 0.06 kWh/GB: the upload costs 216 kJ
    cheap = cmp.with_network(fig.at(1e-9))
    assert cheap.outcome() == "centralised lower"
    assert cheap.federated[0].compute_joules() == cmp.federated[0].compute_joules()
    flip = network.flips(lambda f: cmp.with_network(f).outcome())
    assert [(x.below, x.above) for x in flip][-1] == ("no detectable difference", "FedAvg lower") or \
        flip[-1].above == "FedAvg lower"
    assert all(1e-9 < x.kwh_per_gb < 0.06 for x in flip)


def test_the_edge_verdict_flips_where_sending_costs_what_the_device_does():
    from greenlab.techniques import edge

    fig = network.energy_per_byte()
    device = [1.0e-3, 1.1e-3, 0.9e-3, 1.05e-3, 0.95e-3]  # joules per prediction, mean 1 mJ

    def outcome(f):
        return edge.edge_against_remote(device, edge.remote_cost(1000, None, network=f)).outcome()

    assert outcome(fig) == "the device lower"  # 1000 bytes at 0.06 kWh/GB: 216 mJ
    assert outcome(fig.at(1e-7)) == "sending lower"
    found = network.flips(outcome)
    # sending 1000 bytes costs 1 mJ at 1e-3 / 1000 J per byte = 2.8e-4 kWh/GB: both flips bracket it
    assert [f.below for f in found] == ["sending lower", "no detectable difference"]
    assert found[0].kwh_per_gb < 1e-6 / 3.6e6 * 1e9 < found[1].kwh_per_gb
    assert "extrapolated" in edge.remote_cost(10, None, network=network.for_year(2020)).describe()


def test_compare_prints_a_line_per_repeat_and_no_inner_heartbeat(tiny, capsys, monkeypatch):
    from greenlab.base import progress

    monkeypatch.setattr(progress, "HEARTBEAT_SECONDS", 0.01)  # any inner heartbeat would print at once
    ds, splits = tiny
    make = lambda: models.build("mlp", hidden=(8,))  # noqa: E731
    comparison = federated.compare(make, ds, splits, rounds=1, repeats=2, target_accuracy=0.99)
    out = capsys.readouterr().out
    assert len(comparison.federated) == len(comparison.centralised) == 2
    assert "greenlab.federated.compare [1/2] repeat 1: FedAvg and centralised, seed 0 ..." in out
    assert "[2/2] repeat 2" in out and out.endswith(" s\n")
    assert "greenlab.federated FedAvg" not in out and "greenlab.federated centralised" not in out
    with pytest.raises(TypeError, match="show_progress"):
        federated.run_federated(make, ds, splits, rounds=1, show_progress="no")
