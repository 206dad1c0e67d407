"""greenlab: train neural networks with less time, money, energy and carbon.

The public surface the lessons use. Every energy figure carries its source
(``nvml-counter``, ``nvml-power``, ``rapl`` or ``estimate``); see ``greenlab.energy``.
"""

__version__ = "0.1.0"

# --- measurement core (energy, hardware, units) ---

# --- carbon and cost ---

# --- harness (setup, data, models, training, experiments) ---

# --- widgets and quizzes ---

# --- course machinery (checkers, reference runs) ---
