"""``greenlab run``: train headless and print a results table (``--workers`` for data-parallel
runs through torchrun and their scaling table)."""

from __future__ import annotations

import argparse
import sys

from greenlab.base import limits
from greenlab.session import config
from greenlab.training import data as gl_data, models
from greenlab.techniques.ddp import launch
from greenlab.techniques.ddp.launch import DDPError, parse_worker_counts
from greenlab.experiments import compare
from greenlab.training.loop import Interrupted, TrainConfig
from greenlab.techniques.ddp.results import energy_breakdown, scaling_report

# library argument names in error messages, as `greenlab run` spells them on the command line
_RUN_OPTION_NAMES = {"n_train": "--n-train", "n_test": "--n-test", "batch_size": "--batch-size",
                     "accum_steps": "--accum", "max_steps": "--max-steps", "target_accuracy": "--target",
                     "epochs": "--epochs", "lr": "--lr", "region": "--region", "dataset": "--dataset",
                     "per_worker_batch": "--batch-size"}


def run_error(exc: Exception) -> str:
    """``greenlab run``'s one-line error for a ValueError from the library: a message that starts
    with a library argument's name (``n_train must be ...``) names the option instead."""
    text = str(exc)
    name, sep, rest = text.partition(" ")
    return f"greenlab run: error: {_RUN_OPTION_NAMES.get(name, name)}{sep}{rest}"


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``greenlab run``."""
    parser.add_argument("--dataset", default="fashion-mnist", help="fashion-mnist, cifar10 or synthetic")
    parser.add_argument("--model", default="cnn", help="cnn, resnet or mlp")
    parser.add_argument("--precision", default="fp32",
                        help="fp32, bf16 or fp16; several separated by commas are compared, e.g. fp32,bf16")
    parser.add_argument("--batch-size", type=int, default=128, help="micro-batch size (samples)")
    parser.add_argument("--accum", type=int, default=1, help="gradient accumulation steps")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=None, help="stop after this many optimizer steps")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=0, help="discarded warm-up rounds")
    parser.add_argument("--target", type=float, default=None, help="target validation accuracy in (0, 1]")
    parser.add_argument("--n-train", type=int, default=None, help="training images (default: all, 2000 in quick mode)")
    parser.add_argument("--n-test", type=int, default=None, help="test images (default: all, 500 in quick mode)")
    parser.add_argument("--region", default="WORLD", help="grid region for CO2e")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--quick", action="store_true", help="small sizes (also GREENLAB_QUICK=1 or CI)")
    parser.add_argument("--no-save", action="store_true", help="do not append runs to the results log")
    parser.add_argument("--workers", default=None,
                        help="data-parallel worker processes through torchrun, e.g. 2; several "
                             "separated by commas print a scaling table, e.g. 1,2 (fp32 only)")


def run_main(args) -> int:
    """Run ``greenlab run``: train each precision variant and print a results table.
    Bad input prints a clear message and returns 2. Ctrl-C stops the whole comparison: the
    finished runs are printed (the cut-short one is named and left out) and it returns 130.
    ``--workers`` runs data-parallel training through torchrun instead (``greenlab.techniques.ddp``)."""
    try:
        settings = config.setup(seed=0, quick=True if args.quick else None, device=args.device)
        precisions = [p.strip() for p in str(args.precision).split(",") if p.strip()]
        if not precisions:
            raise ValueError("--precision needs at least one of fp32, bf16, fp16")
        if len(set(precisions)) != len(precisions):
            raise ValueError(f"--precision lists a value twice: {args.precision}")
        if args.model not in models.MODELS:
            raise ValueError(f"unknown model {args.model!r}; allowed: {', '.join(models.MODELS)}")
        # checked here, before the dataset is read, as compare() will check them
        limits.steps("--repeats", args.repeats, what="rounds of training runs")
        limits.steps("--warmup", args.warmup, low=0, what="rounds of training runs")
        # 0 is refused by data.load like any other bad size; only "not given" means the default
        n_train = args.n_train if args.n_train is not None else (2000 if settings.quick else None)
        n_test = args.n_test if args.n_test is not None else (500 if settings.quick else None)
        variants = {p: TrainConfig(precision=p, batch_size=args.batch_size, accum_steps=args.accum,
                                   epochs=args.epochs, max_steps=args.max_steps, lr=args.lr,
                                   target_accuracy=args.target, region=args.region, label=p)
                    for p in precisions}
        workers = None if args.workers is None else parse_worker_counts(args.workers)
        ds = gl_data.load(args.dataset, n_train=n_train, n_test=n_test)
    except ValueError as exc:
        print(run_error(exc), file=sys.stderr)
        return 2
    if workers is not None:
        return run_workers_command(args, ds, workers)
    c, h, w = ds.input_shape
    if args.model == "mlp":
        kw = {"input_shape": (c, h, w), "num_classes": ds.num_classes}
    else:
        kw = {"in_channels": c, "num_classes": ds.num_classes}

    def model_fn():
        return models.build(args.model, **kw)

    try:
        cmp = compare(variants, model_fn, ds, repeats=args.repeats, warmup=args.warmup,
                      save=not args.no_save)
    except Interrupted as exc:
        cmp = exc.result
    except ValueError as exc:
        print(run_error(exc), file=sys.stderr)
        return 2
    if cmp.interrupted and not cmp.repeats:
        print("greenlab run: interrupted before any repeat finished; nothing to compare "
              "(finished runs are in the results log)", file=sys.stderr)
        return 130
    print(cmp)
    if len(precisions) > 1:
        print()
        print(cmp.stakeholder_summary())
    if cmp.interrupted:
        print("greenlab run: interrupted; the table holds the finished runs only", file=sys.stderr)
        return 130
    return 0


def run_workers_command(args, data, counts: list) -> int:
    """``greenlab run --workers N[,M...]``: one data-parallel run per worker count through
    torchrun, each with its energy reduced over all workers and nodes, then the scaling table.
    Returns the exit code (2 for an option the data-parallel runs do not support)."""
    unsupported = {"--precision (only fp32)": [p.strip() for p in str(args.precision).split(",")] != ["fp32"],
                   "--target": args.target is not None, "--repeats": args.repeats != 1,
                   "--warmup": args.warmup != 0}
    bad = [name for name, given in unsupported.items() if given]
    if bad:
        print(f"greenlab run: error: --workers does not support {', '.join(bad)}", file=sys.stderr)
        return 2

    results = []
    for n in counts:
        try:
            r = launch.run_ddp(n, data=data, model={"name": args.model}, per_worker_batch=args.batch_size,
                               accum_steps=args.accum, epochs=args.epochs, max_steps=args.max_steps,
                               lr=args.lr, device=args.device, timeout_s=24 * 3600.0,
                               label=f"{n} worker(s)")
        except ValueError as exc:
            print(run_error(exc), file=sys.stderr)
            return 2
        except DDPError as exc:
            print(f"greenlab run: error: {failure_line(exc)}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"greenlab run: interrupted: the {n}-worker launch was stopped and its workers "
                  "ended", file=sys.stderr)
            return 130
        results.append(r)
        print(r.summary())
        for line in energy_breakdown(r):
            print("  " + line)
    if len(results) > 1:
        print()
        print(scaling_report(results).text())
    print("(data-parallel runs are not added to the results log)")
    return 0


def failure_line(exc) -> str:
    """One line from a ``DDPError``: what failed and each worker's own error (no stderr tail)."""
    lines = str(exc).splitlines()
    errors = [ln.strip() for ln in lines if ln.startswith("  rank ")]
    head = lines[0].rstrip(".") if lines else "the torchrun launch failed"
    if not errors:
        last = [ln[len("  | "):].strip() for ln in lines if ln.startswith("  | ") and ln.strip(" |")]
        errors = last[-1:]
    return head + (": " + "; ".join(errors) if errors else "")
