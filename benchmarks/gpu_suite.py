#!/usr/bin/env python
"""Every GPU check, reference recording and lesson run, in one call (``make gpu-check``).

    python benchmarks/gpu_suite.py --out DIR [--budget-s 540] [--only NAME,...|none] [--lessons all|none|NN,...]
                                   [--work FOLDER] [--wheels FOLDER] [--skip-pytest]
    python benchmarks/gpu_suite.py --out DIR --dry-run        # the CPU rehearsal (tiny sizes)
    python benchmarks/gpu_suite.py --unpack FIRST/gpu_suite_records.json [SECOND/gpu_suite_records.json]
                                   --into data/reference_runs
    python benchmarks/gpu_shot.py                             # the device tool's call for this, and
    python benchmarks/gpu_shot.py --fallback-from FIRST/gpu_suite_records.json   # its fallback
    python benchmarks/gpu_wheels.py                           # wheels for the GPU machine (needs pip's network)
    python benchmarks/gpu_rehearsal.py                        # the dry run on the GPU machine's software stack

Carried wheels: ``benchmarks/gpu_wheels.py``, run where pip reaches the package index, fills the
git-ignored ``.cache/gpu-wheels/`` with the CPython 3.12 manylinux wheels the GPU machine lacks:
simpy and Optuna with their dependencies (lesson 14, ``sharing_a_cluster``), bitsandbytes 0.50.2
(CUDA 13 kernels included, torch >= 2.4) and torchao 0.17.0 (the release built against torch
2.11), and checks them against the device's 64 MiB limit on what travels: 50.3 MiB of wheels
and a 3.9 MiB tree, 54.2 MiB, so bitsandbytes and torchao fit beside simpy and Optuna (the
script leaves out what would not fit, bitsandbytes first). When that folder holds wheels (or
``--wheels FOLDER`` names one; the dry run installs only what ``--wheels`` names), the suite
installs them first, ``pip install --no-index --find-links FOLDER --no-deps --target`` into its
cache in the work folder, on the path of every worker, lesson and the pytest run; a failure is
recorded in the summary ("carried wheels") and the run goes on without them.

On a lent GPU machine, from the repository root (needs only torch, numpy, nvidia-ml-py and
matplotlib; psutil, tqdm, pytest, torchvision, IPython and ipywidgets are used when present),
with ``.cache/gpu-wheels`` carried along (the device run tool's ``carry: [".cache/gpu-wheels"]``):

    timeout -s TERM -k 10 580 env PYTHONUNBUFFERED=1 python3 benchmarks/gpu_suite.py --out "$OUT" --budget-s 540

``benchmarks/gpu_shot.py`` prints that call for the device tool (command, ``carry``,
``timeout_s`` 600, kind) and, from the records it returns, a prepared fallback of about 150 s
(``--only`` what did not finish, ``--lessons none``; the lessons that did not pass when every
experiment finished).

What it does, within ``--budget-s`` seconds of wall time:

- copies ``nvidia-smi -q`` (a query) into ``--out`` where nvidia-smi exists; reads the GPU's
  state (name, driver, power limit, clocks, modes) with NVML queries only, and records cuDNN's
  version beside the driver's, CUDA's and torch's:
  it never changes a limit, clock or mode; measures the energy counter's update period, which
  sets the shortest energy window: max(3 s, 50 update periods), capped at 6 s (flagged); window
  edges wait for a counter tick;
- runs one experiment per lesson (``EXPERIMENTS``, each share at least ``MIN_SHARE_S``, below
  which an experiment is skipped; torch.compile and lesson 10's recipe ladder as stages of their
  own recorded in ``language_model``), each in its own subprocess under a watchdog; an
  experiment's first energy window follows a short untimed warm-up, compared configurations
  take their windows in turn (A B A B), and every window records the GPU's temperature at its
  start and end (NVML queries). An experiment writes a
  "running" record as it starts; one that hangs or overruns its share is killed (its whole
  process group), the rows it finished are kept, one killed before it started gets at most one
  more worker, and the others and the summary still run; SIGTERM/SIGINT end every child group;
- runs every instructor lesson headless in quick mode on the GPU
  (``python -m greenlab.course run``) with the time the experiments left, one subprocess each
  under the same watchdog, five at a time with 16 // 5 = 3 CPU threads each (``--lesson-jobs``:
  lessons are checked here, not measured): those with CUDA-only paths and the long ones first
  (``LESSON_PRIORITY``), each with its own share (60 s, or the measured ``LESSON_SHARES_S``: 240 s
  for lesson 10), a long one giving way to shorter ones when it no longer fits;
- runs the ``gpu``-marked tests with pytest when pytest is installed ("not run" otherwise);
- works in a folder of its own (``--work``; by default a fresh ``gpu_suite_work-*`` in the
  system's temp dir, removed at the end): each experiment's rows as they finish
  (``gpu_suite_parts/``), the datasets the workers share and every worker's temporary files
  (``gpu_suite_cache/``, tempfile's folder and ``TMPDIR`` for its children);
- keeps at most four files in ``--out`` (a device tool brings back only a few small files from
  its output folder), each copied there through one temporary name and an atomic rename:
  ``gpu_suite_records.json`` (one record per experiment in the ``greenlab.course.reference``
  schema, plus the summary record ``gpu_suite``), written at the start, after every experiment
  and lesson, and every 15 s with the rows a running experiment has finished;
  ``gpu_suite_log.txt`` (every 15 s and at the end; a log over 15 MiB keeps its head and tail);
  ``gpu_suite_summary.txt`` (the closing table, with the records); ``nvidia-smi-q.txt``. A run
  killed at any moment leaves its latest records there, and its work folder behind.
  ``--unpack`` writes the records as ``data/reference_runs/<gpu>_<date>_<experiment>.json``,
  the files the lessons' ``gl.reference.show(...)`` read; given a first call's bundle and its
  fallback's, the fallback's records replace the first's (only the stages it reran, where it
  reran stages alone).

The code lives in ``benchmarks/gpu/`` (see its ``__init__``); this file is the command.

Measurement rules kept by every experiment: the device is synchronised before every timer
and at every energy-window edge; each configuration is warmed up, then its step time is
measured and its step count chosen so its window lasts at least the shortest window (rows say
``window_ok``); evaluation happens after the timed window; fp32 rows run with PyTorch's default
TF32 settings, recorded as found (``torch_tf32`` in the notes), never forced; energy comes from
the GPU's own NVML source and is "not measured" when there is none (a CPU estimate is never
used for a GPU figure); memory is the increase during the window above what was resident.
``measurement_core`` compares the energy counter with integrated instant power over 10 loaded
and 10 idle windows of 1 s, each starting and ending on a counter tick: the median difference
under load is judged (target: within 1 %), the spread over the windows recorded, and an idle
median beyond 3 % flagged as idle divergence. No clock, power limit or mode is ever changed.

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
