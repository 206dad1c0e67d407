"""Notebook front ends built from standard ipywidgets and matplotlib only (no custom
front-end extension, so they work in JupyterLab, Notebook, VS Code and Colab).

Each widget is a thin view: the logic it shows lives in plain Python (greenlab.energy,
greenlab.impact.scaling, greenlab.training.loop, greenlab.course.quiz) and every control can be driven from
Python (``button.click()``, setting ``.value``) without a browser.
"""

import importlib

from greenlab.widgets.checklist import ScaleOutChecklist
from greenlab.widgets.common import resolve_display
from greenlab.widgets.meter import EnergyMeter, MeterState, meter, metered

# these load on first use; CostBenefitCalculator and ExperimentPanel build text stand-ins where
# ipywidgets is missing (greenlab.widgets.common.widget_kit); QuizWidget needs ipywidgets
# (gl.quiz shows a quiz as text without it)
_LAZY = {"CostBenefitCalculator": "calculator", "ExperimentPanel": "panel", "Knob": "panel",
         "default_knobs": "panel", "QuizWidget": "quiz_widget"}

__all__ = [
    "CostBenefitCalculator", "EnergyMeter", "ExperimentPanel", "Knob", "MeterState", "QuizWidget", "ScaleOutChecklist",
    "default_knobs", "meter", "metered", "resolve_display",
]


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"greenlab.widgets.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'greenlab.widgets' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
