"""Energy measurement: sources, windows (``measure``) and the background ``PowerMonitor``.

Every figure carries its source: ``nvml-counter``, ``nvml-power``, ``rapl`` or ``estimate``.
The ``greenlab measure`` command is ``greenlab.cli.measure`` (not imported here: it needs
``greenlab.impact.carbon``, which sits above this package).
"""

from greenlab.energy.distributed import CollectiveWindow, DistributedMeasurement
from greenlab.energy.measure import (
    ComponentEnergy,
    EnergyWindow,
    IdlePower,
    Measurement,
    ShortWindowWarning,
    measure_idle,
)
from greenlab.energy.monitor import PowerMonitor, PowerSample
from greenlab.energy.source import EnergySource
from greenlab.energy.sources import default_sources, discover, trapezoid_joules
from greenlab.energy.windows import measure

__all__ = [
    "CollectiveWindow", "ComponentEnergy", "DistributedMeasurement", "EnergySource",
    "EnergyWindow", "IdlePower", "Measurement", "PowerMonitor", "PowerSample", "ShortWindowWarning",
    "default_sources", "discover", "measure", "measure_idle",
    "trapezoid_joules",
]
