"""Layer 4: TrainConfig and the one training loop and step, results, checkpoints, data and the
dataset cache, models, optimizers, memory. Imports the layers below.

``gl.train``'s modules: ``config`` (TrainConfig), ``loop`` (``train``: the loop itself),
``callbacks`` (TrainState, StopTraining), ``schedules`` (optimizer and learning-rate schedule),
``step`` (one classifier step), ``precision`` (dtypes), ``accuracy``, ``meter`` (the run's joule
meter), ``peak_memory``, ``provenance``, ``result`` (RunResult), ``ending`` (closing, logging and
Ctrl-C), ``resume`` (training state in a checkpoint) and ``checkpoint`` (file I/O).
"""
