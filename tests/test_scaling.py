"""Tests for greenlab.scaling: scaling arithmetic, GPU table, checklist."""

import pytest

from greenlab.impact import carbon, scaling

A100 = "NVIDIA A100 SXM 80GB"


# --- arithmetic ---------------------------------------------------------------------


def test_perfect_scaling_wastes_nothing():
    r = scaling.cost_benefit(A100, 8, 16.0, 1.0, watts_per_device=300.0)
    assert r.wall_hours == pytest.approx(2.0)
    assert r.device_hours == pytest.approx(16.0)
    assert r.energy_kwh == pytest.approx(300.0 * 16.0 / 1000.0)
    assert r.wasted_energy_kwh == pytest.approx(0.0)
    assert r.speedup == pytest.approx(8.0)
    assert r.power_source == "measured"


def test_half_efficiency_doubles_energy():
    perfect = scaling.cost_benefit(A100, 4, 10.0, 1.0, watts_per_device=250.0)
    half = scaling.cost_benefit(A100, 4, 10.0, 0.5, watts_per_device=250.0)
    assert half.energy_kwh == pytest.approx(2 * perfect.energy_kwh)
    assert half.wasted_energy_kwh == pytest.approx(perfect.energy_kwh)
    assert half.wall_hours == pytest.approx(5.0)


def test_default_power_is_labelled_tdp_estimate():
    spec = scaling.gpu(A100)
    r = scaling.cost_benefit(spec, 1, 1.0, 1.0)
    assert r.watts_per_device == pytest.approx(spec.tdp_w * scaling.DEFAULT_POWER_FRACTION)
    assert r.power_source.startswith("estimate")
    assert any("estimate" in n for n in r.notes)


def test_cost_uses_price_and_is_none_without_one():
    r = scaling.cost_benefit(A100, 2, 3.0, 0.75, watts_per_device=100.0, price_per_device_hour=2.0)
    assert r.cost_usd == pytest.approx(2.0 * 3.0 / 0.75)
    assert scaling.cost_benefit(A100, 2, 3.0, 0.75, watts_per_device=100.0).cost_usd is None


def test_co2e_matches_carbon_module():
    r = scaling.cost_benefit(A100, 2, 5.0, 0.8, region="FRA", pue=1.2, watts_per_device=400.0)
    expected = carbon.co2e_g(r.energy_kwh * 3.6e6, "FRA", pue=1.2)
    assert r.co2e_g == pytest.approx(expected)
    assert r.region == "FRA" and r.pue == 1.2


def test_sweep_counts_and_single_device_efficiency():
    results = scaling.sweep(A100, counts=[1, 2, 4, 8], single_device_hours=8.0, scaling_efficiency=0.5,
                            watts_per_device=100.0)
    assert [r.n_devices for r in results] == [1, 2, 4, 8]
    assert results[0].scaling_efficiency == 1.0 and results[0].wasted_energy_kwh == pytest.approx(0.0)
    assert [r.wall_hours for r in results[1:]] == pytest.approx([8.0, 4.0, 2.0])


def test_sweep_accepts_efficiency_function():
    results = scaling.sweep(A100, counts=[1, 2, 4], scaling_efficiency=lambda n: 1.0 / n ** 0.5,
                            watts_per_device=100.0)
    energies = [r.energy_kwh for r in results]
    assert energies == sorted(energies)


def test_scaling_efficiency_from_times():
    assert scaling.scaling_efficiency(100.0, 25.0, 4) == pytest.approx(1.0)
    assert scaling.scaling_efficiency(100.0, 50.0, 4) == pytest.approx(0.5)


# --- bad input ----------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, -2, 1.5, True])
def test_bad_device_count(n):
    with pytest.raises(ValueError, match="n_devices"):
        scaling.cost_benefit(A100, n, 1.0, 1.0)


@pytest.mark.parametrize("eff", [0.0, -0.1, 1.01, float("nan")])
def test_efficiency_outside_unit_interval(eff):
    with pytest.raises(ValueError, match="scaling_efficiency"):
        scaling.cost_benefit(A100, 2, 1.0, eff)


@pytest.mark.parametrize("hours", [-1.0, 0.0, float("inf")])
def test_bad_hours(hours):
    with pytest.raises(ValueError, match="single_device_hours"):
        scaling.cost_benefit(A100, 2, hours, 0.9)


def test_bad_power_inputs():
    with pytest.raises(ValueError, match="watts_per_device"):
        scaling.cost_benefit(A100, 2, 1.0, 0.9, watts_per_device=-5)
    with pytest.raises(ValueError, match="utilisation_power_fraction"):
        scaling.cost_benefit(A100, 2, 1.0, 0.9, utilisation_power_fraction=1.5)
    with pytest.raises(ValueError, match="price"):
        scaling.cost_benefit(A100, 2, 1.0, 0.9, price_per_device_hour=-1.0)


def test_bad_measured_times():
    with pytest.raises(ValueError):
        scaling.scaling_efficiency(0.0, 1.0, 2)
    with pytest.raises(ValueError):
        scaling.scaling_efficiency(1.0, 1.0, 0)


def test_scenario_wraps_cost_benefit():
    scenario = scaling.ScalingScenario(gpu=A100, n_devices=2, single_device_hours=4.0, scaling_efficiency=0.8,
                                       watts_per_device=100.0)
    assert scenario.result() == scaling.cost_benefit(A100, 2, 4.0, 0.8, watts_per_device=100.0)


# --- GPU table ------------------------------------------------------------------------


def test_gpu_table_integrity():
    table = scaling.gpus()
    names = [g.name for g in table]
    assert len(set(names)) == len(names)
    for wanted in ["T4", "V100", "A10", "A100 SXM 40GB", "A100 SXM 80GB", "L4", "L40S", "H100 SXM", "H200", "RTX 4090"]:
        assert any(wanted in n for n in names), wanted
    for g in table:
        assert 30 <= g.tdp_w <= 1200 and 8 <= g.memory_gb <= 200 and 2015 <= g.year <= 2030
        assert g.spec_source and g.spec_checked in {"yes", "partial", "no"}
        if g.price_usd_per_hour is not None:
            assert g.price_date and g.price_source
        for dense in (g.tf32_tflops, g.bf16_tflops):
            if dense is not None:
                assert dense >= g.fp32_tflops * 0.99  # tensor paths are at least FP32 rate


def test_dense_figures_not_sparse_for_h100_and_a100():
    assert scaling.gpu("H100 SXM 80GB").bf16_tflops == pytest.approx(989.4)
    assert scaling.gpu("a100-sxm-80gb").bf16_tflops == pytest.approx(312.0)


def test_unknown_gpu_names_close_matches():
    with pytest.raises(ValueError) as info:
        scaling.gpu("A100 80")
    assert "A100" in str(info.value)


# --- checklist ------------------------------------------------------------------------

ALL_NO = {
    "fits_on_one_device": "yes",
    "single_device_time": "minutes",
    "time_criticality": "flexible",
    "hardware_budget": "none",
    "engineering_budget": "none",
    "skills": "none",
    "single_device_optimised": "no",
}


def test_questions_are_data_with_reasons():
    keys = [q.key for q in scaling.SCALE_OUT_QUESTIONS]
    assert len(keys) == len(set(keys)) >= 5
    for q in scaling.SCALE_OUT_QUESTIONS:
        assert q.text.endswith("?") and len(q.options) >= 2
        for weight, reason in q.options.values():
            assert isinstance(weight, int) and reason


def test_small_quick_job_stays_on_one_device():
    rec = scaling.recommend(ALL_NO)
    assert rec.decision == "stay on one device" and rec.score < 0
    assert len(rec.reasons) == len(scaling.SCALE_OUT_QUESTIONS)
    assert "stay on one device" in rec.text


def test_model_that_does_not_fit_must_scale_out():
    rec = scaling.recommend({**ALL_NO, "fits_on_one_device": "no"})
    assert rec.decision == "scale out"


def test_long_critical_well_resourced_job_scales_out():
    answers = {
        "fits_on_one_device": "yes",
        "single_device_time": "weeks",
        "time_criticality": "critical",
        "hardware_budget": "ample",
        "engineering_budget": "ample",
        "skills": "experienced",
        "single_device_optimised": "yes",
    }
    rec = scaling.recommend(answers)
    assert rec.decision == "scale out" and rec.score >= 3


def test_middle_score_suggests_a_test():
    answers = {**ALL_NO, "single_device_time": "days", "time_criticality": "important", "hardware_budget": "some",
               "engineering_budget": "some", "skills": "some", "single_device_optimised": "yes"}
    rec = scaling.recommend(answers)
    assert 0 <= rec.score <= 2 and rec.decision == "try a small test first"


def test_checklist_bad_answers():
    with pytest.raises(ValueError, match="missing"):
        scaling.recommend({"skills": "none"})
    with pytest.raises(ValueError, match="one of"):
        scaling.recommend({**ALL_NO, "skills": "guru"})
    with pytest.raises(ValueError, match="unknown"):
        scaling.recommend({**ALL_NO, "colour": "blue"})


def test_default_power_fraction_is_labelled_a_whole_node_ratio():
    default = scaling.cost_benefit("NVIDIA A100 SXM 80GB", 2, 10.0, 0.9)
    assert any("whole-node ratio" in n for n in default.notes)
    own = scaling.cost_benefit("NVIDIA A100 SXM 80GB", 2, 10.0, 0.9, utilisation_power_fraction=0.5)
    assert not any("whole-node" in n for n in own.notes)


def test_ring_all_reduce_sums_uneven_chunks_and_rejects_bad_input():
    import torch

    tensors = [torch.arange(10.0) * (r + 1) for r in range(3)]
    summed, sent = scaling.ring_all_reduce(tensors)
    assert all(torch.equal(s, torch.arange(10.0) * 6) for s in summed)
    assert sum(sent) == 2 * 2 * 40  # every chunk goes round twice (N - 1 hops each phase), 4 B per value
    with pytest.raises(ValueError, match="same shape"):
        scaling.ring_all_reduce([torch.zeros(3), torch.zeros(4)])
    with pytest.raises(ValueError, match="at least one"):
        scaling.ring_all_reduce([])


def test_fit_energy_per_device_hour_is_the_slope_through_zero():
    assert scaling.fit_energy_per_device_hour([1.0, 2.0], [10.0, 20.0]) == pytest.approx(10.0)
    with pytest.raises(ValueError, match="same, non-zero length"):
        scaling.fit_energy_per_device_hour([1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        scaling.fit_energy_per_device_hour([0.0], [1.0])
