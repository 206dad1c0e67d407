"""Notebook front ends built from standard ipywidgets and matplotlib only (no custom
front-end extension, so they work in JupyterLab, Notebook, VS Code and Colab).

Each widget is a thin view: the logic it shows lives in plain Python (greenlab.energy,
greenlab.scaling, greenlab.train, greenlab.quiz) and every control can be driven from
Python (``button.click()``, setting ``.value``) without a browser.
"""

from greenlab.widgets.calculator import CostBenefitCalculator
from greenlab.widgets.checklist import ScaleOutChecklist
from greenlab.widgets.common import resolve_display
from greenlab.widgets.meter import EnergyMeter, MeterState, meter, metered
from greenlab.widgets.panel import ExperimentPanel, Knob, default_knobs
from greenlab.widgets.quiz_widget import QuizWidget

__all__ = [
    "CostBenefitCalculator", "EnergyMeter", "ExperimentPanel", "Knob", "MeterState", "QuizWidget", "ScaleOutChecklist",
    "default_knobs", "meter", "metered", "resolve_display",
]
