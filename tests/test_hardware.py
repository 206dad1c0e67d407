"""doctor(): runs with no driver, and describes fake GPUs and a fake RAPL tree correctly."""

import argparse
import json
import types

from greenlab.hardware import doctor, doctor_main, format_report


class NotSupported(Exception):
    pass


def fake_pynvml():
    """Two GPUs: index 0 a Volta with the energy counter, index 1 a Pascal without it."""
    gpus = [{"uuid": "GPU-v100", "arch": 5, "mj": 123_000, "name": "Tesla V100"},
            {"uuid": "GPU-p100", "arch": 4, "mj": None, "name": "Tesla P100"}]

    def energy(h):
        if h["mj"] is None:
            raise NotSupported("Not Supported")
        return h["mj"]

    def fields(h, ids):
        raise NotSupported("Not Supported")

    return types.SimpleNamespace(
        NVMLError=Exception, NVMLError_NotSupported=NotSupported, NVML_FI_DEV_POWER_INSTANT=186,
        NVML_DEVICE_ARCH_PASCAL=4, NVML_DEVICE_ARCH_VOLTA=5,
        nvmlInit=lambda: None, nvmlDeviceGetCount=lambda: len(gpus),
        nvmlDeviceGetHandleByIndex=lambda i: gpus[i], nvmlDeviceGetUUID=lambda h: h["uuid"],
        nvmlDeviceGetName=lambda h: h["name"], nvmlDeviceGetArchitecture=lambda h: h["arch"],
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=16 * 2**30),
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 300_000,
        nvmlDeviceGetTotalEnergyConsumption=energy, nvmlDeviceGetPowerUsage=lambda h: 90_000,
        nvmlDeviceGetFieldValues=fields)


def readable_rapl(root):
    for name, kind in [("intel-rapl:0", "package-0"), ("intel-rapl:0:0", "core"),
                       ("intel-rapl:0:1", "dram")]:
        d = root / name
        d.mkdir()
        (d / "name").write_text(kind)
        (d / "energy_uj").write_text("1000")
        (d / "max_energy_range_uj").write_text("262143328850")
    return root


def test_doctor_runs_without_driver_and_json_parses(capsys):
    report = doctor()
    json.dumps(report)
    assert "cpu" in report["sources"]
    assert report["cpu"]["logical_cores"] >= 1
    assert report["rapl"]["status"] in ("absent", "permission denied", "readable", "unusable")
    assert report["torch"]["device"] in ("cuda", "cpu")
    if not report["nvml"]["available"]:
        assert report["gpus"] == [] and report["problems"] == []
    assert doctor_main(argparse.Namespace(json=True)) == 0
    parsed = json.loads(capsys.readouterr().out)
    assert parsed["sources"].keys() == report["sources"].keys()
    assert doctor_main(argparse.Namespace(json=False)) == 0
    table = capsys.readouterr().out
    assert "RAPL" in table and "cpu" in table and "quick" in table


def test_doctor_with_fake_gpus_and_rapl(tmp_path):
    report = doctor(nvml_module=fake_pynvml(), rapl_root=readable_rapl(tmp_path),
                    environ={"CUDA_VISIBLE_DEVICES": "1,0"})
    g0, g1 = report["gpus"]
    assert (g0["component"], g0["name"], g0["nvml_index"]) == ("gpu:0", "Tesla P100", 1)
    assert g0["architecture"] == "pascal" and not g0["energy_counter_supported"]
    assert g0["energy_source"] == "nvml-power" and not g0["instant_power_available"]
    assert g1["architecture"] == "volta" and g1["energy_counter_supported"]
    assert g1["energy_source"] == "nvml-counter"
    assert g1["memory_gib"] == 16.0 and g1["power_limit_w"] == 300.0
    assert report["rapl"]["status"] == "readable"
    sources = {k: v["source"] for k, v in report["sources"].items()}
    assert sources == {"gpu:0": "nvml-power", "gpu:1": "nvml-counter",
                       "cpu": "rapl", "dram": "rapl"}
    assert "Tesla P100" in format_report(report)


def test_quick_mode_from_environment(tmp_path):
    kw = {"nvml_module": fake_pynvml(), "rapl_root": tmp_path / "none"}
    assert doctor(environ={"GREENLAB_QUICK": "1"}, **kw)["quick_mode"]["on"]
    assert doctor(environ={"CI": "true"}, **kw)["quick_mode"]["on"]
    assert not doctor(environ={}, **kw)["quick_mode"]["on"]
    assert not doctor(environ={"GREENLAB_QUICK": "0", "CI": "1"}, **kw)["quick_mode"]["on"]


def test_native_bf16_is_reported_from_torch(monkeypatch):
    import torch

    from greenlab import hardware

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True)
    assert hardware.cpu_has_native_bf16() is True
    report = hardware.doctor()
    assert report["cpu"]["native_bf16"] is True
    assert "native bf16: yes" in hardware.format_report(report)
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)
    assert hardware.cpu_has_native_bf16() is False
