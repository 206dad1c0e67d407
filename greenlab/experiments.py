"""A/B comparisons: warm-up, repeats in alternating order, spread, confidence intervals, ratios.

    cmp = gl.compare({"fp32": cfg_a, "bf16": cfg_b}, model_fn=make_model, data=ds, repeats=3)
    print(cmp)                      # a plain table
    cmp.ratios["bf16"]["joules"]    # energy of bf16 / energy of fp32
    print(cmp.stakeholder_summary())

Also the ``greenlab run`` command (``add_run_arguments`` / ``run_main``).
"""

from __future__ import annotations

import argparse
import dataclasses
import html
import math
import sys

from greenlab.units import format_energy

METRICS = ("seconds", "joules", "final_accuracy", "seconds_to_target", "joules_to_target",
           "samples_per_second", "co2e_g")
_RATIO_METRICS = ("seconds", "joules", "seconds_to_target", "joules_to_target", "samples_per_second", "co2e_g")


@dataclasses.dataclass
class Stat:
    """Summary of one metric over repeats. ``ci95``: half-width of a 95% Student-t interval
    for the mean (None with fewer than 2 values). ``n`` counts runs that had a value."""

    n: int
    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    ci95: float | None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def compare(variants: dict, model_fn, data, repeats: int = 3, warmup: int = 1, callbacks=(),
            log: bool = False, device=None, sources=None, idle=None, save: bool = True,
            results_path=None) -> "Comparison":
    """Train each variant ``repeats`` times and summarise.

    variants: {name: TrainConfig}; the first is the baseline for ratios.
    model_fn: returns a fresh model; it is called after seeding with the variant's seed, so
      every run starts from the same weights.
    warmup: rounds of every variant run first and discarded (not saved), to warm caches,
      clocks and allocators. Repeat r runs the variants in an order rotated by r, so no
      variant always goes first.
    """
    from greenlab.config import seed_everything
    from greenlab.train import TrainConfig, train

    if not isinstance(variants, dict) or not variants:
        raise ValueError("variants must be a non-empty dict {name: TrainConfig}")
    for name, cfg in variants.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"variant names must be non-empty strings, got {name!r}")
        if not isinstance(cfg, TrainConfig):
            raise ValueError(f"variant {name!r} must be a TrainConfig, got {type(cfg).__name__}")
    if not callable(model_fn):
        raise ValueError("model_fn must be a callable that returns a fresh torch.nn.Module")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")

    names = list(variants)
    configs = {n: (c if c.label else dataclasses.replace(c, label=n)) for n, c in variants.items()}

    def one(name, keep):
        cfg = configs[name]
        seed_everything(cfg.seed)
        model = model_fn()
        return train(model, data, cfg, callbacks=callbacks, device=device, log=log, sources=sources,
                     idle=idle, save=save and keep, results_path=results_path)

    for _ in range(warmup):
        for name in names:
            one(name, keep=False)
    runs = {n: [] for n in names}
    order = []
    for r in range(repeats):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            order.append(name)
            runs[name].append(one(name, keep=True))
    return Comparison(names, runs, order)


class Comparison:
    """Results of ``compare``: ``runs`` (name -> list of RunResult), ``stats`` (name -> metric
    -> Stat), ``ratios`` (name -> metric -> mean / baseline mean), ``order`` (run order)."""

    def __init__(self, names, runs, order):
        self.names = list(names)
        self.baseline = self.names[0]
        self.runs = runs
        self.order = order
        self.stats = {n: {m: summarize([getattr(r, m) for r in runs[n]]) for m in METRICS} for n in names}
        self.ratios = {}
        for n in names:
            self.ratios[n] = {}
            for m in _RATIO_METRICS:
                a, b = self.stats[n][m].mean, self.stats[self.baseline][m].mean
                self.ratios[n][m] = a / b if (a is not None and b) else None
        first = runs[self.names[0]][0]
        self.provenance = first.provenance
        self.estimated = any(r.estimated for rs in runs.values() for r in rs)
        self.target = first.config.get("target_accuracy")

    @property
    def repeats(self) -> int:
        return len(self.runs[self.baseline])

    def reached_target(self, name) -> bool:
        """True when every run of ``name`` reached the target accuracy."""
        return self.target is not None and all(r.joules_to_target is not None for r in self.runs[name])

    def table(self) -> list:
        """One dict per variant: means, 95% interval half-widths (ci) and ratios to the baseline."""
        rows = []
        for n in self.names:
            s, q = self.stats[n], self.ratios[n]
            rows.append({
                "variant": n, "runs": self.repeats,
                "accuracy": s["final_accuracy"].mean,
                "seconds": s["seconds"].mean, "seconds_ci": s["seconds"].ci95,
                "joules": s["joules"].mean, "joules_ci": s["joules"].ci95,
                "seconds_to_target": s["seconds_to_target"].mean,
                "joules_to_target": s["joules_to_target"].mean,
                "joules_to_target_ci": s["joules_to_target"].ci95,
                "reached_target": f"{s['joules_to_target'].n}/{self.repeats}" if self.target else None,
                "samples_per_second": s["samples_per_second"].mean,
                "energy_ratio": q["joules"], "time_ratio": q["seconds"],
                "estimated": any(r.estimated for r in self.runs[n]),
            })
        return rows

    def __str__(self) -> str:
        lines = self._cells()
        widths = [max(len(r[i]) for r in lines) for i in range(len(lines[0]))]
        text = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in lines]
        text.insert(1, "  ".join("-" * w for w in widths))
        text.append(self._footnote())
        return "\n".join(text)

    def _repr_html_(self) -> str:
        head, *body = self._cells()
        th = "".join(f"<th>{html.escape(c)}</th>" for c in head)
        rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
        return f"<table><tr>{th}</tr>{rows}</table><p>{html.escape(self._footnote())}</p>"

    def _cells(self) -> list:
        """Header and one row of display strings per variant."""
        lines = [["variant", "runs", "accuracy", "time s", "energy J", "to target J", "samples/s",
                  "energy x", "time x"]]
        for row in self.table():
            lines.append([
                row["variant"], str(row["runs"]), _pct(row["accuracy"]),
                _pm(row["seconds"], row["seconds_ci"]), _pm(row["joules"], row["joules_ci"]),
                _pm(row["joules_to_target"], row["joules_to_target_ci"]) if self.target else "-",
                _num(row["samples_per_second"]), _num(row["energy_ratio"], 3), _num(row["time_ratio"], 3)])
        return lines

    def __repr__(self) -> str:
        return str(self)

    def plot(self, ax=None):
        """Bars of energy and time per variant with 95% intervals (std with 1 run).

        ``ax``: None (a new figure with two axes), or a pair of matplotlib axes, or one axes
        (energy only). Energy to target is used when every variant reached the target.
        Returns the axes.
        """
        import matplotlib.pyplot as plt

        if ax is None:
            _, axes = plt.subplots(1, 2, figsize=(9, 3.5))
        elif isinstance(ax, (list, tuple)) or hasattr(ax, "__len__"):
            axes = list(ax)
        else:
            axes = [ax]
        to_target = self.target is not None and all(self.reached_target(n) for n in self.names)
        energy_metric = "joules_to_target" if to_target else "joules"
        time_metric = "seconds_to_target" if to_target else "seconds"
        specs = [(energy_metric, "energy (J)" + (" to target" if to_target else "")),
                 (time_metric, "time (s)" + (" to target" if to_target else ""))]
        for a, (metric, label) in zip(axes, specs):
            means = [self.stats[n][metric].mean or 0.0 for n in self.names]
            errs = [self._err(n, metric) for n in self.names]
            a.bar(self.names, means, yerr=errs, capsize=4, color="#4c9a6a")
            a.set_ylabel(label + (" [estimate]" if self.estimated and "J" in label else ""))
            a.set_title(f"{label}, mean of {self.repeats} run(s)")
        return axes

    def stakeholder_summary(self) -> str:
        """A plain-language paragraph built only from the measured numbers, with units."""
        base = self.baseline
        to_target = self.target is not None and all(self.reached_target(n) for n in self.names)
        e_metric = "joules_to_target" if to_target else "joules"
        t_metric = "seconds_to_target" if to_target else "seconds"
        goal = f"reached {self.target:.0%} test accuracy" if to_target else "finished the same training budget"
        sentences = []
        for n in self.names[1:]:
            e_ratio = self.ratios[n][e_metric]
            t_ratio = self.ratios[n][t_metric]
            e_n, e_b = self.stats[n][e_metric].mean, self.stats[base][e_metric].mean
            t_n, t_b = self.stats[n][t_metric].mean, self.stats[base][t_metric].mean
            if e_ratio is None or t_ratio is None:
                continue
            sentences.append(
                f"{n} {goal} with {_change(e_ratio)} energy than {base} ({format_energy(e_n)} vs {format_energy(e_b)}) "
                f"and in {_change(t_ratio)} time ({t_n:.3g} s vs {t_b:.3g} s).")
        if self.target is not None and not to_target:
            missed = [n for n in self.names if not self.reached_target(n)]
            sentences.append(f"Not every run reached the {self.target:.0%} target ({', '.join(missed)} "
                             "missed it at least once), so totals for the whole run are compared instead.")
        acc = ", ".join(f"{n} {_pct(self.stats[n]['final_accuracy'].mean)}" for n in self.names)
        sentences.append(f"Final test accuracy: {acc}.")
        p = self.provenance
        where = p.get("gpu") or p.get("cpu") or p.get("device")
        sentences.append(f"Each figure is the mean of {self.repeats} run(s) per variant, measured on "
                         f"{where} ({p.get('device')}) on {str(p.get('date', ''))[:10]} with torch "
                         f"{p.get('torch')} and greenlab {p.get('greenlab')}; energy sources: "
                         f"{', '.join(f'{k} {v}' for k, v in p.get('energy_sources', {}).items())}.")
        if self.estimated:
            sentences.append("The CPU figures are estimates from a power model, not meter readings, "
                             "so treat differences of a few percent as noise.")
        return " ".join(sentences)

    def _err(self, name, metric):
        s = self.stats[name][metric]
        if s.ci95 is not None:
            return s.ci95
        return s.std or 0.0

    def _footnote(self) -> str:
        est = "; CPU energy is an estimate" if self.estimated else ""
        tgt = f"; target accuracy {self.target:.0%}" if self.target else ""
        return (f"mean ± 95% t-interval half-width over {self.repeats} run(s); ratios vs "
                f"{self.baseline}{tgt}{est}")


def summarize(values) -> Stat:
    """Mean, sample standard deviation, min, max and 95% t-interval of the non-None values."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(xs)
    if n == 0:
        return Stat(0, None, None, None, None, None)
    mean = sum(xs) / n
    if n < 2:
        return Stat(1, mean, None, xs[0], xs[0], None)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    return Stat(n, mean, std, min(xs), max(xs), t_quantile_975(n - 1) * std / math.sqrt(n))


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (bisection on the CDF,
    which is integrated numerically from the density)."""
    if df < 1:
        raise ValueError("df must be >= 1")
    lo, hi = 0.0, 20.0 if df > 1 else 100.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if _t_cdf_from_zero(mid, df) < 0.475:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# --- the `greenlab run` command -------------------------------------------------------------

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
    parser.add_argument("--target", type=float, default=None, help="target test accuracy in (0, 1]")
    parser.add_argument("--n-train", type=int, default=None, help="training images (default: all, 2000 in quick mode)")
    parser.add_argument("--n-test", type=int, default=None, help="test images (default: all, 500 in quick mode)")
    parser.add_argument("--region", default="WORLD", help="grid region for CO2e")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--quick", action="store_true", help="small sizes (also GREENLAB_QUICK=1 or CI)")
    parser.add_argument("--no-save", action="store_true", help="do not append runs to the results log")


def run_main(args) -> int:
    """Run ``greenlab run``: train each precision variant and print a results table.
    Bad input prints a clear message and returns 2."""
    from greenlab import config, data as gl_data, models
    from greenlab.train import TrainConfig

    try:
        settings = config.setup(seed=0, quick=True if args.quick else None, device=args.device)
        precisions = [p.strip() for p in str(args.precision).split(",") if p.strip()]
        if not precisions:
            raise ValueError("--precision needs at least one of fp32, bf16, fp16")
        if len(set(precisions)) != len(precisions):
            raise ValueError(f"--precision lists a value twice: {args.precision}")
        if args.model not in models.MODELS:
            raise ValueError(f"unknown model {args.model!r}; allowed: {', '.join(models.MODELS)}")
        if isinstance(args.repeats, bool) or args.repeats < 1:
            raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
        n_train = args.n_train or (2000 if settings.quick else None)
        n_test = args.n_test or (500 if settings.quick else None)
        variants = {p: TrainConfig(precision=p, batch_size=args.batch_size, accum_steps=args.accum,
                                   epochs=args.epochs, max_steps=args.max_steps, lr=args.lr,
                                   target_accuracy=args.target, region=args.region, label=p)
                    for p in precisions}
        ds = gl_data.load(args.dataset, n_train=n_train, n_test=n_test)
    except ValueError as exc:
        print(f"greenlab run: error: {exc}", file=sys.stderr)
        return 2
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
    except ValueError as exc:
        print(f"greenlab run: error: {exc}", file=sys.stderr)
        return 2
    print(cmp)
    if len(precisions) > 1:
        print()
        print(cmp.stakeholder_summary())
    return 0


# --- helpers ----------------------------------------------------------------------------------

def _t_cdf_from_zero(t: float, df: int, intervals: int = 2000) -> float:
    """P(0 <= T <= t) for Student's t, by Simpson's rule on the density."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def pdf(x):
        return c * (1 + x * x / df) ** (-(df + 1) / 2)

    h = t / intervals
    total = pdf(0.0) + pdf(t)
    for i in range(1, intervals):
        total += (4 if i % 2 else 2) * pdf(i * h)
    return total * h / 3


def _change(ratio: float) -> str:
    if ratio < 1:
        return f"{1 - ratio:.0%} less"
    if ratio > 1:
        return f"{ratio - 1:.0%} more"
    return "the same"




def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def _num(x, digits=4) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _pm(mean, ci) -> str:
    if mean is None:
        return "-"
    return f"{mean:.4g}" + (f" ± {ci:.2g}" if ci is not None else "")
