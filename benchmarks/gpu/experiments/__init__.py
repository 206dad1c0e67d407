"""One module per lesson's experiment; ``RUNNERS`` maps each experiment name (as a lesson
reads it with ``gl.reference.show``) to the function that records it."""

from __future__ import annotations

from benchmarks.gpu.experiments.lesson00_measurement_core import exp_measurement_core
from benchmarks.gpu.experiments.lesson08_ddp_scaling import exp_ddp_scaling
from benchmarks.gpu.experiments.lesson01_mixed_precision import exp_mixed_precision, exp_mixed_precision_resnet
from benchmarks.gpu.experiments.lesson02_gradient_accumulation import exp_gradient_accumulation
from benchmarks.gpu.experiments.lesson03_batch_sweep import exp_batch_sweep
from benchmarks.gpu.experiments.lesson04_architecture_search import exp_architecture_search
from benchmarks.gpu.experiments.lesson05_carbon import exp_carbon
from benchmarks.gpu.experiments.lesson06_compression import exp_compression
from benchmarks.gpu.experiments.lesson07_data_pipeline import exp_data_pipeline
from benchmarks.gpu.experiments.lesson09_capstone import exp_capstone
from benchmarks.gpu.experiments.lesson10_language_model import (
    exp_language_model, exp_language_model_compile, exp_language_model_recipes)
from benchmarks.gpu.experiments.lesson12_language_model_serving import exp_language_model_serving
from benchmarks.gpu.experiments.lesson13_operations import exp_operations
from benchmarks.gpu.experiments.lesson14_sharing_a_cluster import exp_sharing_a_cluster
from benchmarks.gpu.experiments.lesson15_beyond_the_data_centre import exp_beyond_the_data_centre
from benchmarks.gpu.experiments.lesson11_fitting_in_memory import exp_fitting_in_memory

RUNNERS = {
    "measurement_core": exp_measurement_core,
    "ddp_scaling": exp_ddp_scaling,
    "mixed_precision": exp_mixed_precision,
    "mixed_precision-resnet": exp_mixed_precision_resnet,
    "gradient_accumulation": exp_gradient_accumulation,
    "batch_sweep": exp_batch_sweep,
    "architecture_search": exp_architecture_search,
    "carbon": exp_carbon,
    "compression": exp_compression,
    "data_pipeline": exp_data_pipeline,
    "capstone": exp_capstone,
    "language_model": exp_language_model,
    "language_model-compile": exp_language_model_compile,
    "language_model-recipes": exp_language_model_recipes,
    "language_model_serving": exp_language_model_serving,
    "operations": exp_operations,
    "sharing_a_cluster": exp_sharing_a_cluster,
    "beyond_the_data_centre": exp_beyond_the_data_centre,
    "fitting_in_memory": exp_fitting_in_memory,
}
