"""Lessons and library on two devices, without a GPU.

A GPU run moves the model (``gl.train`` puts it on the device); code that keeps CPU copies must
move them back before mixing. ``Elsewhere`` is a CPU tensor that behaves as if it lived on a
second device: mixing it with an ordinary tensor raises, as CUDA does, and ``.cpu()`` brings it
back. Lesson helpers are taken from the instructor notebooks and run against it.
"""

import ast
import dataclasses
import json
import types
import warnings
from pathlib import Path

import pytest
import torch
from torch.utils import _pytree as pytree

import greenlab as gl

LESSONS = Path(__file__).resolve().parent.parent / "lessons" / "instructor"


class Elsewhere(torch.Tensor):
    """A tensor on a simulated second device."""

    @classmethod
    def __torch_function__(cls, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.Tensor.cpu, torch.Tensor.__repr__, torch.Tensor.__format__):
            with torch._C.DisableTorchFunctionSubclass():
                out = func(*args, **kwargs)
            return out.as_subclass(torch.Tensor) if isinstance(out, torch.Tensor) else out
        tensors = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        if any(isinstance(a, cls) for a in tensors) and any(
                not isinstance(a, cls) and a.dim() > 0 for a in tensors):
            raise RuntimeError("Expected all tensors to be on the same device, but found at least two "
                               "devices (a simulated GPU and cpu)")
        return super().__torch_function__(func, types_, args, kwargs)


def move_elsewhere(model):
    """What ``model.to("cuda")`` does to the parameters, on the simulated device."""
    for module in model.modules():
        for name, p in list(module._parameters.items()):
            if p is not None:
                module._parameters[name] = torch.nn.Parameter(p.detach().clone().as_subclass(Elsewhere))
    return model


def lesson_function(notebook, name):
    """The source of ``def name`` from a lesson's code cells."""
    nb = json.loads((LESSONS / notebook).read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return ast.get_source_segment(source, node)
    raise AssertionError(f"{notebook} defines no {name}()")


def test_the_simulated_device_refuses_mixing_like_cuda():
    x = torch.ones(3).as_subclass(Elsewhere)
    with pytest.raises(RuntimeError, match="same device"):
        x - torch.ones(3)
    assert type(x.cpu() - torch.ones(3)) is torch.Tensor


def test_lesson02_one_step_gradients_works_when_training_moves_the_model():
    def fake_train(model, dataset, config, **kw):
        move_elsewhere(model)  # as gl.train does on a GPU machine
        with torch.no_grad():
            for p in model.parameters():
                p.sub_(config.lr * 0.25)  # an "update" of 0.25 per weight
        return None

    fake_gl = types.SimpleNamespace(train=fake_train, energy=gl.energy)
    namespace = {"gl": fake_gl, "dataclasses": dataclasses, "torch": torch, "warnings": warnings}
    exec(lesson_function("02_gradient_accumulation.ipynb", "one_step_gradients"), namespace)
    model = torch.nn.Linear(3, 2)
    grads = namespace["one_step_gradients"](model, None, gl.TrainConfig(batch_size=4))
    assert all(type(g) is torch.Tensor for g in grads)
    assert all(torch.allclose(g, torch.full_like(g, 0.25)) for g in grads)


def test_find_max_batch_refuses_a_model_on_another_device_clearly():
    model = torch.nn.Linear(4, 3).to("meta")
    with pytest.raises(ValueError, match="model is on meta.*device='cpu'"):
        gl.batching.find_max_batch(model, (4,), device="cpu", memory_budget_bytes=2**30)


def test_find_max_batch_on_a_cpu_model_without_a_budget_says_what_to_do():
    # lesson 03 on a CUDA machine once passed a CPU model and no budget
    with pytest.raises(ValueError, match="memory_budget_bytes"):
        gl.batching.find_max_batch(torch.nn.Linear(4, 3), (4,), memory_budget_bytes=None)


def test_lessons_probe_batch_sizes_with_the_model_on_the_lesson_device():
    """Every find_max_batch call in a lesson either names its device or moves the model there."""
    for path in sorted(LESSONS.glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] != "code" or "find_max_batch(" not in source:
                continue
            for call in [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)
                         and getattr(n.func, "attr", "") == "find_max_batch"]:
                text = ast.get_source_segment(source, call)
                budget = next((k.value for k in call.keywords if k.arg == "memory_budget_bytes"), None)
                if budget is None or (isinstance(budget, ast.Constant) and budget.value is None) \
                        or "None" in ast.get_source_segment(source, budget) \
                        or (isinstance(budget, ast.Name) and f"{budget.id} = None" in source):
                    assert ".to(settings.device)" in text or "device=" in text, (
                        f"{path.name}: find_max_batch without a memory budget on a CPU model fails on "
                        f"a GPU machine: {text}")


class _OnMeta(torch.nn.Module):
    """A model whose weights are on another device ("meta"): it records the device of every
    input and refuses inputs that are not on its own device, as a CUDA model does."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(3, 4, device="meta"))
        self.seen = []

    def forward(self, x):
        self.seen.append((x.device.type, self.training, torch.is_grad_enabled()))
        if x.device != self.weight.device:
            raise RuntimeError("Expected all tensors to be on the same device")
        return torch.ones(x.shape[0], 3)  # stands for the outputs, back on the host


def test_predict_runs_a_model_on_its_own_device_and_returns_outputs_beside_the_inputs():
    model = _OnMeta().train()
    x = torch.randn(10, 4)
    with pytest.raises(RuntimeError, match="same device"):
        model.eval()(x)  # what a lesson cell that calls the model on CPU data does on a GPU
    model.train()
    out = gl.models.predict(model, x, batch_size=4)
    assert out.shape == (10, 3) and out.device == x.device
    assert model.seen[1:] == [("meta", False, False)] * 3  # batches of 4, 4, 2: eval, no grad
    assert model.training  # the mode is restored


def test_predict_refuses_bad_input_clearly():
    model = torch.nn.Linear(4, 3)
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        gl.models.predict(model, [[1.0, 2.0, 3.0, 4.0]])
    with pytest.raises(ValueError, match="batch_size"):
        gl.models.predict(model, torch.randn(2, 4), batch_size=0)
    with pytest.raises(ValueError, match="at least one"):
        gl.models.predict(model, torch.randn(0, 4))
    x = torch.randn(5, 4)
    assert torch.allclose(gl.models.predict(model, x), model(x).detach())


def _direct_calls_on_dataset_tensors(source: str) -> list:
    """Calls of a model (``model(...)``, ``model.eval()(...)``) straight on a dataset's tensors
    (``data.train_x[...]``): these mix devices once gl.train has moved the model to a GPU.
    An argument moved with ``.cpu()`` is a deliberate CPU computation (a CPU model) and passes."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        arg = ast.get_source_segment(source, node.args[0]) or ""
        func = ast.get_source_segment(source, node.func) or ""
        if arg.endswith(".cpu()"):
            continue
        if (".train_x" in arg or ".test_x" in arg or ".val_x" in arg) and (
                isinstance(node.func, ast.Call) or func.split(".")[-1] in ("model", "net", "student", "teacher")):
            found.append(ast.get_source_segment(source, node))
    return found


def _lesson_cells():
    for path in sorted(LESSONS.glob("*.ipynb")):
        for index, cell in enumerate(json.loads(path.read_text())["cells"]):
            if cell["cell_type"] == "code":
                source = "".join(cell["source"])
                if not source.lstrip().startswith(("%", "!")):
                    yield path.name, index, source


@pytest.mark.parametrize("notebook", [p.name for p in sorted(LESSONS.glob("*.ipynb"))])
def test_no_lesson_calls_a_trained_model_directly_on_dataset_tensors(notebook):
    bad = [(index, call) for name, index, source in _lesson_cells() if name == notebook
           for call in _direct_calls_on_dataset_tensors(source)]
    assert bad == [], f"{notebook}: use gl.models.predict(model, x) (the model's device): {bad}"


def test_the_scan_finds_a_direct_call_and_passes_predict():
    assert _direct_calls_on_dataset_tensors("p = model.eval()(data.train_x[pool])")
    assert _direct_calls_on_dataset_tensors("p = model(ds.test_x)")
    assert not _direct_calls_on_dataset_tensors("p = gl.models.predict(model, data.train_x[pool])")
    assert not _direct_calls_on_dataset_tensors("p = cpu_model(data.test_x.cpu())")  # deliberate CPU
