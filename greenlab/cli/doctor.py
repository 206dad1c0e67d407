"""``greenlab doctor [--json]``: what this machine can measure and how, as a table or as JSON
(``greenlab.session.hardware.doctor`` gathers it)."""

from __future__ import annotations

import json

from greenlab.session import hardware


def doctor_main(args) -> int:
    """``greenlab doctor [--json]``."""
    report = hardware.doctor()
    if getattr(args, "json", False):
        print(json.dumps(report, indent=2))
    else:
        print(hardware.format_report(report))
    return 0
