"""The honest bill of two recipes (lessons 09 and 10): the energy to deliver a model that reaches
the validation target, the tuning included, for a recipe only if every repeat reached it.

A recipe that missed the target in any repeat has no energy to the target: :func:`target_bill`
says how many repeats reached it instead of a figure, :func:`compare_bills` refuses a factor, and
:func:`bill_table` shows both. The runs come from ``greenlab.course.recipes`` (``compare_ends``,
``compare_ladder``), whose recipes the lessons compare.
"""

from __future__ import annotations

import dataclasses

from greenlab.base.units import plain_number
from greenlab.experiments.verdicts import paired, short_flags


def reached_in_every_repeat(comparison, row) -> bool:
    """True when every finished run of ``row`` reached its target (the validation split): only then
    does the row have an energy to the target (each run's ``joules_to_target``)."""
    runs = comparison.runs[row]
    return bool(runs) and all(_to_target_joules(r) is not None for r in runs)


@dataclasses.dataclass
class TargetBill:
    """The energy to a model that reaches the target on the validation split, for one row of a
    comparison: per repeat, the learning-rate search (paid once, the same figure in every repeat)
    plus the run's energy until its first evaluation at the target; None in a repeat that missed.
    A row that missed in any repeat has no energy to the target: ``joules`` is then None."""

    name: str
    repeats: int
    reached: int
    tuning_joules: float
    per_repeat: list

    @property
    def complete(self) -> bool:
        """Every repeat reached the target."""
        return self.repeats > 0 and self.reached == self.repeats

    @property
    def joules(self) -> float | None:
        """The mean over the repeats, search included; None unless every repeat reached the target."""
        if not self.complete:
            return None
        return sum(self.per_repeat) / len(self.per_repeat)

    def cell(self) -> str:
        """A table cell: "12.3 J (3 of 3 reached)" or "none: 1 of 3 reached"."""
        if not self.complete:
            return f"none: {self.reached} of {self.repeats} reached"
        return f"{plain_number(self.joules, 4)} J ({self.reached} of {self.repeats} reached)"


def target_bill(comparison, row, tuning_joules: float = 0.0) -> TargetBill:
    """``row``'s :class:`TargetBill` in ``comparison`` (a ``gl.compare`` or ``compare_ladder``
    result): ``tuning_joules`` (its learning-rate search, 0 where none ran for it) plus each run's
    energy to the target."""
    if row not in comparison.names:
        raise ValueError(f"unknown row {row!r}; this comparison has {', '.join(comparison.names)}")
    if isinstance(tuning_joules, bool) or not isinstance(tuning_joules, (int, float)) or not tuning_joules >= 0:
        raise ValueError(f"tuning_joules must be a number >= 0, got {tuning_joules!r}")
    values = [_to_target_joules(r) for r in comparison.runs[row]]
    per_repeat = [None if v is None else float(tuning_joules) + v for v in values]
    return TargetBill(row, len(values), sum(v is not None for v in values), float(tuning_joules), per_repeat)


@dataclasses.dataclass
class BillVerdict:
    """``baseline``'s :class:`TargetBill` against ``variant``'s: ``factor`` is the paired verdict of
    baseline / variant per repeat (``greenlab.experiments.verdicts.Paired``, so 5 means the variant
    needs a fifth of the energy), or None unless both reached the target in every repeat."""

    baseline: TargetBill
    variant: TargetBill
    factor: object

    def sentence(self) -> str:
        """The verdict in one sentence, with how many repeats of each reached the target."""
        b, v = self.baseline, self.variant
        reach = (f"{b.name} reached the target in {b.reached} of {b.repeats} repeats, "
                 f"{v.name} in {v.reached} of {v.repeats}")
        if self.factor is None:
            missing = [x.name for x in (b, v) if not x.complete]
            verb = "have" if len(missing) > 1 else "has"
            return f"{reach}: {' and '.join(missing)} {verb} no energy to the target, so there is no factor"
        f = self.factor
        if not f.measurable:
            return (f"{reach}; {b.name} / {v.name}: not measurable: {f.short_windows} of {f.n} paired repeat(s) rest "
                    "on energy windows too short to read up to the target, so no factor is claimed")
        if f.low is None:
            return (f"{reach}; {b.name} / {v.name}: {f.estimate:.3g}x over {f.n} paired repeat(s), too few "
                    "for an interval, so no difference is claimed")
        if not f.detectable:
            return (f"{reach}; no detectable difference in energy to the target (95% CI of {b.name} / {v.name}: "
                    f"{f.low:.3g}-{f.high:.3g}x, {f.n} paired repeats)")
        return (f"{reach}; {b.name} / {v.name}: {f.estimate:.3g}x (95% CI {f.low:.3g}-{f.high:.3g}x, "
                f"{f.n} paired repeats), a detectable difference")


def compare_bills(comparison, baseline, variant, tuning_joules: dict | None = None,
                  names: dict | None = None) -> BillVerdict:
    """The honest bill: ``baseline`` against ``variant`` (rows of ``comparison``) on energy to a
    model that reaches the validation target, each row's search from ``tuning_joules`` ({row: J},
    0 where absent) included, paired by repeat; no factor unless both rows reached the target in
    every repeat, and none where a run's energy window up to its target was too short to read
    (``short_flags``). ``names`` ({row: word}) renames rows in the sentences."""
    tuning_joules, names = dict(tuning_joules or {}), dict(names or {})
    b = target_bill(comparison, baseline, tuning_joules.get(baseline, 0.0))
    v = target_bill(comparison, variant, tuning_joules.get(variant, 0.0))
    b.name, v.name = names.get(baseline, baseline), names.get(variant, variant)
    factor = None
    if b.complete and v.complete:
        factor = paired(b.per_repeat, v.per_repeat, "joules_to_target", b.name, v.name,
                        short=short_flags(comparison.runs[baseline], comparison.runs[variant], "joules_to_target"))
    return BillVerdict(b, v, factor)


def bill_table(comparison, tuning_joules: dict | None = None) -> str:
    """One line per row of ``comparison``: how many repeats reached the target, the row's energy to
    the target (its search included where ``tuning_joules`` names it), and its change against the
    row before it, paired (a verdict only where both rows reached the target in every repeat)."""
    tuning_joules = dict(tuning_joules or {})
    names = list(comparison.names)
    width = max(len(n) for n in names)
    lines = [f"{'row':{width}}  {'reached':>7}  {'search J':>9}  {'energy to target J':>18}  against the row before"]
    previous = None
    for name in names:
        bill = target_bill(comparison, name, tuning_joules.get(name, 0.0))
        search = plain_number(bill.tuning_joules, 4) if name in tuning_joules else "-"
        energy = plain_number(bill.joules, 4) if bill.complete else "none"
        if previous is None:
            against = "(first row)"
        elif not (bill.complete and previous.complete):
            against = "no figure: a row missed the target in some repeat"
        else:
            runs = [[_to_target_joules(r) for r in comparison.runs[n]] for n in (name, previous.name)]

            against = paired(runs[0], runs[1], "joules_to_target", name, previous.name,
                             short=short_flags(comparison.runs[name], comparison.runs[previous.name],
                                               "joules_to_target")).short()
        lines.append(f"{name:{width}}  {bill.reached:>3} of {bill.repeats}  {search:>9}  {energy:>18}  {against}")
        previous = bill
    return "\n".join(lines)




def _to_target_joules(run):
    """A run's energy until its first evaluation at the target (an image run's validation accuracy,
    a language-model run's validation loss), or None where it missed."""
    value = getattr(run, "joules_to_target", None)
    return None if value is None else float(value)
