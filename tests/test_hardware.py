"""doctor(): runs with no driver, and describes fake GPUs and a fake RAPL tree correctly."""

import argparse
import json
import types

import pytest

from greenlab.cli.doctor import doctor_main
from greenlab.session.hardware import doctor, format_report


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


def test_quick_mode_from_environment(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    kw = {"nvml_module": fake_pynvml(), "rapl_root": tmp_path / "none"}
    assert doctor(environ={"GREENLAB_QUICK": "1"}, **kw)["quick_mode"]["on"]
    assert doctor(environ={"CI": "true"}, **kw)["quick_mode"]["on"]
    no_gpu = doctor(environ={}, **kw)["quick_mode"]
    assert no_gpu["on"] and "no GPU" in no_gpu["reason"]
    assert not doctor(environ={"GREENLAB_QUICK": "0", "CI": "1"}, **kw)["quick_mode"]["on"]


def test_native_bf16_is_reported_from_cpu_flags(monkeypatch):
    import torch

    from greenlab.session import hardware

    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setattr(hardware, "_cpu_flags", lambda: {"sse2", "avx2", "avx512f", "avx512_bf16"})
    assert hardware.cpu_has_native_bf16() is True
    assert hardware.cpu_has_native_fp16() is False
    report = hardware.doctor()
    assert report["cpu"]["native_bf16"] is True and report["cpu"]["native_fp16"] is False
    table = hardware.format_report(report)
    assert "native bf16: yes, native fp16: no" in table
    assert "native 16-bit on cpu: bf16 yes, fp16 no" in table
    monkeypatch.setattr(hardware, "_cpu_flags", lambda: {"sse2", "avx2", "avx512f"})
    assert hardware.cpu_has_native_bf16() is False


X86_BF16 = {"sse2", "avx2", "avx512f", "avx512_bf16"}


@pytest.mark.parametrize("env,aten,native", [
    ({}, "AVX512", True),
    ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, "AVX512", False),
    ({"ONEDNN_MAX_CPU_ISA": "avx512_core"}, "AVX512", False),   # AVX-512 without BF16: emulated
    ({"DNNL_MAX_CPU_ISA": "AVX2"}, "AVX512", False),            # oneDNN's older name
    ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}, "AVX512", True),
    ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}, "AVX512", True),
    ({"ONEDNN_MAX_CPU_ISA": "ALL"}, "AVX512", True),
    ({}, "AVX2", False),                                        # ATEN_CPU_CAPABILITY=avx2
    ({}, "DEFAULT", False),
])
def test_bf16_emulation_overrides_are_honoured(monkeypatch, env, aten, native):
    import torch

    from greenlab.session import hardware

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: aten)
    support = hardware.precision_support("bf16", "cpu", environ=env, cpu_flags=X86_BF16)
    assert support.native is native
    if native:
        assert "native" in support.note()
    else:
        assert support.note().startswith("bf16 is emulated on this CPU (")
        assert "the slowdown is the emulation's" in support.note() and "a prediction" in support.note()


def test_cpu_without_bf16_or_fp16_flags_and_arm_flags(monkeypatch):
    import torch

    from greenlab.session import hardware

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    plain = hardware.native_precisions("cpu", environ={}, cpu_flags={"sse2", "avx2", "avx512f"})
    assert plain == {"bf16": False, "fp16": False}
    assert "no AVX-512 BF16 or AMX" in hardware.precision_support("bf16", environ={}, cpu_flags={"avx2"}).reason
    sapphire = {"sse2", "avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16"}
    assert hardware.native_precisions("cpu", environ={}, cpu_flags=sapphire) == {"bf16": True, "fp16": True}
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")  # no AVX on Arm
    graviton3 = {"fp", "asimd", "asimdhp", "bf16", "sve"}
    assert hardware.native_precisions("cpu", environ={"ONEDNN_MAX_CPU_ISA": "AVX2"},
                                      cpu_flags=graviton3) == {"bf16": True, "fp16": True}
    assert hardware.native_precisions("cpu", environ={}, cpu_flags={"fp", "asimd"}) == {"bf16": False,
                                                                                       "fp16": False}


def test_cpu_without_a_flag_list_asks_onednn(monkeypatch):
    import torch

    from greenlab.session import hardware

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setattr(hardware, "_cpu_flags", lambda: set())
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True)
    assert hardware.cpu_has_native_bf16(environ={}) is True
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)
    assert hardware.cpu_has_native_bf16(environ={}) is False


@pytest.mark.parametrize("capability,bf16,fp16,cores", [
    ((9, 0), True, True, True),     # H100
    ((8, 0), True, True, True),     # A100
    ((7, 5), False, True, True),    # T4
    ((7, 0), False, True, True),    # V100
    ((6, 0), False, True, False),   # P100: fast fp16, no tensor cores
    ((6, 1), False, False, False),  # GTX 10xx: fp16 at a fraction of the fp32 rate
])
def test_cuda_precisions_follow_compute_capability(capability, bf16, fp16, cores):
    from greenlab.session import hardware

    support = hardware.native_precisions("cuda:0", cuda_capability=capability)
    assert support == {"bf16": bf16, "fp16": fp16}
    assert hardware.cuda_tensor_cores(cuda_capability=capability) is cores
    assert str(capability[0]) in hardware.precision_support("bf16", "cuda", cuda_capability=capability).reason


def test_cuda_without_a_gpu_and_mps_through_mocks(monkeypatch):
    import torch

    from greenlab.session import hardware

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert hardware.precision_support("bf16", "cuda").native is False
    assert hardware.cuda_tensor_cores() is False
    monkeypatch.setattr(torch.backends.mps, "is_macos_or_newer", lambda major, minor: major <= 13)
    assert hardware.native_precisions("mps") == {"bf16": False, "fp16": True}
    monkeypatch.setattr(torch.backends.mps, "is_macos_or_newer", lambda major, minor: True)
    assert hardware.native_precisions("mps") == {"bf16": True, "fp16": True}
    assert hardware.precision_support("fp32", "mps").native
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16, fp16"):
        hardware.precision_support("int4", "cpu")
    with pytest.raises(ValueError, match="'cpu', 'cuda', 'cuda:N' or 'mps'"):
        hardware.precision_support("bf16", "tpu")


def test_doctor_reports_the_chosen_device_and_its_precisions(monkeypatch, tmp_path):
    import torch

    from greenlab.session import hardware

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.mps, "is_macos_or_newer", lambda major, minor: True)
    report = hardware.doctor(nvml_module=fake_pynvml(), rapl_root=tmp_path / "none", environ={})
    assert report["torch"]["device"] == "mps"
    assert report["torch"]["native_precisions"] == {"bf16": True, "fp16": True}
    assert report["quick_mode"]["on"] and "MPS" in report["quick_mode"]["reason"]
    assert "native 16-bit on mps: bf16 yes, fp16 yes" in hardware.format_report(report)


def test_doctor_states_whose_energy_is_counted(tmp_path):
    report = doctor(nvml_module=fake_pynvml(), rapl_root=tmp_path / "none", environ={})
    energy = report["energy"]
    assert energy["attribution"] == "process" and energy["cpus"] > 0
    assert report["sources"]["cpu"]["attribution"] == "process"
    assert report["sources"]["gpu:0"]["attribution"] == "device"
    table = format_report(report)
    assert "CPU estimate attribution: process" in table and "GPUs counted: the ones the work uses" in table
    assert "estimate, +-100%, process" in table


def test_doctor_names_a_mig_instance_and_its_policy(tmp_path):
    report = doctor(nvml_module=fake_pynvml(), rapl_root=tmp_path / "none",
                    environ={"CUDA_VISIBLE_DEVICES": "MIG-1a2b3c"})
    (gpu,) = report["gpus"]
    assert gpu["name"] == "MIG instance MIG-1a2b3c" and gpu["energy_source"] is None
    assert any("MIG instance" in p and "not measured" in p for p in report["problems"])
