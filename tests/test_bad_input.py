"""Bad input to the language-model modules, the energy API, the magics and the quiz: each is
refused up front with an error that names the argument (the reproducers of a reliability review)."""

import math
import threading
import time

import pytest
import torch

import greenlab as gl
from greenlab.techniques import lm
from greenlab.techniques.lm import compiling as lm_compile, serving as lm_serve, lora
from greenlab.training import optimizers
from greenlab.base import validation
from greenlab.energy import EnergySource, IdlePower, PowerMonitor, measure

from fakes import SlopeSource


@pytest.fixture(scope="module")
def corpus():
    return lm.load_corpus(max_bytes=20_000)


def small_model():
    return lm.TinyGPT(d_model=16, n_layers=1, n_heads=2, max_seq_len=16)


# --- the shared device check -------------------------------------------------------------------


@pytest.mark.parametrize("device, kind, match", [
    ("tpu", ValueError, "'cpu', 'cuda', 'cuda:N' or 'mps'"),
    ("", ValueError, "'cpu', 'cuda', 'cuda:N' or 'mps'"),
    ("cpu:0x", ValueError, "'cpu', 'cuda', 'cuda:N' or 'mps'"),
    (3, TypeError, "a string or torch.device"),
    (None, TypeError, "a string or torch.device"),
    (["cpu"], TypeError, "a string or torch.device"),
])
def test_device_check_names_the_argument_and_the_choices(device, kind, match):
    with pytest.raises(kind, match=match) as info:
        validation.device("device", device)
    assert str(info.value).startswith("device")


def test_device_check_accepts_this_machines_devices(monkeypatch):
    assert validation.device("device", "cpu") == torch.device("cpu")
    assert validation.device("device", torch.device("cpu")) == torch.device("cpu")
    assert validation.device("device", " CPU ") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="no CUDA GPU is available here"):
        validation.device("device", "cuda")


@pytest.mark.parametrize("device", ["tpu", "", 3])
def test_train_refuses_an_unknown_device(device):
    data = gl.data.generate("synthetic", n_train=32, n_test=16, seed=0)
    with pytest.raises((ValueError, TypeError), match="device"):
        gl.train(gl.models.build("mlp"), data, gl.TrainConfig(epochs=1), device=device,
                 log=False, save=False)


@pytest.mark.parametrize("device", ["tpu", "", 3])
def test_train_lm_and_measure_compile_refuse_an_unknown_device(corpus, device):
    cfg = lm.LMConfig(seq_len=8, batch_size=2, steps=1, eval_every=1, eval_batches=1)
    with pytest.raises((ValueError, TypeError), match="device"):
        lm.train_lm(small_model(), corpus, cfg, device=device)
    with pytest.raises((ValueError, TypeError), match="device"):
        lm_compile.measure_compile(small_model(), corpus, cfg, steps=1, repeats=1, device=device)


# --- precisions and counts -----------------------------------------------------------------------


def test_evaluate_refuses_a_misspelt_or_unoffered_precision_and_no_batches(corpus):
    model = small_model()
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16, got 'fp17'"):
        lm.evaluate(model, corpus, 8, precision="fp17")
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16, got 'fp16'"):
        lm.evaluate(model, corpus, 8, precision="fp16")  # not offered: it would have run fp32
    for batches in (-1, 0):
        with pytest.raises(ValueError, match=r"batches must be an integer in \[1, "):
            lm.evaluate(model, corpus, 8, batches=batches)  # it returned -0.0
    assert math.isfinite(lm.evaluate(model, corpus, 8, batches=1, batch_size=2))


def test_train_step_refuses_a_precision_it_would_not_apply(corpus):
    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = lm.batch(corpus.train, 8, 2)
    for precision in ("fp16", "fp17", None):
        with pytest.raises(ValueError, match="precision"):
            lm.train_step(model, opt, x, y, precision=precision)


# --- whole-object arguments ----------------------------------------------------------------------


def test_language_model_functions_name_a_wrong_model_or_corpus(corpus):
    cfg = lm.LMConfig(seq_len=8, batch_size=2, steps=1, eval_every=1, eval_batches=1)
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        lm.evaluate("TinyGPT", corpus, 8)
    with pytest.raises(TypeError, match="corpus must be a greenlab.techniques.lm.corpus.Corpus"):
        lm.evaluate(small_model(), corpus.train, 8)
    with pytest.raises(TypeError, match="corpus must be a greenlab.techniques.lm.corpus.Corpus"):
        lm.train_lm(small_model(), "pydoc-topics", cfg)
    with pytest.raises(TypeError, match="config must be a greenlab.techniques.lm.training.LMConfig"):
        lm.train_lm(small_model(), corpus, {"steps": 1})
    with pytest.raises(TypeError, match="model_fn"):
        lm.compare_lm({"a": cfg}, "TinyGPT", corpus)
    with pytest.raises(TypeError, match="corpus must be"):
        lm_compile.measure_compile(small_model(), None, cfg)
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        lm.train_step_flops(object(), 8)


def test_train_step_names_a_wrong_optimizer_or_batch(corpus):
    model = small_model()
    x, y = lm.batch(corpus.train, 8, 2)
    with pytest.raises(TypeError, match="optimizer must be a torch.optim.Optimizer"):
        lm.train_step(model, "adamw", x, y)
    with pytest.raises(ValueError, match="x must be a 2-dimensional integer torch.Tensor"):
        lm.train_step(model, torch.optim.SGD(model.parameters(), lr=0.1), x.float(), y)


def test_serving_functions_name_a_wrong_model_or_prompts():
    model = small_model()
    prompts = torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(TypeError, match="model must be a greenlab.techniques.lm.gpt.TinyGPT"):
        lm_serve.generate(torch.nn.Linear(2, 2), prompts, 2)
    with pytest.raises(TypeError, match="prompts must be a 2-dimensional integer torch.Tensor"):
        lm_serve.generate(model, [[1, 2, 3]], 2)
    with pytest.raises(ValueError, match="dtype torch.float32"):
        lm_serve.generate(model, prompts.float(), 2)
    with pytest.raises(ValueError, match=r"token ids in \[0, 255\]"):
        lm_serve.generate(model, prompts + 300, 2)
    with pytest.raises(TypeError, match="model must be a greenlab.techniques.lm.gpt.TinyGPT"):
        lm_serve.measure_generation(None, prompts, 2)
    with pytest.raises(TypeError, match="model must be a greenlab.techniques.lm.gpt.TinyGPT"):
        lm_serve.kv_cache_bytes("gpt", 1, 8)
    with pytest.raises(TypeError, match="setups must be a dict"):
        lm_serve.compare_generation([model, model])
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        lm_serve.weight_bytes({"w": 1})


def test_lora_and_optimizers_name_a_wrong_object():
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        lora.add_lora("TinyGPT")
    with pytest.raises(TypeError, match="transformer blocks"):
        lora.add_lora(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="base must be a torch.nn.Linear"):
        lora.LoRALinear(torch.nn.Conv2d(1, 1, 1))
    with pytest.raises(TypeError, match=r"not the model itself"):
        optimizers.adamw(small_model(), 1e-3)
    with pytest.raises(TypeError, match="params must be an iterable of parameters"):
        optimizers.adamw(3, 1e-3)
    with pytest.raises(ValueError, match="at least one parameter"):
        optimizers.adamw([], 1e-3)
    with pytest.raises(TypeError, match="optimizer must be a torch.optim.Optimizer"):
        optimizers.state_bytes({"state": {}})


# --- the energy API --------------------------------------------------------------------------


def monitor_threads():
    return [t for t in threading.enumerate() if t.name == "greenlab-power-monitor" and t.is_alive()]


@pytest.mark.parametrize("sources, match", [
    ([None], r"sources\[0\] must be an energy source"),
    (["rapl"], r"sources\[0\] must be an energy source"),
    ("rapl", "sources must be a list of energy sources"),
    (SlopeSource(1.0), "sources must be a list of energy sources"),
    ({"cpu": SlopeSource(1.0)}, "sources must be a list of energy sources"),
])
def test_sources_of_the_wrong_kind_are_refused_before_anything_runs(sources, match):
    with pytest.raises(TypeError, match=match):
        PowerMonitor(sources=sources).start()
    with pytest.raises(TypeError, match=match):
        measure("w", sources=sources)
    assert not monitor_threads()


class DyingSource(EnergySource):
    """Reads once, then fails with an error that is not an Exception (it escapes 'except Exception')."""

    name = "rapl"

    def __init__(self):
        super().__init__("cpu")
        self.reads = 0

    def read_joules(self):
        self.reads += 1
        if self.reads > 2:
            raise SystemExit("sensor thread told to exit")
        return float(self.reads)


def test_a_monitor_thread_that_dies_sets_error_and_is_incomplete():
    mon = PowerMonitor(hz=200, sources=[DyingSource()]).start()
    deadline = time.monotonic() + 30
    while mon.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not mon.running and not monitor_threads()
    assert isinstance(mon.error, SystemExit)
    assert mon.complete is False and mon.problems


def test_a_failing_subscriber_leaves_the_trace_incomplete():
    mon = PowerMonitor(hz=200, sources=[SlopeSource(1.0)])
    mon.subscribe(lambda sample: 1 / 0)
    mon.start()
    deadline = time.monotonic() + 30
    while mon.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert isinstance(mon.error, ZeroDivisionError)
    assert mon.complete is False and "sampling stopped" in mon.problems[-1]


@pytest.mark.parametrize("watts, match", [
    ({"cpu": float("nan")}, r"watts_by_component\['cpu'\]"),
    ({"cpu": -5.0}, r"watts_by_component\['cpu'\] \(idle watts\) must be in \[0, 1e\+06\]"),
    ({"cpu": "5"}, r"watts_by_component\['cpu'\]"),
    ([5.0], "watts_by_component must be a dict"),
    ({"": 5.0}, "component names"),
])
def test_idle_power_refuses_what_is_not_a_power(watts, match):
    with pytest.raises(ValueError, match=match):
        IdlePower(watts, seconds=1.0)


def test_idle_power_refuses_a_bad_duration():
    with pytest.raises(ValueError, match="seconds"):
        IdlePower({"cpu": 5.0}, seconds=float("nan"))
    assert IdlePower({"cpu": 5.0}, seconds=1.0).watts == 5.0


def test_measure_names_an_idle_of_the_wrong_kind():
    with pytest.raises(TypeError, match="idle must be an IdlePower"):
        measure("w", idle={"cpu": 5.0}, sources=[SlopeSource(1.0)])


# --- magics and quiz files --------------------------------------------------------------------


@pytest.mark.parametrize("line", ["", "maybe", "on --pue", "on --pue abc", "on --region",
                                  "on --bogus 1", "on 'unclosed", "on --region NOWHERE", "on --pue -1"])
def test_energy_meter_magic_bad_arguments_give_the_usage(line):
    pytest.importorskip("IPython")
    from greenlab.widgets import magics

    with pytest.raises(ValueError, match=r"usage: %energy_meter on\|off \[--region CODE\] \[--pue P\]"):
        magics._parse(line, cell=False)


@pytest.mark.parametrize("line", ["--attribution both", "--label", "--pue x", "extra"])
def test_energy_cell_magic_bad_arguments_give_the_usage(line):
    pytest.importorskip("IPython")
    from greenlab.widgets import magics

    with pytest.raises(ValueError, match=r"usage: %%energy \[--region CODE\]"):
        magics._parse(line, cell=True)


@pytest.mark.parametrize("content", ["{not json", "\xff\xfe".encode("latin-1"), "[]", '{"title": "t"}',
                                     '{"title": "t", "questions": [{"kind": "single"}]}'])
def test_a_damaged_quiz_file_is_named_in_the_error(tmp_path, monkeypatch, content):
    import importlib

    quiz_module = importlib.import_module("greenlab.course.quiz")  # gl.quiz is the function

    path = tmp_path / "00_broken.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    monkeypatch.setattr(quiz_module, "_quiz_dir", lambda: tmp_path)
    with pytest.raises(ValueError) as info:
        quiz_module.load("00")
    assert str(path) in str(info.value)
