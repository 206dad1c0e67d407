"""Fake hardware shared by the tests: real greenlab logic runs over it."""

import time

from greenlab.energy.sources import EnergySource


class SlopeSource(EnergySource):
    """A fake estimated CPU meter whose counter rises at a known rate: joules = watts x seconds."""

    name = "estimate"
    estimated = True

    def __init__(self, watts: float = 10.0):
        super().__init__("cpu", note="test counter", model=f"{watts} W x time")
        self.watts = watts

    def read_joules(self):
        return self.watts * time.perf_counter()
