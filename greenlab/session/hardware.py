"""What this machine has and how greenlab will measure it: ``doctor()``.

``greenlab doctor`` (``greenlab.cli.doctor``) prints the same as a table, or JSON with
``--json``. Works with no GPU, no NVIDIA driver and no RAPL: those are reported, never raised.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import sys

from greenlab.base import validation
from greenlab.energy import cpus, nvml as _nvml
from greenlab.energy.rapl import access_help
from greenlab.energy.sources import NvmlCounterSource, NvmlPowerSource, discover
from greenlab.session.devices import choose_device as _choose_device, quick_decision


def doctor(print_table: bool = False, nvml_module=None, rapl_root=None, environ=None) -> dict:
    """Describe GPUs, CPU, RAPL, energy sources, torch and quick mode as a plain dict.

    ``nvml_module``, ``rapl_root`` and ``environ`` replace the real NVML, powercap tree and
    environment (for tests).
    """
    validation.flag("print_table", print_table)
    if rapl_root is not None and (not isinstance(rapl_root, (str, os.PathLike)) or not os.fspath(rapl_root)):
        raise validation.ArgumentTypeError(  # a number here failed deep in os.path without naming it
            f"rapl_root must be a folder path (a powercap tree) or None, got {validation._show(rapl_root)}")
    _check_environ(environ)
    env = os.environ if environ is None else environ
    found = discover(nvml_module, rapl_root, env, gpus="all")  # describe every visible GPU
    lib = _nvml.get_nvml(nvml_module)
    by_component = {s.component: s for s in found.sources}
    torch_info = _torch_info()
    report = {
        "gpus": [_gpu_info(lib, gpu, by_component.get(f"gpu:{gpu.cuda_index}"))
                 for gpu in lib.visible_gpus(env)],
        "nvml": {"available": lib.available, "reason": lib.reason},
        "cpu": _cpu_info(),
        "rapl": {"status": found.rapl_status, "reason": found.rapl_reason},
        "apple_silicon": {"status": found.apple_status, "reason": found.apple_reason},
        "amd_gpus": {"status": found.amd_status, "reason": found.amd_reason},
        "sources": {s.component: s.describe() for s in found.sources},
        "problems": list(found.problems),
        "energy": _energy_policy(found),
        "torch": torch_info,
        "quick_mode": _quick_mode(env, torch_info["device"]),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
    if print_table:
        print(format_report(report))
    return report


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
                 f"{cpu['physical_cores']} physical cores, native bf16: {_yes(cpu['native_bf16'])}, "
                 f"native fp16: {_yes(cpu.get('native_fp16', False))}")
    lines.append(f"RAPL     {report['rapl']['status']} ({report['rapl']['reason']})")
    if report["rapl"]["status"] == "permission denied":
        lines += [f"         {line}" for line in access_help()]
    for key, label in (("apple_silicon", "Apple"), ("amd_gpus", "AMD GPUs")):
        part = report.get(key, {})
        if part.get("status") not in (None, "absent", "not probed"):
            lines.append(f"{label:<8} {part['status']} ({part['reason']})")
    lines.append("Sources")
    for component, s in report["sources"].items():
        tag = f"estimate, +-{s['rel_uncertainty']:.0%}" if s["estimated"] \
            else f"measured, +-{s['rel_uncertainty']:.0%}"
        whose = f", {s['attribution']}" if s.get("attribution") else ""
        lines.append(f"  {component:<7} {s['source']} ({tag}{whose})")
        if s["note"]:
            lines.append(f"          note: {s['note']}")
        if s["model"]:
            lines.append(f"          model: {s['model']}")
    for problem in report["problems"]:
        lines.append(f"  problem: {problem}")
    e = report.get("energy")
    if e:
        lines.append(f"Energy   CPU estimate attribution: {e['attribution']} ({e['attribution_text']})")
        lines.append(f"         CPUs for the estimate: {e['cpus']:g} ({e['cpus_how']})")
        lines.append(f"         GPUs counted: {e['gpus']}")
    t = report["torch"]
    lines.append(f"torch    {t['version'] or 'not installed'}, device {t['device']}")
    if t.get("native_precisions"):
        native = ", ".join(f"{k} {_yes(v)}" for k, v in t["native_precisions"].items())
        cores = f", tensor cores {_yes(t['tensor_cores'])}" if "tensor_cores" in t else ""
        lines.append(f"         native 16-bit on {t['device']}: {native}{cores}")
    q = report["quick_mode"]
    lines.append(f"quick    {'on' if q['on'] else 'off'} ({q['reason']})")
    return "\n".join(lines)


def _energy_policy(found) -> dict:
    """Whose energy windows count by default: the CPU estimate's attribution, the CPUs it is
    sized by, and which GPUs are counted."""
    alloc = cpus.allocated_cpus()
    return {
        "attribution": "process",
        "attribution_text": "CPU time of the measuring process and its children; "
                            "attribution='machine' counts everyone's",
        "cpus": alloc.cpus, "cpus_how": alloc.how,
        "gpus": "the ones the work uses (gpus='used': torch's current device and any holding "
                "its memory; every visible GPU until torch initialises CUDA); gpus='all' for all",
    }


def _gpu_info(lib, gpu, source) -> dict:
    if gpu.nvml_index is None:  # a MIG instance: NVML has no per-instance energy
        return {"component": f"gpu:{gpu.cuda_index}", "cuda_index": gpu.cuda_index,
                "nvml_index": None, "name": f"MIG instance {gpu.mig}", "architecture": "unknown",
                "memory_gib": None, "power_limit_w": None, "energy_counter_supported": False,
                "instant_power_available": False, "energy_source": None}
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


def cpu_has_native_bf16(environ=None, cpu_flags=None) -> bool:
    """True when this CPU runs bfloat16 arithmetic in hardware (AVX-512 BF16 or AMX on x86, the
    BF16 extension on Arm) and PyTorch may use it, so CPU autocast to bf16 can beat fp32.
    Honours ``ONEDNN_MAX_CPU_ISA`` and ``ATEN_CPU_CAPABILITY`` caps (see ``precision_support``)."""
    return precision_support("bf16", "cpu", environ=environ, cpu_flags=cpu_flags).native


def cpu_has_native_fp16(environ=None, cpu_flags=None) -> bool:
    """True when this CPU runs float16 arithmetic in hardware (AVX-512 FP16 / AMX-FP16 on x86,
    half-precision SIMD on Arm). Most x86 CPUs do not: fp16 there is emulated and slow."""
    return precision_support("fp16", "cpu", environ=environ, cpu_flags=cpu_flags).native


@dataclasses.dataclass(frozen=True)
class PrecisionSupport:
    """Whether ``precision`` ("fp32", "bf16", "fp16") runs natively on ``device`` ("cpu",
    "cuda", "cuda:N", "mps"), and why, in one sentence (``reason``)."""

    precision: str
    device: str
    native: bool
    reason: str

    def note(self) -> str:
        """What this means for a measured comparison against fp32, in plain words."""
        where = _device_words(self.device)
        if self.precision == "fp32":
            return f"fp32 is the baseline on {where}."
        if self.native:
            return (f"{self.precision} is native on {where} ({self.reason}): the measured difference is "
                    "what this hardware gives this workload, either way (small matrix multiplications and "
                    "autocast's casts can cost more than the 16-bit units save).")
        return (f"{self.precision} is emulated on {where} ({self.reason}): here it is slower, and the "
                f"slowdown is the emulation's; on hardware with {self.precision} units compute-bound work is "
                "expected to be faster (a prediction until a recorded GPU run shows it).")


def precision_support(precision: str, device: str = "cpu", environ=None, cpu_flags=None,
                      cuda_capability=None) -> PrecisionSupport:
    """Does ``device`` run ``precision`` in hardware? ``PrecisionSupport`` with the reason.

    - CPU: reads the processor's feature flags (``/proc/cpuinfo``; on other systems asks
      oneDNN) and honours the emulation overrides ``ONEDNN_MAX_CPU_ISA`` (oneDNN's matmul
      kernels) and ``ATEN_CPU_CAPABILITY`` (PyTorch's own vector kernels, as reported by
      ``torch.backends.cpu.get_cpu_capability()``): a cap below the needed ISA means emulated.
    - CUDA: compute capability: fp16 tensor cores from 7.0 (Volta), bf16 from 8.0 (Ampere).
    - MPS (Apple GPUs): fp16 native; bf16 from macOS 14.
    ``environ``, ``cpu_flags`` (a set of flag names) and ``cuda_capability`` ((major, minor))
    replace the real ones, for tests.
    """
    if not isinstance(precision, str) or precision not in _PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(_PRECISIONS)}, got {precision!r}")
    _check_environ(environ)
    if cpu_flags is not None and (isinstance(cpu_flags, (str, bytes)) or not hasattr(cpu_flags, "__iter__")
                                  or not all(isinstance(f, str) for f in cpu_flags)):
        raise ValueError(f"cpu_flags must be a set of CPU flag names (strings) or None, got {cpu_flags!r}")
    _check_capability(cuda_capability)
    if not isinstance(device, str) or not device:
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'mps', got {device!r}")
    kind = device.split(":", 1)[0].lower()
    if precision == "fp32":
        return PrecisionSupport(precision, device, True, "fp32 runs everywhere")
    if kind == "cpu":
        native, reason = _cpu_support(precision, os.environ if environ is None else environ, cpu_flags)
    elif kind == "cuda":
        native, reason = _cuda_support(precision, device, cuda_capability)
    elif kind == "mps":
        native, reason = _mps_support(precision)
    else:
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'mps', got {device!r}")
    return PrecisionSupport(precision, device, native, reason)


def native_precisions(device: str = "cpu", **kwargs) -> dict:
    """{"bf16": bool, "fp16": bool}: which 16-bit formats ``device`` runs in hardware."""
    return {p: precision_support(p, device, **kwargs).native for p in ("bf16", "fp16")}


def cuda_tensor_cores(device: str = "cuda", cuda_capability=None) -> bool:
    """True when the CUDA GPU has tensor cores (compute capability 7.0, Volta, or newer)."""
    _check_capability(cuda_capability)
    cap = cuda_capability if cuda_capability is not None else _cuda_capability(device)
    return cap is not None and tuple(cap) >= (7, 0)


def _check_environ(environ) -> None:
    from collections.abc import Mapping

    if environ is not None and not isinstance(environ, Mapping):
        raise ValueError(f"environ must be a mapping of environment variables (like os.environ) or None, "
                         f"got {type(environ).__name__}")


def _check_capability(cuda_capability) -> None:
    if cuda_capability is None:
        return
    ok = isinstance(cuda_capability, (tuple, list)) and len(cuda_capability) == 2 and all(
        isinstance(c, int) and not isinstance(c, bool) and 0 <= c < 100 for c in cuda_capability)
    if not ok:
        raise ValueError(f"cuda_capability must be (major, minor) integers such as (8, 0), or None, "
                         f"got {cuda_capability!r}")


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
        "native_fp16": cpu_has_native_fp16(),
    }


def _core_counts() -> tuple:
    """(logical, physical) core counts; physical from /proc/cpuinfo (psutil's count elsewhere),
    None where unknown."""
    return os.cpu_count(), cpus.physical_cores()


def _torch_info() -> dict:
    try:
        import torch
    except ImportError:
        return {"version": None, "device": "cpu", "cuda_available": False, "cuda_build": None,
                "native_precisions": {}}
    try:
        cuda = bool(torch.cuda.is_available())
    except Exception:
        cuda = False
    try:
        device = _choose_device(None)
    except Exception:  # noqa: BLE001 - doctor describes, it does not fail
        device = "cpu"
    info = {"version": torch.__version__, "device": device,
            "cuda_available": cuda, "cuda_build": torch.version.cuda,
            "native_precisions": native_precisions(device)}
    if device.startswith("cuda"):
        info["tensor_cores"] = cuda_tensor_cores(device)
    return info


def _quick_mode(env, device="cpu") -> dict:
    on, reason = quick_decision(env, device)
    return {"on": on, "reason": reason}


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


# --- native precisions (capability helpers) -------------------------------------------------

_PRECISIONS = ("fp32", "bf16", "fp16")
# oneDNN's ISA names in increasing order (ONEDNN_MAX_CPU_ISA caps what its kernels may use)
_ONEDNN_ISAS = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI",
                "AVX512_CORE_BF16", "AVX10_1_512", "AVX512_CORE_FP16", "AVX10_1_512_AMX",
                "AVX512_CORE_AMX", "AVX10_1_512_AMX_FP16", "AVX512_CORE_AMX_FP16")
_ONEDNN_NEEDS = {"bf16": "AVX512_CORE_BF16", "fp16": "AVX10_1_512"}
# CPU feature flags (/proc/cpuinfo) that mean hardware arithmetic in each format
_X86_FLAGS = {"bf16": {"avx512_bf16", "amx_bf16"}, "fp16": {"avx512_fp16", "amx_fp16"}}
_ARM_FLAGS = {"bf16": {"bf16"}, "fp16": {"asimdhp", "fphp"}}
_X86_NAMES = {"bf16": "AVX-512 BF16 or AMX", "fp16": "AVX-512 FP16 or AMX-FP16"}


def _cpu_support(precision, env, cpu_flags) -> tuple[bool, str]:
    flags = _cpu_flags() if cpu_flags is None else {f.lower() for f in cpu_flags}
    arm = bool(flags & {"asimd", "neon", "asimdhp", "fphp", "bf16"}) and not flags & {"sse2", "avx2"}
    if flags:
        wanted = (_ARM_FLAGS if arm else _X86_FLAGS)[precision]
        if not flags & wanted:
            name = f"Arm {precision}" if arm else _X86_NAMES[precision]
            return False, f"this CPU has no {name} instructions"
        found = ", ".join(sorted(flags & wanted))
    else:  # no flag list (e.g. macOS, Windows): ask oneDNN, which knows the processor
        if not _onednn_supports(precision):
            return False, f"oneDNN reports no {precision} support on this CPU"
        found = "reported by oneDNN"
    if not arm:
        cap = (env.get("ONEDNN_MAX_CPU_ISA") or env.get("DNNL_MAX_CPU_ISA") or "").strip().upper()
        if cap in _ONEDNN_ISAS and _ONEDNN_ISAS.index(cap) < _ONEDNN_ISAS.index(_ONEDNN_NEEDS[precision]):
            return False, (f"ONEDNN_MAX_CPU_ISA={cap} keeps PyTorch's matmul kernels below "
                           f"{_ONEDNN_NEEDS[precision]}")
        aten = _aten_capability()
        if aten is not None and not aten.upper().startswith("AVX512"):
            return False, (f"PyTorch's vector kernels run at {aten} (ATEN_CPU_CAPABILITY), which has no "
                           f"{precision} instructions")
    return True, f"{precision} instructions: {found}"


def _cuda_support(precision, device, cuda_capability) -> tuple[bool, str]:
    cap = cuda_capability if cuda_capability is not None else _cuda_capability(device)
    if cap is None:
        return False, "no CUDA GPU is available"
    major, minor = (int(c) for c in cap)
    need = (8, 0) if precision == "bf16" else (7, 0)
    if (major, minor) >= need:
        unit = "bf16 tensor cores" if precision == "bf16" else "fp16 tensor cores"
        return True, f"{unit} (compute capability {major}.{minor})"
    if precision == "fp16" and (major, minor) in ((5, 3), (6, 0), (6, 2)):
        return True, f"fast fp16 arithmetic without tensor cores (compute capability {major}.{minor})"
    return False, (f"compute capability {major}.{minor} has no {precision} tensor cores "
                   f"(they need {need[0]}.{need[1]} or newer)")


def _mps_support(precision) -> tuple[bool, str]:
    if precision == "fp16":
        return True, "Apple GPUs compute in fp16 natively"
    try:
        import torch

        newer = bool(torch.backends.mps.is_macos_or_newer(14, 0))
    except Exception:  # noqa: BLE001 - an old torch or no macOS: treat as unsupported
        newer = False
    if newer:
        return True, "bf16 on Apple GPUs from macOS 14"
    return False, "bf16 on Apple GPUs needs macOS 14 or newer"


def _cpu_flags() -> set:
    """Feature flags from /proc/cpuinfo (x86 "flags", Arm "Features"); empty elsewhere."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key = line.split(":", 1)[0].strip().lower()
                if key in ("flags", "features"):
                    return set(line.split(":", 1)[1].lower().split())
    except OSError:
        pass
    return set()


def _onednn_supports(precision) -> bool:
    try:
        import torch

        check = (torch.ops.mkldnn._is_mkldnn_bf16_supported if precision == "bf16"
                 else torch.ops.mkldnn._is_mkldnn_fp16_supported)
        return bool(check())
    except (ImportError, AttributeError, RuntimeError):
        return False


def _aten_capability() -> str | None:
    try:
        import torch

        return str(torch.backends.cpu.get_cpu_capability())
    except (ImportError, AttributeError, RuntimeError):
        return None


def _cuda_capability(device) -> tuple | None:
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        return tuple(torch.cuda.get_device_capability(torch.device(device)))
    except Exception:  # noqa: BLE001 - no driver, bad index: no capability
        return None


def _device_words(device: str) -> str:
    kind = device.split(":", 1)[0]
    return {"cpu": "this CPU", "cuda": "this GPU", "mps": "this Apple GPU"}.get(kind, device)
