"""The honest bills of lessons 09 and 10, without the rest of the lessons: each recipe's learning-rate
search as its lesson runs it, then the naive and the green recipe in paired, interleaved repeats, and the
energy to a model at the validation target, the search included, for recipes that reached it in every
repeat (``greenlab.course.bills.compare_bills``).

    .venv/bin/python benchmarks/recipe_bills.py [--lesson 09|10] [--size cpu|quick|full] [--repeats 3]

Lesson 09 runs at ``--size`` (default: what ``gl.budget`` picks here, as the lesson does); lesson 10 at
its quick size on a CPU (as the lesson does). The last line printed for each lesson is its verdict. The
machine's load average is printed before and after: a busy machine stretches the runs, and the CPU
estimate charges idle power for the stretched time.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import greenlab as gl
from greenlab.course import bills, recipes


def capstone(settings, size: str | None, repeats: int) -> None:
    size = size or gl.budget(full="full", quick="quick", cpu="cpu")
    naive = recipes.naive_recipe(size=size)
    green = recipes.green_recipe(device=settings.device, size=size)
    ds = gl.data.load(**naive.data_spec)
    samples = recipes.capstone_size(size)["tuning_samples"]
    tuning = {n: recipes.tune_lr(r.model_fn, ds, r.config, candidates=r.lr_candidates(), samples=samples)
              for n, r in (("naive", naive), ("green", green))}
    for name, recipe in (("naive", naive), ("green", green)):
        print(tuning[name].table())
    naive = naive._replace(config=dataclasses.replace(naive.config, lr=tuning["naive"].best_lr))
    green = green._replace(config=dataclasses.replace(green.config, lr=tuning["green"].best_lr))
    cmp = recipes.compare_ends(naive, green, ds, repeats=repeats, warmup=0)
    search = {n: t.joules for n, t in tuning.items()}
    print(bills.bill_table(cmp, search))
    verdict = bills.compare_bills(cmp, "naive", "green", search)
    print(f"lesson 09 ({size}, {green.config.precision}):", verdict.sentence())


def language_model(settings, repeats: int) -> None:
    """bf16 and the fused optimizer stay off: lesson 10 takes them only where its own measurements
    (its Changes 1 and 4) find a saving, and this script does not repeat those."""
    corpus = gl.lm.load_corpus("pydoc-topics")
    quick = settings.quick
    naive = recipes.naive_lm_recipe(quick=quick)
    green = recipes.green_lm_recipe(device=settings.device, quick=quick, bf16=False)
    best, _, spent_naive = gl.lm.tune_lr(lambda cfg: naive.model_fn(), corpus, naive.config, naive.lr_candidates())
    naive = naive._replace(config=dataclasses.replace(naive.config, lr=best, seed=recipes.ESTIMATE_SEED))
    best, _, spent_green, _ = recipes.halving_lm_lr(lambda cfg: green.model_fn(), corpus, green.config,
                                                    green.lr_candidates())
    green = green._replace(config=dataclasses.replace(green.config, lr=best, seed=recipes.ESTIMATE_SEED))
    cmp = recipes.compare_ends(naive, green, corpus, repeats=repeats)
    search = {"naive": spent_naive, "green": spent_green}
    print(bills.bill_table(cmp, search))
    print("lesson 10, runs alone:", bills.compare_bills(cmp, "naive", "green").sentence())
    print("lesson 10:", bills.compare_bills(cmp, "naive", "green", search).sentence())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lesson", choices=("09", "10"), action="append", help="default: both")
    parser.add_argument("--size", choices=recipes.SIZES, default=None, help="lesson 09's size (default: gl.budget's)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    settings = gl.setup()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY', 'default')}; "
          f"bf16 {'native' if gl.hardware.precision_support('bf16', 'cpu').native else 'emulated'} on this CPU")
    t0 = time.perf_counter()
    for lesson in args.lesson or ("09", "10"):
        if lesson == "09":
            capstone(settings, args.size, args.repeats)
        else:
            language_model(settings, args.repeats)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{time.perf_counter() - t0:.0f} s of wall-clock time")


if __name__ == "__main__":
    main()
