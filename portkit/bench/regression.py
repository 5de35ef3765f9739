"""A new run against a saved baseline: paired by op, case, direction and implementation,
and noise-aware.

A pair counts as a regression only when both hold:
- the new median is slower than the baseline's by more than ``threshold`` (a fraction:
  0.10 is 10%), and
- the slowdown is outside the measured spread: the new run's first quartile lies above
  the baseline's third quartile, so the two middle halves of the samples do not overlap.

A quiet machine thus flags a 12% slowdown with a 10% threshold, and a noisy one does not
flag a 12% jump of its median that its own spread covers. Faster pairs are reported the
same way ("faster"), so a baseline can be refreshed on purpose. A pair whose new run
failed (``Measurement.failed``: a wrong output, a call that raised) is a regression
whatever the times.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from portkit.bench.model import Measurement, Report

if TYPE_CHECKING:
    from portkit.bench.stats import Summary

DEFAULT_THRESHOLD = 0.10

REGRESSED = "regressed"
FASTER = "faster"
SAME = "same"
NOISY = "within noise"
NEW = "new"
MISSING = "missing"
WRONG = "wrong"


@dataclass(frozen=True)
class Verdict:
    key: tuple[str, str, str, str]  # op, case, direction, implementation
    status: str
    ratio: float | None  # new median / baseline median
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.status in (REGRESSED, WRONG)


def judge(baseline: Measurement | None, current: Measurement | None, threshold: float) -> Verdict:
    """One pair's verdict (see the module's docstring)."""
    # mypy: both could be None; a verdict is only asked for a pair with one side at least
    key = (current or baseline).key  # type: ignore[union-attr]
    if current is None:
        return Verdict(key, MISSING, None, "in the baseline, not in this run")
    if current.failed:
        return Verdict(key, WRONG, None, f"{current.status.value}: {current.detail}")
    if baseline is None or baseline.time is None:
        return Verdict(key, NEW, None, "no baseline time")
    if current.time is None:
        return Verdict(key, MISSING, None, f"{current.status.value}: {current.detail}")
    old, new = baseline.time, current.time
    ratio = new.median / old.median
    if ratio > 1 + threshold:
        if new.q1 > old.q3:
            return Verdict(key, REGRESSED, ratio, _spread(old, new))
        return Verdict(key, NOISY, ratio, _spread(old, new))
    if ratio < 1 / (1 + threshold) and new.q3 < old.q1:
        return Verdict(key, FASTER, ratio, _spread(old, new))
    return Verdict(key, SAME, ratio)


def _spread(old: Summary, new: Summary) -> str:
    return (
        f"median {old.median:.1f} -> {new.median:.1f} us; "
        f"IQR [{old.q1:.1f}, {old.q3:.1f}] -> [{new.q1:.1f}, {new.q3:.1f}] us"
    )


def compare_reports(
    baseline: Report, current: Report, threshold: float = DEFAULT_THRESHOLD
) -> list[Verdict]:
    """A verdict for every measurement of either report, in the current run's order."""
    if not threshold > 0:
        raise ValueError(f"threshold must be > 0, got {threshold}")
    old = {m.key: m for m in baseline.measurements}
    verdicts = [judge(old.pop(m.key, None), m, threshold) for m in current.measurements]
    verdicts += [judge(m, None, threshold) for m in old.values()]
    return verdicts
