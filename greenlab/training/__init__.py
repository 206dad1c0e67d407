"""Layer 4: TrainConfig and the one training loop and step, results, checkpoints, data and the
dataset cache, models, optimizers, memory. Imports the layers below.
"""
