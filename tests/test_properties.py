"""Property-based tests of the public API (hypothesis, derandomized so CI is reproducible).

Two kinds: good inputs keep their promises (round trips, linearity, ranking order), and bad
inputs are refused clearly: ``benchmarks/fuzz_inputs.py`` (12 bad inputs for each of its entry
points here, whole objects of the wrong kind among them, and calls whose arguments are extreme
only together) must answer every one with a ValueError/TypeError naming the argument. Sized to
run in about half a minute on two cores;
``python benchmarks/fuzz_inputs.py --examples 40`` is the large run.
"""

import importlib.util
import itertools
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greenlab.impact import carbon
from greenlab.course import checks
from greenlab.techniques import profiling
from greenlab.base import results, tables, units, validation
from greenlab.techniques.batching.schedules import linear_scaling_lr
from greenlab.course.leaderboard import Leaderboard
from greenlab.training.loop import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
FAST = settings(max_examples=60, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
finite = st.floats(allow_nan=False, allow_infinity=False)
non_negative = st.floats(min_value=0, max_value=1e15, allow_nan=False)
_fresh = itertools.count()  # a new file per example (hypothesis seeds `random`, so not that)


def _load_fuzz():
    spec = importlib.util.spec_from_file_location("fuzz_inputs", ROOT / "benchmarks" / "fuzz_inputs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_inputs"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


# --- bad inputs: refused clearly ------------------------------------------------------------

def test_fuzz_every_bad_input_is_refused_naming_its_argument(tmp_path, monkeypatch):
    monkeypatch.setenv("GREENLAB_RESULTS_DIR", str(tmp_path / "results"))
    fuzz = _load_fuzz()
    record = fuzz.fuzz(examples=12, tmp=tmp_path)
    totals, text = fuzz.summary(record)
    assert len(record) >= 110
    assert sum(totals.values()) >= 1300
    for module in ("lm.", "lm_serve.", "lm_compile.", "lora.", "optimizers.", "datacache.", "magics",
                   "hardware.", "energy.IdlePower",  # every module added since the fuzzer was written
                   # and lessons 11, 13-15's
                   "preemption.", "cluster.", "tuning.", "hogwild.", "federated.", "storage.", "monitoring.",
                   "idle.", "network.", "edge.", "sharding_run.", "greenlab leaderboard show", "apple.", "amd.",
                   # the checkers, the vendor sources, the course tools and the rest of gl.*
                   "rapl.", "nvml.", "roofline.", "gl.compare", "gl.quiz", "gl.headline", "course nbgrader export",
                   "course grade", "course results", "greenlab leaderboard verify"):
        assert any(name.startswith(module) for name in record), module
    import greenlab as gl

    checkers = {n for n in gl.check.__all__ if callable(getattr(gl.check, n))
                and not isinstance(getattr(gl.check, n), type) and n not in fuzz.CHECK_NOT_CALLED}
    assert {f"check.{n}" for n in checkers} <= set(record)  # every checker, given wrong answers
    assert len(record["extreme together"]) >= 15  # valid one by one, extreme together
    assert totals["clear"] == sum(totals.values()), text


def test_fuzz_every_public_callable_is_enumerated_and_a_sample_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("GREENLAB_RESULTS_DIR", str(tmp_path / "results"))
    fuzz = _load_fuzz()
    eps, skipped = fuzz.every_entry_points(tmp_path)
    import greenlab as gl

    # every callable gl.* exports is fuzzed or named with the reason it is not
    assert {ep.name[3:] for ep in eps} | set(skipped) == set(fuzz.public_callables())
    commands = {" ".join(words) for words in fuzz.cli_commands()}  # read from greenlab --help, nested too
    assert {"doctor", "measure", "run", "data fetch", "data status", "leaderboard show", "lab"} <= commands
    assert "--batch-size" in fuzz.cli_options(["run"])
    record, _ = fuzz.fuzz_every(tmp_path, sample=40)  # a small, evenly spread sample: seconds
    assert sum(len(rows) for rows in record.values()) == 40
    for label, value in fuzz.STANDARD_BAD[:4]:  # NaN, inf, -1, a wrong type: once silent, now refused by name
        assert fuzz.classify_call(fuzz.EntryPoint("gl.measure", gl.measure, {}, {}), {"sync": value}, ["sync"])[0] == "clear"
        assert fuzz.classify_call(fuzz.EntryPoint("gl.format_energy", gl.format_energy, {"joules": 1.0}, {}),
                                  {"joules": 1.0, "small_units": value}, ["small_units"])[0] == "clear"
    assert fuzz.classify_call(fuzz.EntryPoint("gl.budget", gl.budget, {}, {}), {"full": math.inf, "quick": 1},
                              ["full"])[0] == "clear"
    assert fuzz.classify_call(fuzz.EntryPoint("gl.doctor", gl.doctor, {}, {}), {"rapl_root": 1.5}, ["rapl_root"])[0] == "clear"
    for arg in ("sources", "problems"):
        assert fuzz.classify_call(fuzz.EntryPoint("gl.IdlePower", gl.IdlePower, {}, {}),
                                  {"watts_by_component": {"cpu": 1.0}, "seconds": 1.0, arg: math.nan}, [arg])[0] == "clear"


@FAST
@given(st.one_of(finite, st.just(math.nan), st.just(math.inf), st.integers(), st.text(max_size=3), st.none()))
def test_validation_number_accepts_exactly_its_range(value):
    inside = (isinstance(value, (int, float)) and not isinstance(value, bool)
              and math.isfinite(value) and 0 < value <= 1)
    if inside:
        assert validation.number("x", value, low=0, high=1, low_open=True) == float(value)
    else:
        with pytest.raises(ValueError, match=r"^x must be"):  # TypeErrors here are ValueErrors too
            validation.number("x", value, low=0, high=1, low_open=True)


@FAST
@given(st.builds(dict, lr=st.floats(min_value=1e-6, max_value=100), momentum=st.floats(min_value=0, max_value=0.99),
                 batch_size=st.integers(1, 4096), epochs=st.integers(1, 50), seed=st.integers(0, 2**63 - 1),
                 stop_at_target=st.booleans(),
                 target_accuracy=st.one_of(st.none(), st.floats(min_value=0.01, max_value=1)),
                 region=st.sampled_from(["WORLD", "FRA", "FR", "uk", "Poland"])))
def test_valid_train_configs_are_kept_as_given(kw):
    cfg = TrainConfig(**kw)
    for key, value in kw.items():
        assert getattr(cfg, key) == value
    assert json.loads(json.dumps(cfg.to_dict()))["lr"] == kw["lr"]


# --- good inputs: promises kept -------------------------------------------------------------

@FAST
@given(non_negative, non_negative, st.floats(min_value=1, max_value=3),
       st.sampled_from([r.code for r in carbon.regions()]))
def test_co2e_is_linear_in_energy_and_pue(a, b, pue, region):
    together = carbon.co2e_g(a + b, region)
    assert together == pytest.approx(carbon.co2e_g(a, region) + carbon.co2e_g(b, region), rel=1e-9, abs=1e-12)
    assert carbon.co2e_g(a, region, pue=pue) == pytest.approx(pue * carbon.co2e_g(a, region), rel=1e-12, abs=1e-12)


def test_every_region_is_found_by_code_name_and_iso_alpha2():
    table = tables.read_table(ROOT / "greenlab" / "cited_tables" / "iso3166_alpha2.csv",
                              ("alpha2", "alpha3", "name", "source", "year"))
    codes = {r.code for r in carbon.regions()}
    for row in table:
        assert row["alpha3"] in codes, row  # every two-letter code leads to a row of the table
        assert carbon.intensity(row["alpha2"].lower()).code == row["alpha3"]
    for r in carbon.regions():
        assert carbon.intensity(r.code.lower()) == r and carbon.intensity(r.name.upper()) == r


@FAST
@given(finite.filter(lambda v: abs(v) < 1e300))
def test_unit_conversions_round_trip(x):
    assert units.kwh_to_joules(units.joules_to_kwh(x)) == pytest.approx(x, rel=1e-12, abs=1e-300)
    assert units.wh_to_joules(units.joules_to_wh(x)) == pytest.approx(x, rel=1e-12, abs=1e-300)
    assert units.kg_to_g(units.g_to_kg(x)) == pytest.approx(x, rel=1e-12, abs=1e-300)


_SCALES = {"MJ": 1e6, "kJ": 1e3, "J": 1.0, "mJ": 1e-3, "µJ": 1e-6, "t": 1e6, "kg": 1e3, "g": 1.0, "mg": 1e-3}


@FAST
@given(st.floats(min_value=1e-9, max_value=1e13))
def test_readable_figures_never_use_an_exponent_and_read_back_within_rounding(x):
    for text in (units.format_energy(x), units.format_energy(x, small_units=True), carbon.format_mass(x)):
        number, unit = text.split(" ")
        assert "e" not in number, text
        assert float(number.replace(",", "")) * _SCALES[unit] == pytest.approx(x, rel=0.0051), text


@FAST
@given(st.floats(min_value=1e-6, max_value=10), st.integers(1, 4096), st.integers(1, 4096))
def test_linear_scaling_lr_is_proportional(lr, base, batch):
    assert linear_scaling_lr(lr, base, batch) == pytest.approx(lr * batch / base)


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**53, 2**53), st.floats(), st.text(max_size=8))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                             st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                          max_leaves=10)


def _nan_to_none(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    return value


@FAST
@given(st.dictionaries(st.text(max_size=5), json_value, max_size=4))
def test_results_log_round_trips_any_plain_record(tmp_path, record):
    path = tmp_path / f"log-{next(_fresh)}.jsonl"
    results.append(record, path=path)
    assert results.load(path) == [_nan_to_none(record)]


plain_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**62, 2**62), st.floats(allow_nan=False),
                       st.text(max_size=6), st.floats(allow_nan=False, width=32).map(np.float32),
                       st.integers(-2**31, 2**31).map(np.int64))
plain_value = st.recursive(plain_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.tuples(inner, inner), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=8)


def _as_python(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list):
        return [_as_python(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_as_python(v) for v in value)
    if isinstance(value, dict):
        return {k: _as_python(v) for k, v in value.items()}
    return value


@settings(max_examples=15, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.text(min_size=1, max_size=5).filter(str.isidentifier), plain_value, max_size=3))
def test_checkpoint_extras_round_trip_as_plain_python(tmp_path, extra):
    extra.pop("step", None)
    model = torch.nn.Linear(2, 2)
    path = profiling.save_checkpoint(tmp_path / "ck.pt", model, step=3, **extra)
    loaded = profiling.load_checkpoint(path)["extra"]
    assert loaded == _as_python(extra)
    assert not any(isinstance(v, np.generic) for v in loaded.values())


@settings(max_examples=12, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.floats(0, 1e4), st.floats(0, 1), st.booleans()), min_size=1, max_size=5))
def test_leaderboard_ranks_reached_targets_first_by_energy(tmp_path, runs):
    board = Leaderboard(tmp_path / f"b-{next(_fresh)}.json")
    for i, (joules, accuracy, reached) in enumerate(runs):
        board.add(f"run{i}", joules=joules, seconds=1.0, accuracy=accuracy, co2e_g=0.0,
                  target_accuracy=0.5 if reached else None, joules_to_target=joules if reached else None)
    ranked = board.ranked()
    flags = [bool(e["target_reached"]) for e in ranked]
    assert flags == sorted(flags, reverse=True)
    energies = [e["joules_to_target"] for e in ranked if e["target_reached"]]
    assert energies == sorted(energies)
    assert [e["rank"] for e in ranked] == list(range(1, len(runs) + 1))


odd_answers = st.one_of(
    st.integers(min_value=-10**400, max_value=10**400), st.floats(), st.complex_numbers(),
    st.text(max_size=3), st.none(), st.lists(st.integers(min_value=-10**400, max_value=10**400), max_size=3),
    st.sampled_from([torch.tensor([1 + 1j]), torch.empty(2, device="meta"), torch.tensor(float("nan")),
                     np.array([10**30], dtype=object), object()]))


@FAST
@given(odd_answers, st.sampled_from([1.0, [1.0, 2.0], math.inf]))
def test_checkers_never_raise_for_an_odd_answer(answer, expected):
    result = checks.check_close("x", answer, expected)
    assert result.status in (checks.PASSED, checks.FAILED, checks.NOT_ATTEMPTED)
    function = checks.check_function(lambda *a: answer, [((1.0,), expected)], name="f")
    assert function.status in (checks.PASSED, checks.FAILED, checks.NOT_ATTEMPTED)


@settings(max_examples=30, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4), st.integers(0, 10**6))
def test_a_damaged_carbon_table_is_read_or_refused_naming_the_file(tmp_path, flips, cut):
    raw = bytearray((ROOT / "greenlab" / "cited_tables" / "carbon_intensity.csv").read_bytes())
    for where, byte in flips:
        raw[where % len(raw)] = byte
    path = tmp_path / "carbon_intensity.csv"
    path.write_bytes(bytes(raw[: max(1, cut % (len(raw) + 1))]))
    try:
        rows = tables.read_table(path, ("code", "name", "g_co2e_per_kwh", "year", "source"))
    except tables.DataTableError as exc:
        assert str(path) in str(exc)
    else:
        assert all(r["code"] and r["source"] for r in rows)
