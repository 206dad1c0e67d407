"""Peak memory a run adds, in bytes: CUDA's peak allocated above the start, or the growth of the
process's resident set size on a CPU."""

from __future__ import annotations

import os

import torch

from greenlab.session.devices import synchronize


class PeakMemory:
    """Memory the run added: CUDA peak allocated above the start of the run (model and data are
    already resident then, so they are not counted), or (CPU) the growth of the process's
    resident set size (psutil when installed, else /proc/self/statm)."""

    def __init__(self, dev):
        self.dev = dev
        self.peak_rss = None
        if dev.type == "cuda":
            synchronize(dev)
            self.base = int(torch.cuda.memory_allocated(dev))
            torch.cuda.reset_peak_memory_stats(dev)
            self.kind = "cuda max_memory_allocated above the start of the run (model and data resident)"
        else:
            self.rss0 = rss_bytes()
            self.kind = ("cpu process RSS growth (start to end of run)" if self.rss0 is not None
                         else "not measured (no RSS reading on this system)")

    def sample(self):
        if self.dev.type != "cuda" and self.rss0 is not None:
            rss = rss_bytes()
            if rss is not None:
                self.peak_rss = rss if self.peak_rss is None else max(self.peak_rss, rss)

    def bytes(self) -> int | None:
        if self.dev.type == "cuda":
            return max(0, int(torch.cuda.max_memory_allocated(self.dev)) - self.base)
        if self.rss0 is None:
            return None
        return max(0, int((self.peak_rss or self.rss0) - self.rss0))


def rss_bytes() -> int | None:
    """This process's resident set size in bytes: psutil when installed, else /proc/self/statm;
    None where neither exists."""
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:
        pass
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
