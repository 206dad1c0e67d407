"""``how_measured``: one phrase for how any result's energy was obtained, from its own sources."""

import pytest

from greenlab.energy import ComponentEnergy, Measurement
from greenlab.energy.flags import MeasuredFlags, PooledFlags
from greenlab.energy.provenance import combined_uncertainty, how_measured


def _component(name, joules, source, estimated, rel):
    return ComponentEnergy(component=name, source=source, joules=joules, seconds=10.0, watts=joules / 10,
                           estimated=estimated, rel_uncertainty=rel)


def _window(*components, problems=()):
    return Measurement(label="w", seconds=10.0, components={c.component: c for c in components},
                       problems=list(problems))


CPU_EST = _component("cpu", 30.0, "estimate", True, 1.0)
GPU_COUNTER = _component("gpu:0", 40.0, "nvml-counter", False, 0.05)
GPU_POWER = _component("gpu:0", 40.0, "nvml-power", False, 0.05)
RAPL = _component("cpu", 30.0, "rapl", False, 0.1)


class _Run(MeasuredFlags):
    def __init__(self, energy):
        self.energy = energy


class _Pooled(PooledFlags):
    def __init__(self, windows):
        self.windows = windows

    def measurements(self):
        return [(f"round {i}", m) for i, m in enumerate(self.windows)]


class _Comparison:
    def __init__(self, runs, partial=()):
        self.runs, self.partial = runs, list(partial)


def test_a_mixed_window_names_the_measured_and_the_estimated_part():
    text = how_measured(_window(CPU_EST, GPU_COUNTER))
    assert text == ("partly measured by the hardware's energy counters (GPU) and partly estimated from a CPU "
                    "power model (uncertain by about ±43% in all)")  # sqrt(30² + 2²) / 70
    assert how_measured(_window(CPU_EST, GPU_COUNTER), short=True) == \
        "GPU measured (energy counters), CPU an estimate (power model)"


def test_power_readings_are_not_called_counters():
    assert how_measured(_window(GPU_POWER)) == "measured from the hardware's power readings (±5%)"
    assert how_measured(_window(RAPL, GPU_POWER), short=True) == "measured (energy counters, power readings)"
    # a figure reduced over ranks joins its sources with '+'
    joined = _component("gpu", 80.0, "nvml-counter+nvml-power", False, 0.05)
    assert how_measured(_window(joined)) == "measured by the hardware's energy counters and power readings (±5%)"
    assert how_measured(_window(_component("cpu", 5.0, "estimate+rapl", True, 1.0)), short=True) == \
        "an estimate (CPU power model)"


def test_every_shape_of_result_reads_the_same_windows():
    window = _window(CPU_EST)
    expected = "estimated from a CPU power model (uncertain by about ±100%)"
    assert how_measured(window) == expected
    assert how_measured(window.to_dict()) == expected  # the results log's dict
    assert how_measured(_Run(window)) == expected  # a run holding its Measurement as energy
    assert how_measured(_Pooled([window, window])) == expected
    assert how_measured(_Comparison({"a": [_Run(window)], "b": [_Run(window)]})) == expected
    assert how_measured(_Comparison([_Run(window), _Run(window)])) == expected  # a sweep's runs in a list
    assert how_measured([_Run(window), window]) == expected


def test_several_windows_state_the_widest_band_and_any_estimate():
    both = _Pooled([_window(GPU_COUNTER), _window(CPU_EST, GPU_COUNTER)])
    assert how_measured(both).endswith("(uncertain by about ±43% in all)")
    # a comparison's cut-short run counts too: its figure was printed beside the others
    cut = _Comparison({"a": [_Run(_window(GPU_COUNTER))]}, partial=[("b", 0, _Run(_window(CPU_EST)))])
    assert how_measured(cut, short=True) == "GPU measured (energy counters), CPU an estimate (power model)"


def test_a_lost_component_makes_the_figure_a_lower_bound():
    lost = _window(GPU_COUNTER, problems=["gpu:0: read failed"])
    assert how_measured(lost).endswith("and a lower bound, since part of the energy could not be measured")
    assert how_measured(_Pooled([_window(GPU_COUNTER), lost]), short=True) == "measured (energy counters), incomplete"
    assert how_measured(_Run(lost), short=True).endswith(", incomplete")


def test_a_result_that_keeps_only_its_sources_is_described_without_a_band():
    class Idle:
        sources = {"cpu": "estimate", "gpu:0": "nvml-counter"}

    assert how_measured(Idle()) == ("partly measured by the hardware's energy counters (GPU) and partly "
                                    "estimated from a CPU power model")


@pytest.mark.parametrize("nothing", [object(), [], {"joules": 3.0}, _Run(None)])
def test_a_result_without_energy_is_refused_by_name(nothing):
    with pytest.raises(ValueError, match="carries no energy figure"):
        how_measured(nothing)


def test_a_measurement_comes_back_whole_from_its_dict():
    m = _window(CPU_EST, GPU_COUNTER, problems=["gpu:0: read failed"])
    back = Measurement.from_dict(m.to_dict())
    assert back == m and back.to_dict() == m.to_dict()


def test_uncertainties_add_in_quadrature_over_the_total():
    assert combined_uncertainty([(30.0, 1.0), (40.0, 0.05)]) == pytest.approx((30**2 + 2**2) ** 0.5 / 70)
    assert combined_uncertainty([(10.0, 0.1)]) == pytest.approx(0.1)
    assert combined_uncertainty([(0.0, 1.0)]) == 0.0  # nothing to be uncertain about
    # a 0 J window still says how uncertain its kind of figure is
    assert how_measured(_window(_component("cpu", 0.0, "estimate", True, 1.0))).endswith("(uncertain by about ±100%)")
