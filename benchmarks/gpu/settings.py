"""The suite's constants: experiments and their time plan, targets, and work sizes (GPU and dry run)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

EXIT_OK = 0
EXIT_NO_GPU = 0  # documented: no CUDA is not an error, there is simply nothing to check
DRY_RUN_MARK = "dry-run, CPU — not a reference"
DRY_RUN_GPU = "cpu dry-run (not a reference)"
SUMMARY = "gpu_suite"
BUNDLE = "gpu_suite_records.json"
LOG = "gpu_suite_log.txt"
SUMMARY_TEXT = "gpu_suite_summary.txt"  # the closing table, rewritten with the records
SMI = "nvidia-smi-q.txt"  # `nvidia-smi -q` at the start (a query), where nvidia-smi exists
# --out holds these four files and nothing else (a device tool brings back only a few files, not
# deep folders): the run works in a folder of its own (--work; default a fresh one under the
# system's temp dir, removed at the end) and copies the records, log and summary into --out
# atomically as they change (OUT_COPY_EVERY_S, and at the end), so a run killed at any moment
# leaves its latest records there
OUT_FILES = (BUNDLE, LOG, SUMMARY_TEXT, SMI)
OUT_COPY_TMP = "gpu_suite_copy.tmp"  # the one temporary name a copy into --out goes through
OUT_COPY_EVERY_S = 15.0
OUT_FILE_MAX_BYTES = 15 * 2**20  # a longer log is copied as its head and tail (limit: 16 MiB a file)
PARTS = "gpu_suite_parts"  # folder under the work folder: one JSON per experiment, written as its rows finish
# folder under the work folder for what the workers share (datasets) and their temporary files
# (tempfile's folder in every worker: DDP's dataset copy, checkpoint writes): removed at the end
CACHE = "gpu_suite_cache"
BUNDLE_VERSION = 1
DEFAULT_BUDGET_S = 540.0
# experiment -> (the lesson that reads it with gl.reference.show, seconds of a 540 s plan)
EXPERIMENTS = {
    "measurement_core": ("00", 42),  # 10 loaded and 10 idle counter-vs-power windows of 1 s
    "ddp_scaling": ("08", 27),
    "mixed_precision": ("01", 38),
    "mixed_precision-resnet": ("01", 18),  # 14 s of its share went to lessons 13 and 14
    "gradient_accumulation": ("02", 26),
    "batch_sweep": ("03", 30),
    "architecture_search": ("04", 16),
    "carbon": ("05", 14),
    "compression": ("06", 18),
    "data_pipeline": ("07", 26),  # 2 s went to lesson 11
    "capstone": ("09", 46),  # the ladder, one repeat at least (see below; 2 s went to lesson 11)
    "language_model": ("10", 38),
    "language_model-compile": ("10", 35),  # own worker and share (a cold compile takes 20-40 s),
    # its rows recorded in language_model's record (MERGED_INTO)
    "language_model-recipes": ("10", 24),  # lesson 10's naive-to-green ladder, recorded in language_model
    "language_model_serving": ("12", 20),
    "operations": ("13", 10),  # idle power and checkpoint writes: a few short windows
    "sharing_a_cluster": ("14", 9),  # start-up, a 3 s idle-power window and a simulation
    "beyond_the_data_centre": ("15", 12),
    "fitting_in_memory": ("11", 8),  # five one-step rows of bytes, no energy window (the floor)
}
MIN_SHARE_S = 8.0  # an experiment given less is skipped ("out of time"): every share in the plan is at least this
LESSONS_SECONDS = 54    # the lesson phase's reserve; lessons run after the experiments with whatever is left
# (time an experiment did not use included), LESSON_JOBS at a time, in LESSON_PRIORITY order
# A lesson's own watchdog share where 60 s (Sizes.lesson_cap_s) is too little: seconds measured in
# a CPU rehearsal of the dry run (quick mode, 2 cores): lesson 10 took 234 s (its torch.compile
# cell 137 s), lessons 09, 12 and 14 between 80 and 130 s (130 s given to each). GPU times are not
# measured yet; the summary records each lesson's seconds for the next plan.
LESSON_SHARES_S = {"10": 240.0, "09": 130.0, "12": 130.0, "14": 130.0}
# Start order: the lessons with CUDA-only code paths (01's autocast and GradScaler on CUDA, 08's
# and 03's device branches), then the long ones the GPU changes most (torch.compile in 10,
# bitsandbytes and torchao int8 in 12), then the rest by number. When a slot frees, the next
# lesson whose share fits in what is left of the phase starts (a long one that does not fit
# gives way to shorter ones); when none fits, the next one runs with what is left.
LESSON_PRIORITY = ("01", "08", "03", "10", "12", "09", "14")
LESSON_JOBS = 5         # lessons at a time on the GPU machine (16 cores), each with 16 // 5 = 3 CPU threads
# Where the two ladders' time comes from (the plan was full at 540 s). The capstone's ladder is
# nine gl.train runs of full-mode recipes: the naive row alone is 2 passes of 60,000 images in
# batches of 4 from a DataLoader, 30,000 steps; it took 1.9 ms a step on a 1-thread CPU here (a
# busy one) and is estimated (not measured) at about as long on a GPU, where so small a step is
# bound by its launches and the loader: 30 s or more; the eight other rows (batch 256 or larger)
# an estimated 1-3 s each: about 50 s for one repeat. So capstone goes from 29 to 48 s (its old
# two runs are the ladder's two ends; 2 s of the 50 went to installing the carried wheels, in
# OVERHEAD_SECONDS). Lesson 10's ladder is five or six train_lm runs of at most 1,000 steps of a
# 4-layer model with d_model 128, an estimated few ms a step: about 20 s a repeat, plus a worker's
# start: 24 s. The 45 s come from the lesson phase, which checks the lessons and measures
# nothing: 5 lessons at a time for 70 s hold 350 lesson-seconds, as 3 at a time for 115 s held
# 345, and the GPU machine's 16 cores give each of 5 lessons 3 threads (quick-mode lessons are
# small and mostly launch-bound on a GPU). Neither ladder fits a second repeat in these shares
# at these estimates: their notes then say "one repeat: no verdict"; time saved by earlier
# experiments flows to later ones (half of it to each, see Suite._run), so a second repeat runs
# where there is time. measurement_core went from 30 to 42 s (its counter-vs-power check became 10
# loaded and 10 idle 1 s windows instead of one 8 s window) and fitting_in_memory from 4 to its
# 8 s floor: the 16 s came from the lesson phase's reserve (70 to 54 s), which now also gets
# whatever the experiments leave.
PYTEST_SECONDS = 18
OVERHEAD_SECONDS = 11   # start-up, NVML reads, the counter-period poll, writing files, and installing
# the carried wheels (benchmarks/gpu_wheels.py; 1.5 s on this busy CPU for the 46 MiB of them that
# install on its Python 3.11, 2 s allowed)
WATCHDOG_GRACE_S = 10.0  # an experiment may overrun its share by this much before it is killed
WATCHDOG_KILL_GRACE_S = 3.0  # SIGTERM to a process group, then SIGKILL to the whole group this much later
MIN_WINDOW_S = 3.0
MIN_WINDOW_PERIODS = 50  # counter update periods per window: edge quantisation under 2 % per edge
MAX_MIN_WINDOW_S = 6.0  # the shortest window is capped here (and flagged) whatever the idle poll read
TARGETS = (
    # key, description, comparison, threshold
    ("bf16_speedup", "bf16 vs fp32 (PyTorch defaults) speed, reference CNN", ">=", 2.0),
    ("bf16_energy_saving_pct", "bf16 energy per sample saving vs fp32 (defaults), %", ">=", 40.0),
    ("monitor_overhead_pct", "PowerMonitor at 10 Hz, training-time overhead, %", "<", 1.0),
    # the median of 10 loaded windows with edges on counter ticks (idle ones are recorded and flagged apart)
    ("counter_vs_power_pct", "energy counter vs integrated instant power under load, |difference| %", "<=", 1.0),
)
ENERGY_TARGETS = {"bf16_energy_saving_pct", "counter_vs_power_pct"}  # judged on NVML energy only


# a stage with its own worker and time share whose rows go into another experiment's record
MERGED_INTO = {"language_model-compile": "language_model", "language_model-recipes": "language_model"}


def experiment_names() -> tuple:
    """The experiments the suite records, in run order (each a name a lesson reads); the stages
    of ``MERGED_INTO`` run on their own but are recorded inside their experiment."""
    return tuple(n for n in EXPERIMENTS if n not in MERGED_INTO)


@dataclass(frozen=True)
class Sizes:
    """Work sizes: one set for the H200 (compute-bound, see ``GPU_SIZES``), a tiny one for the CPU
    dry run. Batch sizes are per optimizer step unless named micro."""

    min_window_s: float = MIN_WINDOW_S   # raised to 50 counter periods (at most 6 s) when the counter is slower
    window_margin: float = 1.15         # steps are chosen for this many times the shortest window
    warmup_s: float = 0.6               # untimed warm-up per configuration (cuDNN choice, clocks)
    calib_s: float = 0.3                # calibration: double the steps until this long
    min_steps: int = 3
    max_steps: int = 100_000
    repeats: int = 3                    # at most; fewer when the share of time runs short
    fmnist: tuple = (60000, 10000)        # FashionMNIST-shaped (train, test), every such experiment
    cifar: tuple = (16384, 4096)
    cnn: dict = field(default_factory=lambda: {"width": 128})      # reference CNN at 2x width
    cnn_batch: int = 4096
    resnet: dict = field(default_factory=lambda: {"depth": 20, "width": 64})
    resnet_batch: int = 2048
    accum: tuple = (1024, 4)            # micro-batch x steps against one batch of the product
    sweep_batches: tuple = (256, 1024, 4096)
    sweep_target: float = 0.85
    sweep_evals: int = 8
    arch_candidates: tuple = (("cnn", {"depth": 3, "width": 32}), ("cnn", {"depth": 3, "width": 64}),
                              ("cnn", {"depth": 3, "width": 128}),
                              ("cnn", {"depth": 3, "width": 128, "separable": True}),
                              ("mlp", {"hidden": (1024, 512)}))
    infer_batch: int = 4096
    loader_batch: int = 1024
    loader_workers: tuple = (0, 4)
    idle_s: float = 3.0
    steady_load_s: float = 1.0         # one counter-vs-power window (edges on counter ticks)
    power_windows: int = 10             # counter-vs-power windows, loaded and idle alike
    first_window_warm_s: float = 1.5    # untimed work before an experiment's first energy window
    poll_s: float = 2.0
    power_interval_s: float = 0.005
    matmul_n: int = 8192
    monitor_pairs: int = 3
    monitor_run_s: float = 1.5
    ddp_per_worker_batch: int = 1024
    ddp_epochs: int = 8
    capstone_data: tuple | None = None  # (train, test) images; None: the recipes' own (full mode)
    capstone_target: float | None = None  # None: the recipes' own target
    ladder_repeats: int = 3             # paired repeats of each ladder at most (fewer as time allows)
    ladder_floor_s: float = 3.0         # time kept for each ladder run still to come (until measured)
    lm: dict = field(default_factory=lambda: {"d_model": 1024, "n_layers": 8, "n_heads": 16, "max_seq_len": 512})
    lm_batch: int = 32                  # windows of max_seq_len bytes per step
    lesson_cap_s: float = 60.0
    dry: bool = False


# Why these sizes are compute-bound on an H200 (989 TFLOP/s dense bf16/fp16, 495 TF32,
# 67 fp32; HBM3e 4.8 TB/s; so a kernel needs about 200 FLOP per byte moved in bf16, about 100 in
# TF32, to be limited by arithmetic rather than memory), counted with gl.flops:
# - reference CNN at width 128 (128, 256, 512 channels): 0.233 GFLOP forward per 28x28 image;
#   its 3x3 convolutions with C in and out channels do 9*C/2 FLOP per byte of bf16 activation
#   (C=128: 576, C=256: 1152), well above 200. One training step at batch 4096 is
#   3 x 0.233 x 4096 = 2.9 TFLOP: about 4 ms of GPU time at 700 TFLOP/s (more in fp32/TF32).
# - ResNet-20 at width 64 (64, 128, 256 channels): 1.3 GFLOP forward per 32x32 image (the lesson's
#   width-16 ResNet-20 has 1/16 of it and is launch-bound at batch 512); at batch 2048 a step is
#   3 x 1.3 x 2048 = 8 TFLOP, about 11 ms.
# - TinyGPT at d_model 1024, 8 layers (about 100 M parameters), 32 windows of 512 bytes per step:
#   its matrix products have 16384 rows and 1024-4096 columns (over 500 FLOP per bf16 byte), and
#   a step is about 6 x 1e8 x 16384 = 10 TFLOP plus attention.
# Launches: torch.profiler counts 76 (CNN) and 412 (ResNet) leaf operators per training step on
# the CPU (SGD's per-parameter loop there; CUDA's foreach path launches fewer). At ~5 us each the
# host needs about 0.4 and 2 ms per step, well under the GPU's 4 and 11 ms, so the host runs
# ahead and the GPU, not launching, sets the pace. The runs record what actually happened:
# achieved TFLOP/s and, from a torch.profiler trace, the share of wall time the GPU spent in
# kernels (``device_busy_fraction``; near 1 means not launch-bound).
GPU_SIZES = Sizes()
DRY_SIZES = Sizes(
    min_window_s=0.25, window_margin=1.2, warmup_s=0.02, calib_s=0.02, min_steps=1, max_steps=40,
    repeats=1, fmnist=(512, 128), cifar=(128, 64), cnn={"width": 8},
    cnn_batch=32, resnet={"depth": 8, "width": 4}, resnet_batch=16, accum=(16, 2),
    sweep_batches=(32, 64), sweep_target=0.3, sweep_evals=2,
    arch_candidates=(("cnn", {"depth": 2, "width": 4}), ("cnn", {"depth": 2, "width": 8, "separable": True})),
    infer_batch=32, loader_batch=32, loader_workers=(0, 1), idle_s=0.2, steady_load_s=0.03,
    poll_s=0.2, power_interval_s=0.01, power_windows=10, first_window_warm_s=0.02, matmul_n=64, monitor_pairs=1,
    monitor_run_s=0.1,
    ddp_per_worker_batch=32, ddp_epochs=1, capstone_data=(512, 128), capstone_target=0.3,
    ladder_repeats=2, ladder_floor_s=0.5,
    lm={"d_model": 32, "n_layers": 2, "n_heads": 2, "max_seq_len": 32}, lm_batch=4,
    lesson_cap_s=240.0, dry=True)
