"""What this machine has and how greenlab will measure it: ``doctor()``.

``greenlab doctor`` prints the same as a table, or JSON with ``--json``. Works with no GPU,
no NVIDIA driver and no RAPL: those are reported, never raised.
"""

from __future__ import annotations

import json
import os
import platform
import sys

from greenlab.energy import nvml as _nvml
from greenlab.energy.sources import NvmlCounterSource, NvmlPowerSource, discover


def doctor(print_table: bool = False, nvml_module=None, rapl_root=None, environ=None) -> dict:
    """Describe GPUs, CPU, RAPL, energy sources, torch and quick mode as a plain dict.

    ``nvml_module``, ``rapl_root`` and ``environ`` replace the real NVML, powercap tree and
    environment (for tests).
    """
    env = os.environ if environ is None else environ
    found = discover(nvml_module, rapl_root, env)
    lib = _nvml.get_nvml(nvml_module)
    by_component = {s.component: s for s in found.sources}
    report = {
        "gpus": [_gpu_info(lib, gpu, by_component.get(f"gpu:{gpu.cuda_index}"))
                 for gpu in lib.visible_gpus(env)],
        "nvml": {"available": lib.available, "reason": lib.reason},
        "cpu": _cpu_info(),
        "rapl": {"status": found.rapl_status, "reason": found.rapl_reason},
        "sources": {s.component: s.describe() for s in found.sources},
        "problems": list(found.problems),
        "torch": _torch_info(),
        "quick_mode": _quick_mode(env),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
    if print_table:
        print(format_report(report))
    return report


def doctor_main(args) -> int:
    """``greenlab doctor [--json]``."""
    report = doctor()
    if getattr(args, "json", False):
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
    return 0


def format_report(report: dict) -> str:
    """The doctor dict as a readable table."""
    lines = ["greenlab doctor", ""]
    if report["gpus"]:
        lines.append("GPUs")
        for g in report["gpus"]:
            memory = f"{g['memory_gib']:.1f} GiB" if g["memory_gib"] is not None else "?"
            limit = f"{g['power_limit_w']:.0f} W" if g["power_limit_w"] is not None else "?"
            lines.append(f"  {g['component']:<7} {g['name']} ({g['architecture']}), {memory}, "
                         f"power limit {limit}")
            lines.append(f"          energy counter: {_yes(g['energy_counter_supported'])}, "
                         f"instant power: {_yes(g['instant_power_available'])}, "
                         f"source: {g['energy_source'] or 'none'}")
    else:
        lines.append(f"GPUs     none ({report['nvml']['reason'] or 'no GPU visible'})")
    cpu = report["cpu"]
    lines.append(f"CPU      {cpu['model']}, {cpu['logical_cores']} logical / "
                 f"{cpu['physical_cores']} physical cores, native bf16: {_yes(cpu['native_bf16'])}")
    lines.append(f"RAPL     {report['rapl']['status']} ({report['rapl']['reason']})")
    lines.append("Sources")
    for component, s in report["sources"].items():
        tag = f"estimate, +-{s['rel_uncertainty']:.0%}" if s["estimated"] \
            else f"measured, +-{s['rel_uncertainty']:.0%}"
        lines.append(f"  {component:<7} {s['source']} ({tag})")
        if s["note"]:
            lines.append(f"          note: {s['note']}")
        if s["model"]:
            lines.append(f"          model: {s['model']}")
    for problem in report["problems"]:
        lines.append(f"  problem: {problem}")
    t = report["torch"]
    lines.append(f"torch    {t['version'] or 'not installed'}, device {t['device']}")
    q = report["quick_mode"]
    lines.append(f"quick    {'on' if q['on'] else 'off'} ({q['reason']})")
    return "\n".join(lines)


def _gpu_info(lib, gpu, source) -> dict:
    handle = lib.handle(gpu.nvml_index)
    try:
        lib.energy_joules(handle)
        counter = True
    except Exception:
        counter = False
    memory = lib.memory_total_bytes(handle)
    return {
        "component": f"gpu:{gpu.cuda_index}",
        "cuda_index": gpu.cuda_index,
        "nvml_index": gpu.nvml_index,
        "name": lib.name(handle),
        "architecture": lib.architecture(handle),
        "memory_gib": memory / 2**30 if memory is not None else None,
        "power_limit_w": lib.power_limit_watts(handle),
        "energy_counter_supported": counter,
        "instant_power_available": lib.instant_power_watts(handle) is not None,
        "energy_source": source.name if isinstance(source, (NvmlCounterSource, NvmlPowerSource))
        else None,
    }


def cpu_has_native_bf16() -> bool:
    """True when PyTorch's CPU kernels (oneDNN) can run bfloat16 natively on this processor
    (e.g. AVX-512 BF16 or AMX), so CPU autocast to bf16 can be faster than fp32."""
    try:
        import torch

        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (ImportError, AttributeError, RuntimeError):
        return False


def _cpu_info() -> dict:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    logical, physical = _core_counts()
    return {
        "model": model or platform.processor() or platform.machine() or "unknown",
        "logical_cores": logical,
        "physical_cores": physical,
        "native_bf16": cpu_has_native_bf16(),
    }


def _core_counts() -> tuple:
    """(logical, physical) core counts: psutil when installed, else os.cpu_count() and the
    distinct (physical id, core id) pairs of /proc/cpuinfo; None where unknown."""
    try:
        import psutil

        return psutil.cpu_count(logical=True), psutil.cpu_count(logical=False)
    except ImportError:
        pass
    return os.cpu_count(), _physical_cores_from_cpuinfo()


def _physical_cores_from_cpuinfo(path: str = "/proc/cpuinfo") -> int | None:
    cores, package = set(), "0"
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                if key == "physical id":
                    package = value.strip()
                elif key == "core id":
                    cores.add((package, value.strip()))
    except OSError:
        return None
    return len(cores) or None


def _torch_info() -> dict:
    try:
        import torch
    except ImportError:
        return {"version": None, "device": "cpu", "cuda_available": False, "cuda_build": None}
    try:
        cuda = bool(torch.cuda.is_available())
    except Exception:
        cuda = False
    return {"version": torch.__version__, "device": "cuda" if cuda else "cpu",
            "cuda_available": cuda, "cuda_build": torch.version.cuda}


def _quick_mode(env) -> dict:
    flag = env.get("GREENLAB_QUICK", "").strip()
    if flag:
        return {"on": flag != "0", "reason": f"GREENLAB_QUICK={flag}"}
    if env.get("CI"):
        return {"on": True, "reason": "CI is set"}
    return {"on": False, "reason": "GREENLAB_QUICK and CI unset"}


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"
