"""One compared tensor, by whichever rule applies, with its margin.

Against the reference, a float output narrower than float64 meets the measured control
(checking/control.py) unless the op declares a ``portkit.Tolerance`` for it; elements float
atomics summed meet the control plus the summation-order term (checking/order_bound.py).
Everything else (prototype against twin, float64, integers, a declared tolerance) meets
its tolerance as before. Every verdict carries its margin: the largest error over its
bound (below 1 passes), which ``--seeds`` reports as the worst over seeds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from portkit.checking.compare import FIGURE_SLICE, Tolerance, elementwise_errors
from portkit.checking.control import control_bound, control_compare, controlled
from portkit.checking.order_bound import OrderBound, compare_bounded, compare_summed, order_term
from portkit.results import ValueMismatch

if TYPE_CHECKING:
    import torch

    from portkit.checking.reference_run import ControlRuns


@dataclass(frozen=True)
class Control:
    """The control for one tensor: torch in float64 and in the low precision."""

    wide: torch.Tensor
    low: torch.Tensor
    low_dtype: torch.dtype
    factor: float
    # Shared by every implementation compared against this reference run (ControlRuns'):
    # the bound and whether torch's error is measurable depend on the reference only.
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    def bound(self, dtype: torch.dtype, table: Tolerance) -> tuple[torch.Tensor, torch.Tensor]:
        """``control_bound`` for outputs of ``dtype`` with ``table`` as the floor, once."""
        key = ("bound", id(self.wide), dtype, self.factor, table.rtol, table.atol)
        if key not in self.memo:
            self.memo[key] = control_bound(dtype, self.wide, self.low, self.factor, table)
        return self.memo[key]


@dataclass
class TensorVerdict:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    margin: float = 0.0
    mismatches: list[ValueMismatch] = field(default_factory=list)  # values that differ, as data


def check_tensor(
    what: str,
    actual: torch.Tensor,
    expected: torch.Tensor,
    tolerance: Tolerance,
    bound: OrderBound | None,
    sides: tuple[str, str],
    reproduce: str,
    control: Control | None,
) -> TensorVerdict:
    """``actual`` against ``expected`` (or against ``control.wide`` where the control
    applies: ``control`` given, no declared tolerance, a float narrower than float64)."""
    if control is None or not uses_control(actual, expected, tolerance, control):
        problems, notes, differ = compare_bounded(
            what, actual, expected, tolerance, bound, sides, reproduce
        )
        margin = table_margin(actual, expected, tolerance, bound)
        return TensorVerdict(problems, notes, margin, differ)
    verdict = TensorVerdict()
    skip = None
    if bound is not None:  # atomic sums: the control plus every order's spread
        allowed, _ = control.bound(actual.dtype, tolerance)
        # The order bound is kept on the CPU (the atomic tally is host-side); the
        # control's bound is on the output's device: the summed compare runs on the CPU.
        allowed = allowed.cpu() + order_term(bound, actual.dtype)
        _, summed = compare_summed(
            what,
            actual,
            control.wide,
            tolerance,
            bound,
            *sides,
            allowed=allowed,
            formula=f"{control.factor:g}x torch's error + 2 ULP + 2*gamma_n*S",
        )
        (verdict.problems if summed.failed else verdict.notes).append(summed.report(reproduce))
        verdict.mismatches += [m for m in (summed.values(),) if m is not None]
        verdict.margin = summed.margin
        skip = bound.count > 0
    result = control_compare(
        what,
        actual,
        control.wide,
        control.low,
        control.factor,
        control.low_dtype,
        skip,
        sides,
        table=tolerance,  # the dtype table stays the floor (docs/authoring.md)
        bound=control.bound(actual.dtype, tolerance),
    )
    if result.failed:
        verdict.problems.append(result.report(reproduce))
        verdict.mismatches += [m for m in (result.values(),) if m is not None]
    verdict.margin = max(verdict.margin, result.margin)
    return verdict


def uses_control(
    actual: torch.Tensor, expected: torch.Tensor, tolerance: Tolerance, control: Control
) -> bool:
    """Whether ``actual`` meets the measured control rather than ``tolerance``: no declared
    tolerance, a float narrower than float64, shapes that agree, and torch's low run
    differs from its float64 run somewhere (``measurable``)."""
    return (
        not tolerance.reason
        and controlled(actual.dtype)
        and actual.dtype == expected.dtype
        and actual.shape == expected.shape == control.wide.shape == control.low.shape
        and measurable(control)
    )


def control_mismatches(
    actual: torch.Tensor,
    expected: torch.Tensor,
    tolerance: Tolerance,
    bound: OrderBound | None,
    control: Control | None,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(outside, allowed) per element, as ``check_tensor`` judges ``actual`` against the
    reference where the control applies (plus the summation-order term on elements float
    atomics summed); None where it does not (the caller keeps ``tolerance``). For tools
    that need the elements, not only the verdict: `portkit diff` (diffing/case_diff.py)
    and `portkit bench`'s verification of every timed output, so that neither calls wrong
    what `check` passes, nor passes what it fails."""

    if control is None or not uses_control(actual, expected, tolerance, control):
        return None
    allowed, _ = control.bound(actual.dtype, tolerance)
    if bound is not None:
        allowed = allowed + order_term(bound, actual.dtype).to(allowed.device)
    return outside_bound(actual, control.wide, allowed), allowed


def outside_bound(actual: torch.Tensor, wide: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Elements of ``actual`` farther from ``wide`` (float64) than ``allowed``, by
    ``control_compare``'s rule: NaN matches NaN, an infinity only the value the output's dtype
    makes of the exact one."""
    import torch

    a = actual.detach().to(torch.float64)
    w = wide.detach().to(a.device, torch.float64)
    held = w.to(actual.dtype).to(torch.float64)  # the exact value as the output dtype holds it
    finite = torch.isfinite(a) & torch.isfinite(held)
    special = (torch.isnan(a) & torch.isnan(held)) | (~torch.isfinite(held) & (a == held))
    err = torch.where(finite, (a - w).abs(), torch.zeros_like(a))
    return ~special & (~finite | (err > allowed.to(a.device)))


def controls(
    runs: ControlRuns | None, grad: bool, factors: tuple[float, float]
) -> list[Control | None]:
    """Each output's (or gradient's) control from the reference's control runs."""
    if runs is None:
        return []
    wide = runs.wide_grads if grad else runs.wide_outputs
    low = runs.low_grads if grad else runs.low_outputs
    factor = factors[1 if grad else 0]
    return [
        Control(w, lo, runs.low_dtype, factor, runs.memo)
        if w is not None and lo is not None
        else None
        for w, lo in zip(wide, low)
    ]


def measurable(control: Control) -> bool:
    """Whether torch's low-precision run differs from its float64 run anywhere: where it
    does not, there is no error to scale (an exact op such as a gather, or a reference
    that does not compute in float64, e.g. one that calls ``.float()``) and the dtype
    table applies."""
    import torch

    key = ("measurable", id(control.wide))
    if key not in control.memo:
        wide = control.wide.detach().to(torch.float64)
        low = control.low.detach().to(wide.device, torch.float64)
        finite = torch.isfinite(wide) & torch.isfinite(low)
        control.memo[key] = bool(((wide != low) & finite).any())
    return bool(control.memo[key])


def table_margin(
    actual: torch.Tensor, expected: torch.Tensor, tolerance: Tolerance, bound: OrderBound | None
) -> float:
    """The largest |error| / (atol + rtol * |expected|) (inf where NaN/Inf or an exact
    comparison differs); 0 for tensors that cannot be compared (their problem is reported).
    Judged where the tensors are, a slice at a time: the float64 figures of a 2^31-element
    case at once ran an H100 out of memory."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype or not actual.numel():
        return 0.0
    a = actual.detach().reshape(-1)
    e = expected.detach().to(actual.device).reshape(-1)
    keep = None if bound is None else (bound.count == 0).to(a.device).reshape(-1)
    worst = 0.0
    for start in range(0, a.numel(), FIGURE_SLICE):
        part = slice(start, start + FIGURE_SLICE)
        kept = None if keep is None else keep[part]
        worst = max(worst, _slice_margin(a[part], e[part], tolerance, kept))
        if worst == float("inf"):
            break
    return worst


def _slice_margin(
    a: torch.Tensor, e: torch.Tensor, tolerance: Tolerance, keep: torch.Tensor | None
) -> float:
    import torch

    if not a.dtype.is_floating_point and keep is None:  # exact: equal or not, no figures
        return 0.0 if bool(torch.equal(a, e)) else float("inf")
    errors = elementwise_errors(a, e, tolerance)
    if keep is not None:  # judged by the order bound; its verdict carries its own margin
        errors_bad, diff = errors.bad & keep, torch.where(keep, errors.abs, 0.0)
    else:
        errors_bad, diff = errors.bad, errors.abs
    if bool((errors_bad & ~errors.finite).any()):
        return float("inf")
    if not a.dtype.is_floating_point:
        return float("inf") if bool(errors_bad.any()) else 0.0
    scale = e.to(diff.dtype).abs().nan_to_num(0.0, 0.0, 0.0)
    allowed = tolerance.atol + tolerance.rtol * scale
    ratio = torch.where(allowed > 0, diff / allowed.clamp_min(1e-300), diff * float("inf"))
    return float(ratio.nan_to_num(0.0).max())
