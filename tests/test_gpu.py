"""Real-GPU tests (marked ``gpu``): skipped without CUDA, run by ``benchmarks/gpu_suite.py``.

They read the GPU's state through NVML queries only and change nothing on it.
"""

import math
import time

import pytest
import torch


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def _load(seconds: float, n: int = 4096) -> int:
    """Matrix products on the current CUDA device for about ``seconds``; returns how many."""
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    done = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(16):
            a @ b
        torch.cuda.synchronize()
        done += 16
    return done


def _nvml_handle():
    from greenlab.energy import nvml

    lib = nvml.get_nvml()
    if not lib.available:
        pytest.fail(f"CUDA works but NVML does not: {lib.reason}")
    gpu = [g for g in lib.visible_gpus() if g.cuda_index == torch.cuda.current_device()][0]
    return lib, lib.handle(gpu.nvml_index)


def test_nvml_energy_counter_increases_under_load():
    lib, handle = _nvml_handle()
    before = lib.energy_joules(handle)
    _load(2.0)
    after = lib.energy_joules(handle)
    assert after > before
    # a busy GPU draws at least tens of watts: far more than 2 J in 2 s
    assert after - before > 2.0


def test_measure_on_cuda_reports_nvml_counter_and_positive_joules():
    import greenlab as gl

    torch.zeros(1, device="cuda")  # initialise CUDA so the window synchronises at its edges
    with gl.measure("gpu load") as m:
        _load(1.0)
    r = m.result
    component = f"gpu:{torch.cuda.current_device()}"
    assert r.sources[component] == "nvml-counter"
    assert r.components[component].joules > 0
    assert not r.components[component].estimated
    assert r.seconds >= 1.0


def _tiny_data():
    from greenlab.training import data

    return data.load("synthetic", n_train=2048, n_test=512, verbose=False)


@pytest.mark.skipif(torch.cuda.is_available() and not torch.cuda.is_bf16_supported(),
                    reason="this GPU has no bf16 support")
def test_bf16_autocast_trains_on_cuda():
    from greenlab.training import models
    from greenlab.training.loop import TrainConfig, train

    model = models.build("cnn", width=16)
    first = [p.detach().clone() for p in model.parameters()]
    res = train(model, _tiny_data(), TrainConfig(precision="bf16", batch_size=256, epochs=2, lr=0.05),
                device="cuda", log=False, save=False)
    assert res.status == "completed"
    assert res.final_accuracy is not None and res.final_accuracy > 0.2  # 10 classes: chance is 0.1
    moved = [not torch.equal(a, b.cpu()) for a, b in zip(first, model.parameters())]
    assert all(moved)
    assert all(p.dtype == torch.float32 for p in model.parameters())  # autocast keeps fp32 weights


def test_fp16_with_grad_scaler_trains_on_cuda():
    from greenlab.training import models
    from greenlab.training.loop import TrainConfig, train

    res = train(models.build("cnn", width=16), _tiny_data(),
                TrainConfig(precision="fp16", batch_size=256, epochs=2, lr=0.05),
                device="cuda", log=False, save=False)
    assert res.status == "completed"
    assert res.history and all(math.isfinite(h["loss"]) for h in res.history if h["loss"] is not None)
    assert res.final_accuracy > 0.2


def test_grad_scaler_scales_and_unscales_fp16_gradients():
    model = torch.nn.Linear(64, 10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    x = torch.randn(32, 64, device="cuda")
    y = torch.randint(0, 10, (32,), device="cuda")
    before = model.weight.detach().clone()
    with torch.autocast("cuda", dtype=torch.float16):
        out = model(x)
        assert out.dtype == torch.float16
        loss = torch.nn.functional.cross_entropy(out.float(), y)
    scaler.scale(loss).backward()
    assert scaler.get_scale() > 1.0  # gradients were computed on a scaled loss
    scaler.step(opt)
    scaler.update()
    assert not torch.equal(before, model.weight.detach())


def test_find_max_batch_on_cuda():
    batching = pytest.importorskip("greenlab.techniques.batching")
    if not hasattr(batching, "find_max_batch"):
        pytest.skip("greenlab.techniques.batching has no find_max_batch")
    from greenlab.training import models

    model = models.build("cnn", width=16).cuda()
    free, _total = torch.cuda.mem_get_info()
    # a budget well below free memory keeps the probe short and leaves the GPU to others
    budget = min(free // 4, 2 * 2**30)
    result = batching.find_max_batch(model, (1, 28, 28), device="cuda", limit=4096,
                                     memory_budget_bytes=budget)
    assert 1 <= result.batch_size <= 4096
    assert result.peak_bytes is not None and result.peak_bytes > 0


def test_peak_memory_counts_only_what_the_run_adds():
    from greenlab.training import models
    from greenlab.training.loop import TrainConfig, train

    resident = torch.empty(2**30, dtype=torch.uint8, device="cuda")  # 1 GiB already on the GPU
    res = train(models.build("cnn", width=16), _tiny_data(),
                TrainConfig(batch_size=256, epochs=1, lr=0.05), device="cuda", log=False, save=False)
    assert "above the start of the run" in res.peak_memory_kind
    assert 0 < res.peak_memory_bytes < 2**30  # the resident GiB is not counted
    del resident


def test_suite_window_on_cuda_reads_the_gpu_counter_and_is_long_enough(tmp_path):
    import sys
    from pathlib import Path
    from types import SimpleNamespace

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks import gpu_suite

    ctx = gpu_suite.Context(SimpleNamespace(dry_run=False, min_window_s=0.5, part=str(tmp_path), cache=None),
                            "carbon", 60.0)
    assert ctx.energy_ok and ctx.energy_source.startswith("nvml")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)

    def run(n):
        for _ in range(n):
            a @ a

    steps, per_step = ctx.calibrate(run)
    w = ctx.window("matmul", lambda: run(steps))
    assert w["window_ok"] and w["seconds"] >= 0.5
    assert w["joules"] is not None and w["joules"] > 0
    assert w["memory_increase_mib"] is not None and w["memory_increase_mib"] >= 0
    busy = ctx.busy(run, steps=20)
    assert 0 < busy["device_busy_fraction"] <= 1.05  # a share of the window (its size: gpu_suite)
