"""Energy measurement: sources, windows (``measure``) and the background ``PowerMonitor``.

Every figure carries its source: ``nvml-counter``, ``nvml-power``, ``rapl`` or ``estimate``.
"""

from greenlab.energy.command import measure_main
from greenlab.energy.distributed import CollectiveWindow, DistributedMeasurement
from greenlab.energy.measure import (
    ComponentEnergy,
    EnergyWindow,
    IdlePower,
    Measurement,
    ShortWindowWarning,
    measure,
    measure_idle,
)
from greenlab.energy.monitor import PowerMonitor, PowerSample
from greenlab.energy.sources import EnergySource, default_sources, discover, trapezoid_joules

__all__ = [
    "CollectiveWindow", "ComponentEnergy", "DistributedMeasurement", "EnergySource",
    "EnergyWindow", "IdlePower", "Measurement", "PowerMonitor", "PowerSample", "ShortWindowWarning", "default_sources", "discover", "measure", "measure_idle",
    "measure_main", "trapezoid_joules",
]
