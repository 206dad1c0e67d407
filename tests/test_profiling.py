"""greenlab.profiling: profiler rows, time split, Prometheus/CSV export, checkpoints."""

import csv
import json
import os
import re
import time

import pytest
import torch
import torch.nn as nn

from greenlab.techniques import profiling
from greenlab.training.data import generate
from greenlab.energy import PowerSample
from greenlab.training.loop import TrainConfig, train


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(4, 10))


def _batches(n=4, size=8):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(size, 1, 8, 8, generator=g), torch.randint(0, 10, (size,), generator=g))
            for _ in range(n)]


# --- profiler ---

def test_profile_steps_rows_table_and_trace(tmp_path):
    report = profiling.profile_steps(_model(), _batches(), TrainConfig(batch_size=8), steps=2,
                                     warmup=1, device="cpu")
    names = [r["name"] for r in report.rows]
    assert any("conv" in n for n in names) and "greenlab.step" in names
    selfs = [r["self_cpu_ms"] for r in report.rows]
    assert selfs == sorted(selfs, reverse=True)
    assert abs(sum(r["self_percent"] for r in report.rows) - 100.0) < 1e-6
    assert "torch.profiler" in report.table(5) and len(report.table(5).splitlines()) == 5 + 3
    path = report.export_chrome_trace(tmp_path / "sub" / "trace.json")
    events = json.loads(path.read_text())["traceEvents"]
    assert sum(e.get("name") == "greenlab.step" for e in events) == 2


def test_profile_steps_rejects_bad_arguments():
    with pytest.raises(ValueError, match="steps"):
        profiling.profile_steps(_model(), _batches(), steps=0, device="cpu")
    with pytest.raises(ValueError, match="sort_by"):
        profiling.profile_steps(_model(), _batches(), steps=1, device="cpu", sort_by="flops")


class _SlowLoader:
    """Batches that take ``delay_s`` each to produce (a stand-in for slow decoding)."""

    def __init__(self, batches, delay_s):
        self.batches, self.delay_s = batches, delay_s

    def __iter__(self):
        for b in self.batches:
            time.sleep(self.delay_s)
            yield b


def test_time_split_sees_a_slow_loader():
    slow = profiling.time_split(_model(), _SlowLoader(_batches(), 0.03), steps=4, warmup=1, device="cpu")
    assert slow.steps == 4 and slow.data_seconds >= 4 * 0.03
    assert slow.median_data_seconds >= 0.03
    fast = profiling.time_split(_model(), _batches(), steps=4, warmup=1, device="cpu")
    assert fast.steps == 4 and 0 <= fast.data_fraction <= 1 and 0 < slow.data_fraction <= 1
    assert slow.gpu_utilization_percent is None
    assert "waiting for data" in slow.summary() and "data_fraction" in slow.to_dict()


def test_time_split_on_a_greenlab_dataset():
    data = generate("synthetic", n_train=64, n_test=16, seed=0)
    split = profiling.time_split(_model(), data, TrainConfig(batch_size=16), steps=5, warmup=1, device="cpu")
    assert split.compute_seconds > 0 and 0 <= split.data_fraction <= 1


# --- Prometheus and CSV ---

def _samples():
    return [PowerSample(t_s=0.1, watts={"cpu": 10.0, "gpu:0": 100.0}, joules={"cpu": 1.0, "gpu:0": 10.0},
                        total_watts=110.0, total_joules=11.0),
            PowerSample(t_s=0.2, watts={"cpu": 12.5, "gpu:0": 150.25}, joules={"cpu": 2.25, "gpu:0": 25.0},
                        total_watts=162.75, total_joules=27.25)]


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')


def _unescape(value):
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def _parse_exposition(text):
    """Parse the text format by its rules: HELP then TYPE before a metric's samples; one sample
    per line ``name{labels} value``; label values escaped; a final newline."""
    assert text.endswith("\n")
    types, samples, current = {}, [], None
    for line in text.rstrip("\n").split("\n"):
        if line.startswith("# HELP "):
            current = line.split(" ")[2]
            assert current not in types
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name == current and kind in ("gauge", "counter")
            types[name] = kind
        else:
            m = _SAMPLE.match(line)
            assert m, line
            name, labels_text, value = m.groups()
            assert name == current and name in types
            if types[name] == "counter":
                assert name.endswith("_total")
            labels = {k: _unescape(v) for k, v in _LABEL.findall(labels_text)}
            assert ",".join(f'{k}="{v}"' for k, v in _LABEL.findall(labels_text)) == labels_text
            samples.append((name, labels, float(value)))
    return types, samples


def test_to_prometheus_follows_the_text_format():
    text = profiling.to_prometheus(_samples(), job="lab", labels={"run": 'say "hi"\\now'},
                                   sources={"cpu": "estimate", "gpu:0": "nvml-counter"})
    types, samples = _parse_exposition(text)
    assert types == {"greenlab_power_watts": "gauge", "greenlab_energy_joules_total": "counter",
                     "greenlab_power_estimated": "gauge"}
    got = {(n, s["component"]): (v, s) for n, s, v in samples}
    assert got[("greenlab_power_watts", "cpu")][0] == 12.5  # the latest sample
    assert got[("greenlab_power_watts", "gpu:0")][0] == 150.25
    assert got[("greenlab_energy_joules_total", "gpu:0")][0] == 25.0
    assert got[("greenlab_power_estimated", "cpu")][0] == 1
    assert got[("greenlab_power_estimated", "gpu:0")][0] == 0
    labels = got[("greenlab_power_watts", "cpu")][1]
    assert labels == {"job": "lab", "run": 'say "hi"\\now', "component": "cpu", "source": "estimate"}


def test_to_prometheus_with_the_reference_parser():
    parser = pytest.importorskip("prometheus_client.parser")
    text = profiling.to_prometheus(_samples(), sources={"cpu": "estimate", "gpu:0": "nvml-counter"})
    families = {f.name: f for f in parser.text_string_to_metric_families(text)}
    assert families["greenlab_power_watts"].type == "gauge"
    assert families["greenlab_energy_joules"].type == "counter"  # the parser drops _total
    values = {(s.name, s.labels["component"]): s.value for f in families.values() for s in f.samples}
    assert values[("greenlab_energy_joules_total", "cpu")] == 2.25


def test_to_prometheus_takes_a_monitor_and_handles_no_samples():
    class FakeMonitor:
        sources = {"cpu": "rapl"}

        def __init__(self, samples):
            self._samples = samples

        def samples(self):
            return list(self._samples)

    types, samples = _parse_exposition(profiling.to_prometheus(FakeMonitor(_samples())))
    assert {s["source"] for _, s, _ in samples if s["component"] == "cpu"} == {"rapl"}
    assert {s["source"] for _, s, _ in samples if s["component"] == "gpu:0"} == {"unknown"}
    types, samples = _parse_exposition(profiling.to_prometheus(FakeMonitor([])))
    assert len(types) == 3 and samples == []


@pytest.mark.parametrize("bad", [{"1x": "a"}, {"__x": "a"}, {"component": "a"}, {"a-b": "c"}])
def test_to_prometheus_rejects_bad_label_names(bad):
    with pytest.raises(ValueError, match="label name"):
        profiling.to_prometheus(_samples(), labels=bad)


def test_to_prometheus_rejects_non_samples():
    with pytest.raises(ValueError, match="PowerSample"):
        profiling.to_prometheus([1, 2])


def test_to_csv_round_trips(tmp_path):
    path = profiling.to_csv(_samples(), tmp_path / "power.csv", sources={"cpu": "estimate"})
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4
    assert rows[0] == {"t_s": "0.1", "component": "cpu", "source": "estimate", "watts": "10.0", "joules": "1.0"}
    assert float(rows[3]["watts"]) == 150.25 and rows[3]["source"] == "unknown"


# --- checkpoints ---

def _trained():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = _batches(1)[0]
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    return model, opt


def test_checkpoint_round_trip(tmp_path):
    model, opt = _trained()
    path = profiling.save_checkpoint(tmp_path / "ck.pt", model, opt, step=7, accuracy=0.5, note="hi")
    fresh = _model()
    fresh_opt = torch.optim.SGD(fresh.parameters(), lr=0.1, momentum=0.9)
    payload = profiling.load_checkpoint(path, fresh, fresh_opt)
    assert payload["step"] == 7 and payload["extra"] == {"accuracy": 0.5, "note": "hi"}
    for a, b in zip(model.parameters(), fresh.parameters()):
        assert torch.equal(a, b)
    assert fresh_opt.state_dict()["state"][0]["momentum_buffer"].abs().sum() > 0


def test_checkpoint_crash_mid_write_leaves_the_old_file(tmp_path, monkeypatch):
    model, opt = _trained()
    path = tmp_path / "ck.pt"
    profiling.save_checkpoint(path, model, opt, step=1)
    before = path.read_bytes()

    def crash(*args):
        raise OSError("simulated power cut")

    monkeypatch.setattr(profiling.os, "fsync", crash)  # after the temp file is partly written
    with pytest.raises(OSError, match="power cut"):
        profiling.save_checkpoint(path, model, opt, step=2)
    monkeypatch.undo()
    monkeypatch.setattr(profiling.os, "replace", crash)  # just before the rename
    with pytest.raises(OSError, match="power cut"):
        profiling.save_checkpoint(path, model, opt, step=3)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert profiling.load_checkpoint(path)["step"] == 1
    assert os.listdir(tmp_path) == ["ck.pt"]  # no temporary files left behind


def test_load_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        profiling.load_checkpoint(tmp_path / "missing.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="checkpoint"):
        profiling.load_checkpoint(junk)
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, other)
    with pytest.raises(ValueError, match="greenlab checkpoint"):
        profiling.load_checkpoint(other)
    profiling.save_checkpoint(tmp_path / "no_opt.pt", _model())
    with pytest.raises(ValueError, match="optimizer"):
        profiling.load_checkpoint(tmp_path / "no_opt.pt", _model(),
                                  torch.optim.SGD(_model().parameters(), lr=0.1))


def test_checkpoint_callback_with_train(tmp_path):
    data = generate("synthetic", n_train=64, n_test=16, seed=0)
    callback = profiling.CheckpointCallback(tmp_path / "run.pt", every_steps=2)
    model = _model()
    data.train_x = data.train_x[:, :, :8, :8].contiguous()
    data.test_x = data.test_x[:, :, :8, :8].contiguous()
    result = train(model, data, TrainConfig(batch_size=16, max_steps=4), callbacks=[callback],
                   device="cpu", log=False, save=False)
    assert result.steps == 4
    assert callback.saved == 3  # steps 2 and 4, then the end of the run
    fresh = _model()
    assert profiling.load_checkpoint(tmp_path / "run.pt", fresh)["step"] == 4
    for a, b in zip(model.parameters(), fresh.parameters()):
        assert torch.equal(a.cpu(), b)
