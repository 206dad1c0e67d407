#!/usr/bin/env python
"""Every GPU check, reference recording and lesson run, in one call (``make gpu-check``).

    python benchmarks/gpu_suite.py --out DIR [--budget-s 540] [--only NAME,...] [--lessons all|none|NN,...]
                                   [--wheels FOLDER]
    python benchmarks/gpu_suite.py --out DIR --dry-run        # the CPU rehearsal (tiny sizes)
    python benchmarks/gpu_suite.py --unpack DIR/gpu_suite_records.json --into data/reference_runs
    python benchmarks/gpu_wheels.py                           # wheels for the GPU machine (needs pip's network)
    python benchmarks/gpu_rehearsal.py                        # the dry run on the GPU machine's software stack

Carried wheels: ``benchmarks/gpu_wheels.py``, run where pip reaches the package index, fills the
git-ignored ``.cache/gpu-wheels/`` with the CPython 3.12 manylinux wheels the GPU machine lacks:
simpy and Optuna with their dependencies (lesson 13, ``sharing_a_cluster``), bitsandbytes 0.50.2
(CUDA 13 kernels included, torch >= 2.4) and torchao 0.17.0 (the release built against torch
2.11), and checks them against the device's 64 MiB limit on what travels: 50.3 MiB of wheels
and a 3.9 MiB tree, 54.2 MiB, so bitsandbytes and torchao fit beside simpy and Optuna (the
script leaves out what would not fit, bitsandbytes first). When that folder holds wheels (or
``--wheels FOLDER`` names one; the dry run installs only what ``--wheels`` names), the suite
installs them first, ``pip install --no-index --find-links FOLDER --no-deps --target`` into its
cache under ``--out``, on the path of every worker, lesson and the pytest run; a failure is
recorded in the summary ("carried wheels") and the run goes on without them.

On a lent GPU machine, from the repository root (needs only torch, numpy, nvidia-ml-py and
matplotlib; psutil, tqdm, pytest, torchvision, IPython and ipywidgets are used when present),
with ``.cache/gpu-wheels`` carried along (the device run tool's ``carry: [".cache/gpu-wheels"]``):

    PYTHONUNBUFFERED=1 python3 benchmarks/gpu_suite.py --out $OUT --budget-s 540

What it does, within ``--budget-s`` seconds of wall time:

- reads the GPU's state (name, driver, power limit, clocks, modes) with NVML queries only:
  it never changes a limit, clock or mode; measures the energy counter's update period, which
  sets the shortest energy window: max(3 s, 50 update periods), capped at 6 s (flagged); window
  edges wait for a counter tick;
- runs one experiment per lesson (``EXPERIMENTS``; torch.compile and lesson 10's recipe ladder
  as stages of their own recorded in ``language_model``), each in its own subprocess under a
  watchdog: an experiment writes a
  "running" record as it starts; one that hangs or overruns its share is killed (its whole
  process group), the rows it finished are kept, one killed before it started gets at most one
  more worker, and the others and the summary still run; SIGTERM/SIGINT end every child group;
- runs every instructor lesson headless in quick mode on the GPU
  (``python -m greenlab.course run``), one subprocess each under the same watchdog, five at a
  time with 16 // 5 = 3 CPU threads each (``--lesson-jobs``: lessons are checked here, not
  measured);
- runs the ``gpu``-marked tests with pytest when pytest is installed ("not run" otherwise);
- writes, after every experiment and every lesson, ``DIR/gpu_suite_records.json``: one record
  per experiment in the ``greenlab.course.reference`` schema, plus the summary record ``gpu_suite``;
  the whole log to ``DIR/gpu_suite_log.txt``; each experiment's rows as they finish to
  ``DIR/gpu_suite_parts/``. The first two are all that is needed back. The datasets the workers
  share and every worker's temporary files (tempfile's folder, ``TMPDIR`` for its children) live
  in ``DIR/gpu_suite_cache/``, removed at the end: a run killed outright leaves it under ``DIR``
  and nothing in the system's temp dir.
  ``--unpack`` writes the records as ``data/reference_runs/<gpu>_<date>_<experiment>.json``,
  the files the lessons' ``gl.reference.show(...)`` read.

The code lives in ``benchmarks/gpu/`` (see its ``__init__``); this file is the command.

Measurement rules kept by every experiment: the device is synchronised before every timer
and at every energy-window edge; each configuration is warmed up, then its step time is
measured and its step count chosen so its window lasts at least the shortest window (rows say
``window_ok``); evaluation happens after the timed window; fp32 rows run with PyTorch's default
TF32 settings, recorded as found (``torch_tf32`` in the notes), never forced; energy comes from
the GPU's own NVML source and is "not measured" when there is none (a CPU estimate is never
used for a GPU figure); memory is the increase during the window above what was resident.

Without CUDA it prints "no GPU: nothing to check", writes nothing and exits 0. ``--dry-run``
runs everything on the CPU with tiny sizes; every record says "dry-run, CPU — not a reference"
and ``--unpack`` refuses such records unless ``--allow-dry-run``.
"""


from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # so `python benchmarks/gpu_suite.py` finds greenlab and benchmarks.gpu
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.gpu.context import Context, StepLoop, throughput_row  # noqa: E402
from benchmarks.gpu.orchestrator import (  # noqa: E402
    Suite, gpu_test_files, judge, main, preflight, select_lessons, unpack)
from benchmarks.gpu.probes import (  # noqa: E402
    counter_update_period, counter_vs_power, gpu_state, paired_overhead, read_gpu_state)
from benchmarks.gpu.records import percentile, write_json  # noqa: E402
from benchmarks.gpu.settings import (  # noqa: E402
    BUNDLE, BUNDLE_VERSION, DEFAULT_BUDGET_S, DRY_RUN_GPU, DRY_RUN_MARK, DRY_SIZES, EXIT_NO_GPU, EXIT_OK,
    EXPERIMENTS, GPU_SIZES, LESSONS_SECONDS, LOG, OVERHEAD_SECONDS, PYTEST_SECONDS, SUMMARY, TARGETS,
    Sizes, experiment_names)

__all__ = ["BUNDLE", "BUNDLE_VERSION", "Context", "DEFAULT_BUDGET_S", "DRY_RUN_GPU", "DRY_RUN_MARK",
           "DRY_SIZES", "EXIT_NO_GPU", "EXIT_OK", "EXPERIMENTS", "GPU_SIZES", "LESSONS_SECONDS", "LOG",
           "OVERHEAD_SECONDS", "PYTEST_SECONDS", "SUMMARY", "Sizes", "StepLoop", "Suite", "TARGETS",
           "counter_update_period", "counter_vs_power", "experiment_names", "gpu_state", "gpu_test_files",
           "judge", "main", "paired_overhead", "percentile", "preflight", "read_gpu_state", "select_lessons",
           "throughput_row", "unpack", "write_json"]

if __name__ == "__main__":
    sys.exit(main())
