"""Efficiency metrics and the energy and carbon statement (content, units, uncertainty, wording)."""

import math
import os
import re

import pytest

from greenlab.impact import carbon, report
from greenlab.energy import ComponentEnergy, Measurement
from greenlab.training.loop import RunResult


def _measurement(components, seconds=10.0, label="window"):
    return Measurement(label=label, seconds=seconds,
                       components={c.component: c for c in components})


def _component(name, joules, source, estimated, rel, model=""):
    return ComponentEnergy(component=name, source=source, joules=joules, seconds=10.0,
                           watts=joules / 10.0, estimated=estimated, rel_uncertainty=rel, model=model)


def _run(label="small", joules=7200.0, seconds=60.0, accuracy=0.8, params=20_000,
         seconds_to_target=None, target=None, estimated=True, region="WORLD"):
    energy = _measurement([_component("cpu", joules, "estimate", estimated, 0.5, "TDP x utilisation")],
                          seconds=seconds, label=label)
    return RunResult(
        status="target-reached" if seconds_to_target else "completed", label=label,
        final_accuracy=accuracy, best_accuracy=accuracy, history=[], seconds=seconds, joules=joules,
        energy=energy, seconds_to_target=seconds_to_target,
        joules_to_target=None, steps_to_target=None, co2e_g=None, region=region, steps=10, samples=1000,
        epochs_run=1, samples_per_second=1000 / seconds, train_seconds=seconds, train_cpu_seconds=seconds,
        peak_memory_bytes=None,
        peak_memory_kind="", flops={"train_total_estimate": 3e12}, params=params,
        provenance={"device": "cpu", "cpu": "Test CPU 9000", "gpu": "", "cpu_threads": 2},
        config={"target_accuracy": target})


# --- efficiency_metrics ----------------------------------------------------------------------

def test_five_metrics_for_a_run_result():
    table = report.efficiency_metrics([_run()], region="FRA")
    row = table.rows[0]
    assert row.time_s == 60.0 and row.time_basis == "whole run"
    assert row.energy_kwh == pytest.approx(7200 / 3.6e6)
    assert row.train_flops == 3e12
    assert row.co2e_g == pytest.approx(7200 / 3.6e6 * carbon.intensity("FRA").g_per_kwh)
    assert row.accuracy_per_mparam == pytest.approx(0.8 / 0.02)
    assert row.gflop_per_joule == pytest.approx(3e12 / 1e9 / 7200)
    assert row.energy_estimated and "estimate" in row.energy_source
    assert any("estimate" in n for n in table.notes)


def test_time_to_target_is_used_when_reached_and_labelled_when_not():
    reached = _run("a", seconds_to_target=12.5, target=0.7)
    missed = _run("b", target=0.99)
    table = report.efficiency_metrics([reached, missed])
    assert table["a"].time_s == 12.5 and table["a"].time_basis == "to target"
    assert table["b"].time_s == 60.0 and "no target reached" in table["b"].time_basis


def test_results_log_dicts_and_pue_and_region_defaults():
    as_dict = _run(region="FRA").to_dict()
    table = report.efficiency_metrics({"logged": as_dict}, pue=1.5)
    row = table["logged"]
    assert row.region == "FRA"
    assert row.co2e_g == pytest.approx(7200 / 3.6e6 * carbon.intensity("FRA").g_per_kwh * 1.5)
    text = table.markdown()
    assert "| logged |" in text and "(kWh)" in text and "CO2e (g)" in text
    assert "<table>" in table._repr_html_()


def test_efficiency_metrics_rejects_bad_input():
    with pytest.raises(ValueError, match="empty"):
        report.efficiency_metrics([])
    with pytest.raises(ValueError, match="RunResult"):
        report.efficiency_metrics([42])
    with pytest.raises(ValueError, match="pue"):
        report.efficiency_metrics([_run()], pue=0.9)


# --- carbon_statement ------------------------------------------------------------------------

def test_statement_content_and_units_for_a_measured_window():
    m = _measurement([_component("gpu:0", 3.6e6, "nvml-counter", False, 0.05)], seconds=3600.0, label="fine-tune")
    st = report.carbon_statement(m, region="FRA", hardware="1x test GPU")
    text = st.markdown
    grid = carbon.intensity("FRA")
    assert text.startswith("## Energy and carbon statement: fine-tune")
    assert "1x test GPU" in text
    assert "3,600 s (1 h)" in text
    assert "1 kWh (3.6 MJ)" in text
    assert "measured" in text and "`nvml-counter`" in text
    assert f"{grid.g_per_kwh:g} gCO2e/kWh" in text and str(grid.year) in text and grid.source in text
    assert "PUE:** 1 (default: the machine only" in text
    assert f"{grid.g_per_kwh:.3g} g CO2e +- 5%" in text
    assert "estimate, not a measurement" not in text
    assert st.values["co2e_g"] == pytest.approx(grid.g_per_kwh)
    assert st.values["estimated"] is False


def test_uncertainty_adds_components_in_quadrature():
    m = _measurement([
        _component("gpu:0", 300.0, "nvml-counter", False, 0.05),   # u = 15 J
        _component("cpu", 400.0, "estimate", True, 0.5),            # u = 200 J
    ])
    st = report.carbon_statement(m, region="WORLD")
    expected = math.sqrt(15.0 ** 2 + 200.0 ** 2) / 700.0
    assert st.values["energy_rel_uncertainty"] == pytest.approx(expected)
    assert st.values["co2e_rel_uncertainty"] == pytest.approx(expected)
    assert f"+- {expected:.0%}" in st.markdown
    with_grid = report.carbon_statement(m, region="WORLD", intensity_rel_uncertainty=0.1)
    assert with_grid.values["co2e_rel_uncertainty"] == pytest.approx(math.sqrt(expected ** 2 + 0.01))
    assert "The grid figure adds +-10%" in with_grid.markdown


def test_estimate_wording_and_model_are_shown():
    st = report.carbon_statement(_run(), region="WORLD")
    text = st.markdown
    assert "**Energy (estimated):**" in text
    assert "This is an estimate, not a measurement" in text
    assert "model: TDP x utilisation" in text
    assert "CPU: Test CPU 9000 (2 threads used)" in text
    assert "## Energy and carbon statement: small" in text


def test_pue_reference_is_cited_and_applied():
    ref = carbon.PUE_REFERENCES[0]
    st = report.carbon_statement(_run(), region="WORLD", pue=ref)
    assert st.values["pue"] == ref.pue
    assert ref.source in st.markdown and str(ref.year) in st.markdown
    assert st.values["co2e_g"] == pytest.approx(carbon.co2e_g(7200.0, "WORLD", ref.pue))


def test_statement_from_results_log_dict_matches_object():
    run = _run()
    assert report.carbon_statement(run.to_dict(), "FRA").markdown == report.carbon_statement(run, "FRA").markdown


def test_statement_rejects_bad_input():
    with pytest.raises(ValueError, match="RunResult"):
        report.carbon_statement({"hello": 1}, "WORLD")
    with pytest.raises(ValueError, match="unknown region"):
        report.carbon_statement(_run(), "Atlantis")
    with pytest.raises(ValueError, match="intensity_rel_uncertainty"):
        report.carbon_statement(_run(), "WORLD", intensity_rel_uncertainty=-0.1)


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path, monkeypatch):
    st = report.carbon_statement(_run(), "WORLD")
    target = tmp_path / "out" / "statement.md"
    assert st.save(target) == target
    assert target.read_text(encoding="utf-8") == st.markdown
    # a failing write leaves the old file untouched and no temporary file behind
    target.write_text("old", encoding="utf-8")

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)  # the atomic writer renames through os.replace
    with pytest.raises(OSError):
        st.save(target)
    assert target.read_text(encoding="utf-8") == "old"
    assert os.listdir(target.parent) == ["statement.md"]


def test_datasheet_efficiency_is_labelled_and_sorted():
    rows = report.datasheet_efficiency("bf16")
    assert rows and all("not a measurement" in r["kind"] for r in rows)
    assert [r["gflops_per_watt"] for r in rows] == sorted((r["gflops_per_watt"] for r in rows), reverse=True)
    for r in rows:
        assert r["gflops_per_watt"] == pytest.approx(r["peak_tflops"] * 1000 / r["tdp_w"])
    with pytest.raises(ValueError, match="precision"):
        report.datasheet_efficiency("fp8")


def test_co2e_grams_checker_matches_carbon_arithmetic():
    from greenlab.course import checks

    def right(kwh, g_per_kwh, pue):
        return carbon.co2e_g(kwh * 3.6e6, carbon.Region("X", "x", g_per_kwh, 2024, "test"), pue)

    assert checks.co2e_grams(right).passed
    no_pue = checks.co2e_grams(lambda kwh, g, pue: kwh * g)
    assert no_pue.status == "failed" and "PUE" in no_pue.text()
    assert checks.co2e_grams(lambda kwh, g, pue: None).status == "not attempted"


def test_a_small_run_s_statement_writes_plain_numbers():
    # a 0.2 s quick-mode window: '.3g' wrote its kWh and hours as 5.56e-08 and 5.56e-05
    m = _measurement([_component("cpu", 0.2, "estimate", True, 1.0, "TDP x utilisation")], seconds=0.2)
    text = report.carbon_statement(m, region="GBR").markdown
    assert re.search(r"\de[+-]?\d", text) is None, text
    assert "0.0000000556 kWh" in text and "(0.0000556 h)" in text


def test_how_measured_says_what_the_components_say():
    est = _measurement([_component("cpu", 10.0, "estimate", True, 1.0, "TDP x utilisation")])
    assert report.how_measured(est) == "estimated from a CPU power model (uncertain by about ±100%)"
    gpu = _measurement([_component("gpu:0", 100.0, "nvml-counter", False, 0.05)])
    assert report.how_measured(gpu) == "measured by the hardware's energy counters (±5%)"
    both = _measurement([_component("cpu", 30.0, "estimate", True, 1.0),
                         _component("gpu:0", 40.0, "nvml-counter", False, 0.05)])
    text = report.how_measured(both)
    assert text.startswith("partly measured") and "CPU power model" in text and "±43%" in text  # sqrt(30²+2²)/70
    lost = Measurement(label="w", seconds=10.0, components=gpu.components, problems=["gpu:0: read failed"])
    assert report.how_measured(lost).endswith("since part of the energy could not be measured")
    assert report.how_measured(_run()).startswith("estimated from a CPU power model")
