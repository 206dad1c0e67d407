"""Conceptual figures: the course's drawings of ideas (not measurements), one function each.

Every lesson that explains a mechanism in words also draws it: the roofline, the mixed-precision
data flow, gradient accumulation, ring all-reduce, ZeRO's stages, the pipeline bubble, the KV
cache, LoRA's low-rank path, unstructured against channel pruning and EASY backfilling. The
drawings hold no figures from any run: their axes carry no numbers, only the shape of the idea.

    python -m greenlab.course.figures            # draw every figure into the instructor copies
    python -m greenlab.course.figures --check    # exit 1 when a lesson lacks its figure

Each figure lives in its lesson as a markdown cell holding the PNG as an attachment (so it shows
in JupyterLab, VS Code, Colab and the website alike, with no path to resolve), with its alt text
and a one-line caption; the cell carries the tag ``figure-<name>`` so drawing again replaces it.
The learner copies take the cells from the instructor copies through ``greenlab.course build``.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import io
import json
import math
import re
import sys
from pathlib import Path
from typing import Callable

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the non-interactive backend)
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

FIGURE_TAG_PREFIX = "figure-"
DPI = 100

# colours: one meaning each, across every figure
C_FP32 = "#4c72b0"     # full precision, the baseline, the frozen weight
C_LOW = "#dd8452"      # low precision, the change, the adapter
C_ACT = "#55a868"      # work being done
C_IDLE = "#d9d9d9"     # idle, waiting, removed
C_TEXT = "#222222"


@dataclasses.dataclass(frozen=True)
class Figure:
    """One conceptual figure: where it goes, what it says to a reader who cannot see it."""

    name: str
    lesson: str          # the lesson's number, "00".."15"
    anchor: str          # a regular expression: the figure follows the first markdown cell matching it
    caption: str
    alt: str
    draw: Callable[[], plt.Figure]


def figure_png(fig: Figure) -> bytes:
    """The figure drawn as PNG bytes (no timestamp in the file, so a redraw is byte-identical)."""
    mpl_fig = fig.draw()
    buf = io.BytesIO()
    mpl_fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None}, bbox_inches="tight")
    plt.close(mpl_fig)
    return buf.getvalue()


def figure_cell(fig: Figure) -> dict:
    """The markdown cell that shows ``fig`` with its alt text and caption."""
    attachment = f"{fig.name}.png"
    return {
        "cell_type": "markdown",
        "metadata": {"tags": [FIGURE_TAG_PREFIX + fig.name]},
        "source": f"![{fig.alt}](attachment:{attachment})\n\n*Figure: {fig.caption}*",
        "attachments": {attachment: {"image/png": base64.b64encode(figure_png(fig)).decode("ascii")}},
    }


def place(nb: dict, fig: Figure) -> int:
    """Put ``fig``'s cell into notebook ``nb`` (a dict): replace its cell if present, else insert it
    after the first markdown cell matching ``fig.anchor`` (never the lesson's title cell, whose
    goals name every idea). Returns the cell's index."""
    cells = nb["cells"]
    tag = FIGURE_TAG_PREFIX + fig.name
    for i, cell in enumerate(cells):
        if tag in cell.get("metadata", {}).get("tags", []):
            new = figure_cell(fig)
            new["id"] = cell.get("id", f"{fig.name}")
            cells[i] = new
            return i
    pattern = re.compile(fig.anchor, re.IGNORECASE)
    for i, cell in enumerate(cells):
        text = _source(cell)
        if cell["cell_type"] == "markdown" and not text.startswith("# ") and pattern.search(text):
            new = figure_cell(fig)
            new["id"] = f"{fig.name}-figure"
            cells.insert(i + 1, new)
            return i + 1
    raise LookupError(f"lesson {fig.lesson}: no markdown cell matches {fig.anchor!r} for figure {fig.name!r}")


def missing(nb: dict, fig: Figure) -> bool:
    """True when ``nb`` has no cell showing ``fig`` (by tag and attachment)."""
    for cell in nb["cells"]:
        if FIGURE_TAG_PREFIX + fig.name in cell.get("metadata", {}).get("tags", []):
            return f"{fig.name}.png" not in cell.get("attachments", {})
    return True


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


# --- the figures --------------------------------------------------------------------------------

def _canvas(width: float = 8.0, height: float = 3.2):
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_axis_off()
    return fig, ax


def _box(ax, x, y, w, h, text, color, fontsize=9, text_color="white"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.05",
                                fc=color, ec="none"))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, color=text_color)


def _arrow(ax, start, end, text=None, color=C_TEXT, style="-|>", offset=(0, 0.08), rad=0.0):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=12, color=color, lw=1.3,
                                 connectionstyle=f"arc3,rad={rad}"))
    if text:
        ax.text((start[0] + end[0]) / 2 + offset[0], (start[1] + end[1]) / 2 + offset[1], text,
                ha="center", va="bottom", fontsize=8, color=color)


def draw_roofline():
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ridge = 10.0
    x = [0.04, ridge, 1000]
    ax.loglog(x, [0.04, ridge, ridge], color=C_FP32, lw=2.5)
    ax.axvline(ridge, color=C_IDLE, ls="--", lw=1)
    ax.text(ridge * 1.1, 0.05, "ridge point", fontsize=8, color="grey")
    ax.text(0.045, 3.0, "memory-bound:\nspeed = bandwidth x intensity", fontsize=8, color=C_FP32)
    ax.text(60, ridge * 1.3, "compute-bound: the peak FLOP/s", fontsize=8, color=C_FP32)
    ax.scatter([1 / 12], [0.08], color=C_LOW, zorder=3)
    ax.annotate("vector add\n(1 FLOP per 12 bytes in fp32)", (1 / 12, 0.08), (0.4, 0.01), fontsize=8,
                arrowprops={"arrowstyle": "-", "color": "grey"})
    ax.scatter([200], [ridge * 0.8], color=C_ACT, zorder=3)
    ax.annotate("large matmul", (200, ridge * 0.8), (120, 1.2), fontsize=8,
                arrowprops={"arrowstyle": "-", "color": "grey"})
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("attainable FLOP/s")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.minorticks_off()
    ax.set_ylim(0.002, 40)
    ax.set_title("The roofline: a kernel is capped by memory traffic or by arithmetic", fontsize=10)
    return fig


def draw_mixed_precision():
    fig, ax = _canvas(9.0, 3.0)
    ax.set_xlim(0, 11)
    ax.set_ylim(0, 3.2)
    _box(ax, 0.1, 1.9, 1.9, 0.8, "fp32 master\nweights", C_FP32, fontsize=8)
    _box(ax, 2.5, 1.9, 1.9, 0.8, "forward: matmuls\nin bf16 or fp16", C_LOW, fontsize=8)
    _box(ax, 4.9, 1.9, 1.9, 0.8, "loss in fp32\n(x scale for fp16)", C_FP32, fontsize=8)
    _box(ax, 7.3, 1.9, 1.9, 0.8, "backward: grads\nin low precision", C_LOW, fontsize=8)
    _box(ax, 7.3, 0.3, 1.9, 0.8, "unscale; skip the\nstep if inf/NaN", C_FP32, fontsize=8)
    _box(ax, 2.5, 0.3, 4.3, 0.8, "optimizer step on the fp32 master weights", C_FP32, fontsize=8)
    _arrow(ax, (2.0, 2.3), (2.5, 2.3), "cast")
    _arrow(ax, (4.4, 2.3), (4.9, 2.3))
    _arrow(ax, (6.8, 2.3), (7.3, 2.3))
    _arrow(ax, (8.25, 1.9), (8.25, 1.1))
    _arrow(ax, (7.3, 0.7), (6.8, 0.7))
    _arrow(ax, (2.5, 0.7), (1.05, 1.9), rad=-0.3)
    ax.text(9.4, 2.3, "autocast picks the\nprecision per op", fontsize=8, va="center")
    ax.text(9.4, 0.7, "the loss scaler:\nfp16 only", fontsize=8, va="center")
    ax.set_title("Mixed precision: low precision where it is safe and fast, fp32 where it must be", fontsize=10)
    return fig


def draw_gradient_accumulation():
    fig, ax = _canvas(8.5, 3.0)
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 3.2)
    ax.text(0.05, 2.55, "one batch of 64", fontsize=9, va="center")
    _box(ax, 1.8, 2.25, 6.0, 0.6, "forward + backward on 64 samples (memory for 64)", C_FP32)
    _box(ax, 8.2, 2.25, 1.5, 0.6, "step", C_ACT)
    ax.text(0.05, 1.05, "4 micro-batches\nof 16", fontsize=9, va="center")
    for k in range(4):
        _box(ax, 1.8 + 1.5 * k, 0.75, 1.35, 0.6, f"fwd+bwd 16\n.grad += g/4", C_LOW, fontsize=8)
    _box(ax, 8.2, 0.75, 1.5, 0.6, "step, zero", C_ACT)
    ax.text(4.8, 0.25, "same gradient, a quarter of the activation memory, four times the passes",
            fontsize=8, ha="center", color=C_TEXT)
    ax.set_title("Gradient accumulation: sum the gradients of small batches, then take one step", fontsize=10)
    return fig


def draw_ring_allreduce():
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.4))
    n = 4
    for ax, title, phase in zip(axes, ("1. reduce-scatter: n-1 steps", "2. all-gather: n-1 steps"),
                                ("partial sums travel", "finished chunks travel")):
        ax.set_axis_off()
        ax.set_xlim(-1.6, 1.6)
        ax.set_ylim(-1.75, 1.5)
        ax.set_aspect("equal")
        pts = [(math.cos(math.pi / 2 - 2 * math.pi * k / n), math.sin(math.pi / 2 - 2 * math.pi * k / n))
               for k in range(n)]
        for k, (x, y) in enumerate(pts):
            ax.add_patch(plt.Circle((x, y), 0.3, color=C_FP32))
            ax.text(x, y, f"w{k}", ha="center", va="center", color="white", fontsize=9)
            nx, ny = pts[(k + 1) % n]
            _arrow(ax, (x + 0.3 * (nx - x) / 1.414, y + 0.3 * (ny - y) / 1.414),
                   (nx - 0.3 * (nx - x) / 1.414, ny - 0.3 * (ny - y) / 1.414), color=C_LOW, rad=-0.25)
        ax.set_title(title, fontsize=9)
        ax.text(0, -1.55, phase + "; each send is 1/n of the gradient", ha="center", va="center", fontsize=8)
    fig.suptitle("Ring all-reduce: each worker sends 2(n-1)/n of the gradient, whatever n is", fontsize=10)
    return fig


def draw_zero_stages():
    fig, ax = _canvas(8.5, 3.4)
    rows = [("DDP", (1, 1, 1)), ("ZeRO-1", (1, 1, 0)), ("ZeRO-2", (1, 0, 0)), ("ZeRO-3 / FSDP", (0, 0, 0))]
    parts = (("weights", C_FP32), ("gradients", C_ACT), ("optimizer state", C_LOW))
    widths = (1.0, 1.0, 2.0)  # Adam keeps two moments: twice the weights
    n_gpus = 4
    ax.set_xlim(-3.4, n_gpus * 4.4)
    ax.set_ylim(-0.8, len(rows))
    for r, (label, replicated) in enumerate(reversed(rows)):
        y = r
        ax.text(-3.3, y + 0.35, label, fontsize=9, va="center")
        for g in range(n_gpus):
            x = g * 4.4
            for (name, color), width, rep in zip(parts, widths, replicated):
                if rep:
                    ax.add_patch(Rectangle((x, y), width, 0.7, fc=color, ec="white"))
                else:  # sharded: this GPU keeps a quarter
                    ax.add_patch(Rectangle((x, y), width, 0.7, fc="white", ec=color, ls=":"))
                    ax.add_patch(Rectangle((x + width * g / n_gpus, y), width / n_gpus, 0.7, fc=color, ec="white"))
                x += width
    for g in range(n_gpus):
        ax.text(g * 4.4 + 2.0, -0.45, f"GPU {g}", ha="center", fontsize=8)
    for k, (name, color) in enumerate(parts):
        ax.add_patch(Rectangle((k * 4.4, len(rows) - 0.05), 0.3, 0.25, fc=color))
        ax.text(k * 4.4 + 0.4, len(rows) + 0.07, name, fontsize=8, va="center")
    ax.set_title("ZeRO: each stage shards one more kind of state across the GPUs (dotted: held elsewhere)",
                 fontsize=10, pad=22)
    return fig


def draw_pipeline_bubble():
    fig, ax = plt.subplots(figsize=(8.5, 2.8))
    stages, micro = 4, 4
    for s in range(stages):
        for m in range(micro):
            ax.add_patch(Rectangle((s + m, stages - 1 - s), 1, 0.8, fc=C_FP32, ec="white"))
            ax.text(s + m + 0.5, stages - 1 - s + 0.4, f"F{m}", ha="center", va="center", color="white", fontsize=8)
            start = stages + micro - 1 + (stages - 1 - s) + m
            ax.add_patch(Rectangle((start, stages - 1 - s), 1, 0.8, fc=C_LOW, ec="white"))
            ax.text(start + 0.5, stages - 1 - s + 0.4, f"B{m}", ha="center", va="center", color="white",
                    fontsize=8)
    end = 2 * (stages + micro - 1)
    for s in range(stages):
        y = stages - 1 - s
        busy = {(s + m) for m in range(micro)} | {stages + micro - 1 + (stages - 1 - s) + m for m in range(micro)}
        for t in range(end):
            if t not in busy:
                ax.add_patch(Rectangle((t, y), 1, 0.8, fc=C_IDLE, ec="white", hatch="//"))
    ax.set_xlim(0, end)
    ax.set_ylim(-0.2, stages)
    ax.set_yticks([stages - 1 - s + 0.4 for s in range(stages)], [f"stage {s}" for s in range(stages)])
    ax.set_xticks([])
    ax.set_xlabel("time")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title("Pipeline parallelism: grey is the bubble, where a stage waits (smaller with more micro-batches)",
                 fontsize=10)
    return fig


def draw_kv_cache():
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.0))
    steps = 5
    for ax, cached in zip(axes, (False, True)):
        ax.set_axis_off()
        ax.set_xlim(-0.6, steps + 1)
        ax.set_ylim(-0.5, steps + 0.3)
        for t in range(steps):
            y = steps - 1 - t
            for k in range(t + 1):
                recomputed = not cached or k == t
                ax.add_patch(Rectangle((k + 0.6, y), 0.9, 0.8, fc=C_LOW if recomputed else C_FP32, ec="white"))
            ax.text(0.5, y + 0.4, f"token {t + 1}", fontsize=8, va="center", ha="right")
        ax.set_title("with a KV cache: one new K,V row per token" if cached
                     else "without: every token recomputes all K,V", fontsize=9)
    axes[1].text(3.5, -0.35, "orange: computed at this step; blue: read from the cache", fontsize=8, ha="center")
    fig.suptitle("The KV cache turns quadratic recomputation into one row per generated token", fontsize=10, y=1.04)
    return fig


def draw_lora():
    fig, ax = _canvas(8.0, 3.2)
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 3.4)
    _box(ax, 0.2, 1.3, 1.2, 0.8, "x\n(d)", C_TEXT)
    _box(ax, 3.0, 2.1, 2.6, 1.0, "W (d x k)\nfrozen: no gradient,\nno optimizer state", C_FP32)
    _box(ax, 2.6, 0.3, 1.3, 1.0, "A (r x d)\ntrained", C_LOW)
    _box(ax, 4.7, 0.3, 1.3, 1.0, "B (k x r)\nstarts at 0", C_LOW)
    _box(ax, 7.0, 1.3, 0.8, 0.8, "+", C_ACT, fontsize=14)
    _box(ax, 8.6, 1.3, 1.2, 0.8, "h\n(k)", C_TEXT)
    _arrow(ax, (1.4, 1.9), (3.0, 2.5))
    _arrow(ax, (1.4, 1.5), (2.6, 0.8))
    _arrow(ax, (3.9, 0.8), (4.7, 0.8), "r values")
    _arrow(ax, (5.6, 2.5), (7.0, 1.9))
    _arrow(ax, (6.0, 0.8), (7.0, 1.5), "x alpha/r", offset=(0.55, -0.35))
    _arrow(ax, (7.8, 1.7), (8.6, 1.7))
    ax.set_title("LoRA: the frozen weight plus a trained low-rank path B·A (r much smaller than d, k)", fontsize=10)
    return fig


def draw_pruning():
    rng = np.random.default_rng(7)
    fig, axes = plt.subplots(1, 3, figsize=(8.5, 3.0))
    dense = rng.normal(size=(8, 8))
    unstructured = dense.copy()
    unstructured[np.abs(dense) < np.quantile(np.abs(dense), 0.5)] = 0
    keep_rows = np.argsort(-np.linalg.norm(dense, axis=1))[:4]
    channel = np.zeros_like(dense)
    channel[keep_rows] = dense[keep_rows]
    titles = ("dense", "unstructured: half the weights zero,\nsame shape (needs sparse kernels)",
              "channel: half the rows removed,\na smaller dense matrix (ordinary kernels)")
    for ax, w, title in zip(axes, (dense, unstructured, channel), titles):
        colours = np.where(w == 0, 0.0, 1.0)
        ax.imshow(colours, cmap=matplotlib.colors.ListedColormap([C_IDLE, C_FP32]), vmin=0, vmax=1)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(title, fontsize=8)
    fig.suptitle("Pruning: which zeros a computer can skip depends on their pattern", fontsize=10)
    return fig


def draw_backfilling():
    fig, ax = plt.subplots(figsize=(8.5, 3.0))
    jobs = [  # (gpu rows, start, length, label, colour)
        ((0, 1), 0, 6, "job A (2 GPUs)", C_FP32),
        ((2,), 0, 2, "B", C_FP32),
        ((0, 1, 2, 3), 6, 3, "job C (4 GPUs): reserved start", C_LOW),
        ((2, 3), 2, 3, "D backfilled: ends before C's start", C_ACT),
    ]
    for rows, start, length, label, colour in jobs:
        for r in rows:
            ax.add_patch(Rectangle((start, r), length, 0.85, fc=colour, ec="white"))
        ax.text(start + length / 2, rows[(len(rows) - 1) // 2] + 0.42, label,
                ha="center", va="center", color="white", fontsize=8, zorder=5)
    ax.add_patch(Rectangle((0, 3), 2, 0.85, fc=C_IDLE, ec="white", hatch="//"))
    ax.add_patch(Rectangle((5, 2), 1, 1.85, fc=C_IDLE, ec="white", hatch="//"))
    ax.axvline(6, color=C_LOW, ls="--", lw=1)
    ax.set_xlim(0, 9.2)
    ax.set_ylim(-0.1, 4)
    ax.set_yticks([r + 0.42 for r in range(4)], [f"GPU {r}" for r in range(4)])
    ax.set_xticks([])
    ax.set_xlabel("time")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title("EASY backfilling: a later small job runs in a hole if it cannot delay the first job's reservation",
                 fontsize=10)
    return fig


FIGURES = (
    Figure("roofline", "00", r"roofline",
           "the roofline model: attainable speed against arithmetic intensity.",
           "A log-log plot: a line rising with arithmetic intensity (memory-bound) meets a flat roof "
           "(compute-bound) at the ridge point; a vector add sits low on the slope, a large matmul near the roof.",
           draw_roofline),
    Figure("ring_allreduce", "08", r"all-reduce",
           "ring all-reduce in two phases, each of n-1 steps.",
           "Four workers in a ring pass chunks to their neighbour: first partial sums (reduce-scatter), "
           "then finished chunks (all-gather); each send carries one n-th of the gradient.",
           draw_ring_allreduce),
    Figure("mixed_precision", "01", r"Change 1\W+autocast",
           "how a mixed-precision step moves data between precisions.",
           "Boxes and arrows: fp32 master weights are cast to bf16 or fp16 for the forward matmuls, the loss "
           "is kept in fp32 and scaled for fp16, gradients come back in low precision, are unscaled and checked, "
           "and the optimizer updates the fp32 master weights.",
           draw_mixed_precision),
    Figure("gradient_accumulation", "02", r"Change 1\W+accumulate",
           "one batch of 64 against four accumulated micro-batches of 16.",
           "Two timelines: one long forward-and-backward on 64 samples then a step, against four short passes "
           "on 16 samples each adding a quarter of their gradient into .grad, then one step.",
           draw_gradient_accumulation),
    Figure("pruning", "06", r"structured pruning: remove whole channels",
           "unstructured against channel pruning of one weight matrix.",
           "Three 8-by-8 grids: a dense matrix; the same matrix with half its entries zero in a scattered "
           "pattern; and one with half its rows removed, which leaves a smaller dense matrix.",
           draw_pruning),
    Figure("pipeline_bubble", "11", r"pipeline",
           "pipeline parallelism over four stages and four micro-batches.",
           "A timeline of four stages: forward blocks move down the stages one step apart, backward blocks "
           "come back up; hatched grey cells at the start and end are the bubble, where a stage waits.",
           draw_pipeline_bubble),
    Figure("kv_cache", "12", r"Change \d\W+generation with and without a KV cache",
           "attention's keys and values recomputed at every step, against read from a cache.",
           "Two triangles of cells, one row per generated token: without a cache every cell of every row is "
           "computed again; with a cache only the last cell of each row is new and the rest are read.",
           draw_kv_cache),
    Figure("lora", "12", r"Change \d\W+full fine-tuning against LoRA",
           "LoRA adds a trained low-rank path beside a frozen weight.",
           "The input x goes through the frozen weight W and, in parallel, through a small matrix A down to r "
           "values and B back up; the two results are added to give the output h.",
           draw_lora),
    Figure("backfilling", "14", r"Change \d\W+backfilling",
           "EASY backfilling on four GPUs.",
           "A Gantt chart of four GPUs: job A holds two GPUs, the four-GPU job C has a reserved start when A "
           "ends, and the small job D runs early on the idle GPUs because it ends before C's reservation.",
           draw_backfilling),
    Figure("zero_stages", "11", r"Change \d\W+shard the training state",
           "what each GPU holds under DDP and ZeRO's three stages.",
           "Four rows (DDP, ZeRO-1, ZeRO-2, ZeRO-3) of four GPUs each holding weights, gradients and "
           "optimizer state: DDP replicates all three; each ZeRO stage keeps only a quarter of one more kind.",
           draw_zero_stages),
)


def lesson_path(lessons_dir: Path, number: str) -> Path:
    """The instructor copy of lesson ``number`` under ``lessons_dir``."""
    found = sorted((lessons_dir / "instructor").glob(f"{number}_*.ipynb"))
    if not found:
        raise FileNotFoundError(f"no instructor copy of lesson {number} in {lessons_dir / 'instructor'}")
    return found[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m greenlab.course.figures", description=__doc__.split("\n")[0])
    parser.add_argument("--lessons", type=Path, default=Path("lessons"), help="the lessons folder (default: lessons)")
    parser.add_argument("--check", action="store_true", help="only report lessons that lack their figure")
    args = parser.parse_args(argv)
    absent = []
    for fig in FIGURES:
        path = lesson_path(args.lessons, fig.lesson)
        nb = json.loads(path.read_text(encoding="utf-8"))
        if args.check:
            if missing(nb, fig):
                absent.append(f"{path.name}: figure {fig.name!r}")
            continue
        index = place(nb, fig)
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{path.name}: figure {fig.name!r} at cell {index}")
    if absent:
        print("missing figures:", *absent, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
