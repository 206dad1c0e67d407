"""CPU and DRAM energy from Intel RAPL counters under ``/sys/class/powercap``.

Layout (Linux powercap): ``intel-rapl:N`` is a top-level domain whose ``name`` is
``package-N`` (or ``psys``, the whole platform, which greenlab skips); ``intel-rapl:N:M``
are its subdomains ``core``, ``uncore`` and ``dram``. Domains nest: core and uncore are
already inside package, so they are never added to it. ``dram`` is outside package and is
reported as its own component. Each ``energy_uj`` counter wraps to zero after
``max_energy_range_uj``. Modern kernels make ``energy_uj`` readable by root only.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from greenlab.energy.source import MAX_PLAUSIBLE_WATTS, EnergySource, implausible_step

RAPL_ROOT = "/sys/class/powercap"
# Relative uncertainty assumed for RAPL; package counters are a model inside the CPU,
# not a meter at the wall, so greenlab states 10 % as an assumption.
RAPL_REL_UNCERTAINTY = 0.10
_TOP = re.compile(r"^intel-rapl:\d+$")
_SUB = re.compile(r"^intel-rapl:\d+:\d+$")


class RaplSource(EnergySource):
    """Sum of one or more RAPL domains (all packages -> ``cpu``, all dram -> ``dram``)."""

    name = "rapl"
    rel_uncertainty = RAPL_REL_UNCERTAINTY
    update_period_s = 0.001  # RAPL counters refresh about every millisecond
    poll_interval_s = 1.0  # read at least this often so no wrap-around is missed

    max_plausible_watts = MAX_PLAUSIBLE_WATTS  # a rise faster than this is a fault, not energy drawn

    def __init__(self, component: str, domains: list[Path], note: str = "", clock=time.monotonic):
        super().__init__(component, note)
        self.domains = [Path(d) for d in domains]
        self._lock = threading.Lock()
        self._clock = clock
        self._max_uj = [_read_range(d) for d in self.domains]
        self._last_uj: list[int | None] = [_read_counter(d, m) for d, m in zip(self.domains, self._max_uj)]
        self._t = [self._clock()] * len(self.domains)
        self._total_uj = 0

    def read_joules(self) -> float:
        """The domains' total since the first read, joules. An impossible reading (not a whole number,
        negative, beyond the counter's range) or a rise faster than ``max_plausible_watts`` (a wrap
        where none could happen, a reset) is recorded as a fault, adds nothing, and the next good
        reading starts afresh."""
        with self._lock:
            for i, domain in enumerate(self.domains):
                now_t = self._clock()
                try:
                    now = _read_counter(domain, self._max_uj[i])
                except (OSError, ValueError) as exc:
                    self.record_fault(f"{domain.name}: energy_uj gave an impossible reading ({exc}): the energy "
                                      "since the last good reading is missing")
                    self._last_uj[i] = None
                    continue
                last = self._last_uj[i]
                if last is not None:
                    delta = unwrap_delta(last, now, self._max_uj[i])
                    jump = implausible_step(delta / 1e6, now_t - self._t[i], self.update_period_s,
                                            self.max_plausible_watts)
                    if jump:
                        self.record_fault(f"{domain.name}: energy_uj {jump}: the energy between those reads is "
                                          "missing")
                    else:
                        self._total_uj += delta
                self._last_uj[i], self._t[i] = now, now_t
            return self._total_uj / 1e6

    def poll(self) -> None:
        self.read_joules()


def unwrap_delta(before_uj: int, after_uj: int, max_range_uj: int) -> int:
    """Microjoules between two counter reads, allowing for one wrap past ``max_range_uj``."""
    if after_uj >= before_uj:
        return after_uj - before_uj
    return max_range_uj - before_uj + after_uj


@dataclass
class RaplProbe:
    """Result of looking for RAPL: ``status`` is absent, permission denied, readable or unusable."""

    status: str
    reason: str
    packages: list[Path] = field(default_factory=list)
    drams: list[Path] = field(default_factory=list)

    def sources(self) -> list[RaplSource]:
        found = [RaplSource("cpu", self.packages)]
        if self.drams:
            found.append(RaplSource("dram", self.drams))
        return found

    def fallback_note(self) -> str:
        if self.status == "permission denied":
            return (f"RAPL present but not readable (permission denied): {self.reason}; "
                    "using the CPU estimate")
        if self.status == "absent":
            return f"RAPL absent ({self.reason}); using the CPU estimate"
        return f"RAPL unusable ({self.reason}); using the CPU estimate"


def probe_rapl(root=RAPL_ROOT) -> RaplProbe:
    """Find package and dram domains under ``root`` and check that they can be read."""
    root = Path(root)
    if not root.is_dir():
        return RaplProbe("absent", f"no {root}")
    packages, drams = [], []
    for entry in sorted(root.iterdir()):
        if not (_TOP.match(entry.name) or _SUB.match(entry.name)):
            continue
        try:
            kind = (entry / "name").read_text().strip()
        except OSError:
            continue
        if _TOP.match(entry.name) and kind.startswith("package"):
            packages.append(entry)
        elif kind == "dram":
            drams.append(entry)
        # psys (whole platform) and core/uncore (inside package) are deliberately skipped
    if not packages:
        return RaplProbe("absent", f"no intel-rapl package domain under {root}")
    for domain in packages + drams:
        try:
            _read_int(domain / "energy_uj")
            _read_counter(domain, _read_range(domain))
        except PermissionError:
            return RaplProbe("permission denied",
                             f"{domain / 'energy_uj'} is readable by root only")
        except (OSError, ValueError) as exc:
            return RaplProbe("unusable", f"{domain}: {exc}")
    return RaplProbe("readable", f"{len(packages)} package, {len(drams)} dram domain(s)",
                     packages, drams)


def access_help(root=RAPL_ROOT) -> list[str]:
    """How to make RAPL readable where it exists but is root-only, and what that changes: the
    commands ``greenlab doctor`` prints. Linux restricted ``energy_uj`` to root in 2020 because
    its fine-grained readings leak information about other programs (the PLATYPUS power side
    channel, CVE-2020-8694): on a machine you share, weigh that first."""
    files = f"{root}/intel-rapl:*/energy_uj {root}/intel-rapl:*/intel-rapl:*/energy_uj"
    return [
        "RAPL is there but readable by root only. To measure the CPU instead of estimating it:",
        f"  this session, until reboot:  sudo chmod a+r {files}",
        "  for good (a udev rule, applied at every boot):",
        "    echo 'ACTION==\"add\", SUBSYSTEM==\"powercap\", RUN+=\"/bin/chmod a+r /sys%p/energy_uj\"' \\",
        "      | sudo tee /etc/udev/rules.d/99-greenlab-rapl.rules && sudo udevadm trigger --subsystem-match=powercap",
        "  Then greenlab reads the CPU package (and DRAM) energy from RAPL, measured (+-10 % assumed),",
        "  instead of the CPU estimate (about a factor of 2). Root-only access is Linux's default since",
        "  2020 (the PLATYPUS power side channel, CVE-2020-8694): on a shared machine, weigh that first.",
    ]


def _read_int(path: Path) -> int:
    return int(Path(path).read_text().strip())


def _read_range(domain: Path) -> int:
    """A domain's ``max_energy_range_uj``: a whole number of microjoules > 0 (ValueError otherwise)."""
    value = _read_int(domain / "max_energy_range_uj")
    if value <= 0:
        raise ValueError(f"{domain / 'max_energy_range_uj'} reads {value}: a counter's range is > 0 µJ")
    return value


def _read_counter(domain: Path, max_uj: int) -> int:
    """A domain's ``energy_uj``: a whole number of microjoules in [0, ``max_uj``] (ValueError
    otherwise: text, a negative count, a count past the range it wraps at)."""
    value = _read_int(domain / "energy_uj")
    if not 0 <= value <= max_uj:
        raise ValueError(f"{domain / 'energy_uj'} reads {value}, outside the counter's range 0 to {max_uj} µJ")
    return value
