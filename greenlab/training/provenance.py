"""Provenance of a result: the hardware and software it was measured on (no host name)."""

from __future__ import annotations

import platform
from datetime import datetime, timezone

import torch

def provenance(dev, sources: dict, version: str) -> dict:
    """Hardware and software facts for a result (no host name)."""
    gpu = ""
    if dev.type == "cuda":
        gpu = torch.cuda.get_device_name(dev)
    return {"device": str(dev), "cpu": _cpu_model(), "gpu": gpu, "torch": torch.__version__,
            "greenlab": version, "python": platform.python_version(), "os": platform.system(),
            "energy_sources": dict(sources), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "cpu_threads": torch.get_num_threads()}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
