"""Elements that float atomics sum, compared with a bound on the summation order.

A GPU runs the ``atomic.add``s on one element in an order it does not promise, and
float addition is not associative: the same correct kernel gives different bits from
run to run, and a tolerance of a few ULPs meets that at random. For an element that
received ``n`` atomic contributions ``c_i`` on top of an initial value ``c_0``, every
order (indeed every way of summing those ``n + 1`` terms, a warp-level tree included)
lands within ``gamma_n * S`` of the exact sum, where ``S = sum |c_i|`` (i = 0..n),
``gamma_n = n*u / (1 - n*u)`` and ``u`` is the dtype's unit roundoff (Higham, *Accuracy
and Stability of Numerical Algorithms*, 4.2). Two orders are within ``2 * gamma_n * S``.
On top of it, the comparison's own tolerance applies with ``S`` in place of
``|expected|`` (each contribution may differ by that relative amount between two
implementations), so such an element passes when

    |actual - expected| <= atol + rtol * max(S, |expected|) + 2 * gamma_n * S

The bound holds for every order, so the same inputs give the same verdict on every
run. ``n`` and ``S`` come from the simulator's count (simt/tally.py); other elements
keep the plain tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from portkit.checking.compare import SHOWN_MISMATCHES, Mismatch, Tolerance, compare
from portkit.results import ValueMismatch

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class OrderBound:
    """Float atomic contributions to each element of one tensor (its shape)."""

    count: torch.Tensor  # int64: atomic sums into the element
    magnitude: torch.Tensor  # float64: S, the initial value's and the contributions' |.|

    @property
    def most(self) -> int:
        return int(self.count.max())


def bound_for(tensor: torch.Tensor, tally: Any) -> OrderBound | None:
    """The contributions ``tally`` (a ``simt.tally.AtomicTally``) counted into the memory
    of ``tensor``; None when none landed there (or the tensor is not contiguous)."""
    import torch

    if not tally or not tensor.dtype.is_floating_point or not tensor.is_contiguous():
        return None
    count, magnitude = tally.counts(tensor.data_ptr(), tensor.element_size(), tensor.numel())
    if not count.any():
        return None
    shape = tuple(tensor.shape)
    return OrderBound(
        torch.from_numpy(count).reshape(shape), torch.from_numpy(magnitude).reshape(shape)
    )


def order_term(bound: OrderBound, dtype: torch.dtype) -> torch.Tensor:
    """``2 * gamma_n * S`` per element: how far two summation orders can land apart."""
    import torch

    u = torch.finfo(dtype).eps / 2
    nu = bound.count.to(torch.float64) * u
    gamma = torch.where(nu < 1, nu / (1 - nu).clamp_min(1e-300), torch.inf)
    return 2 * gamma * bound.magnitude


def allowed_error(bound: OrderBound, expected: torch.Tensor, tolerance: Tolerance) -> torch.Tensor:
    """The largest |actual - expected| each element may show (module docstring)."""
    scale = bound.magnitude.maximum(expected.detach().cpu().to(bound.magnitude.dtype).abs())
    return tolerance.atol + tolerance.rtol * scale + order_term(bound, expected.dtype)


@dataclass(frozen=True)
class OrderedComparison:
    """The elements float atomics summed, of one compared tensor, against the bound."""

    what: str
    summed: int  # elements with float atomic contributions
    total: int
    most: int  # the most contributions one element received
    bad: int  # elements outside the bound
    worst: tuple[tuple[int, ...], float, float, float, float]  # index, got, expected, err, bound
    first: tuple[tuple[tuple[int, ...], float, float, float], ...]  # index, got, expected, bound
    sides: tuple[str, str] = ("", "")  # who got and who expected ("sim", "twin-cpu")
    formula: str = "atol + rtol*S + 2*gamma_n*S"  # what the bound is made of, for the report

    @property
    def failed(self) -> bool:
        return self.bad > 0

    def values(self) -> ValueMismatch | None:
        """How many summed values differ (of the summed), for the check row; None for a pass."""
        return ValueMismatch(self.what, self.bad, self.summed) if self.failed else None

    @property
    def margin(self) -> float:
        """The worst element's error over its bound (< 1 passes)."""
        if self.failed:
            return float("inf")
        *_, err, bound = self.worst
        return err / bound if bound > 0 else (0.0 if err == 0 else float("inf"))

    @property
    def label(self) -> str:
        return (
            f"{self.what} (float atomics on {self.summed} of {self.total} elements, up to "
            f"{self.most} contributions)"
        )

    def report(self, seed_note: str = "") -> str:
        index, got, expected, err, bound = self.worst
        where = ",".join(map(str, index))
        if not self.failed:
            return (
                f"{self.label}: within the summation-order bound; closest [{where}]: "
                f"err {err:.2g}, bound {bound:.2g}"
            )
        by, expected_by = (f" ({side})" if side else "" for side in self.sides)
        shown = "; ".join(
            f"[{','.join(map(str, i))}] got{by} {a!r} expected{expected_by} {e!r} (bound {b:.2g})"
            for i, a, e, b in self.first
        )
        return (
            f"{self.label}: {self.bad} of {self.summed} summed elements differ by more than "
            f"the summation-order bound ({self.formula}, docs/design.md); worst "
            f"[{where}] err {err:.3g}, bound {bound:.2g}; first: {shown}{seed_note}"
        )


@dataclass(frozen=True)
class BoundErrors:
    """Per element: outside the bound (only summed elements can be), |error|, bound."""

    bad: torch.Tensor
    err: torch.Tensor
    allowed: torch.Tensor


def bound_errors(
    actual: torch.Tensor,
    expected: torch.Tensor,
    tolerance: Tolerance,
    bound: OrderBound,
    allowed: torch.Tensor | None = None,
) -> BoundErrors:
    """The summed elements against the bound (``allowed``: a bound computed elsewhere,
    the measured control's): NaN equals NaN, an infinity only itself."""
    import torch

    summed = bound.count > 0
    a = actual.detach().cpu().to(torch.float64)
    e = expected.detach().cpu().to(torch.float64)
    if allowed is None:
        allowed = allowed_error(bound, expected, tolerance)
    nan_a, nan_e = torch.isnan(a), torch.isnan(e)
    finite = torch.isfinite(a) & torch.isfinite(e)
    err = torch.where(finite, (a - e).abs(), torch.zeros_like(a))
    same_special = (nan_a & nan_e) | (~finite & ~nan_a & ~nan_e & (a == e))
    bad = summed & ~same_special & (~finite | (err > allowed))
    return BoundErrors(bad, err, allowed)


def compare_summed(
    what: str,
    actual: torch.Tensor,
    expected: torch.Tensor,
    tolerance: Tolerance,
    bound: OrderBound,
    got_by: str = "",
    expected_by: str = "",
    allowed: torch.Tensor | None = None,
    formula: str = "",
) -> tuple[torch.Tensor, OrderedComparison]:
    """The elements ``bound`` counts, against it. Returns ``actual`` with those elements
    replaced by ``expected``'s (for the plain comparison of the rest) and the verdict;
    ``got_by``/``expected_by`` name the two sides in its report."""
    import torch

    summed = bound.count > 0
    a, e = actual.detach().cpu(), expected.detach().cpu()
    errors = bound_errors(a, e, tolerance, bound, allowed)
    bad, err, allowed = errors.bad, errors.err, errors.allowed
    ratio = torch.where(summed, err / allowed.clamp_min(1e-300), -1.0)
    ratio = torch.where(bad, torch.inf, ratio)
    worst_flat = int(ratio.reshape(-1).argmax())
    worst = _at(worst_flat, a, e) + (
        float(err.reshape(-1)[worst_flat]),
        float(allowed.reshape(-1)[worst_flat]),
    )
    first = tuple(
        _at(int(flat), a, e) + (float(allowed.reshape(-1)[flat]),)
        for flat in bad.reshape(-1).nonzero().reshape(-1)[:SHOWN_MISMATCHES]
    )
    verdict = OrderedComparison(
        what,
        int(summed.sum()),
        a.numel(),
        bound.most,
        int(bad.sum()),
        worst,
        first,
        (got_by, expected_by),
        *((formula,) if formula else ()),
    )
    return torch.where(summed, e.to(a.dtype), a), verdict


def compare_bounded(
    what: str,
    actual: torch.Tensor,
    expected: torch.Tensor,
    tolerance: Tolerance,
    bound: OrderBound | None,
    sides: tuple[str, str] = ("", ""),
    reproduce: str = "",
) -> tuple[list[str], list[str], list[ValueMismatch]]:
    """(problems, notes, values that differ) of one tensor against another: the elements
    ``bound`` counts against the summation-order bound (a passing verdict is a note), the
    rest by ``tolerance``. ``sides`` name who got and who expected."""
    problems: list[str] = []
    notes: list[str] = []
    verdicts: list[OrderedComparison | Mismatch] = []
    if bound is not None and actual.shape == expected.shape and actual.dtype == expected.dtype:
        actual, verdict = compare_summed(what, actual, expected, tolerance, bound, *sides)
        (problems if verdict.failed else notes).append(verdict.report(reproduce))
        verdicts.append(verdict)
    mismatch = compare(what, actual, expected, tolerance, *sides)
    if mismatch:
        problems.append(mismatch.report(reproduce))
        verdicts.append(mismatch)
    differ = [found for v in verdicts if (found := v.values()) is not None]
    return problems, notes, differ


def _at(flat: int, a: torch.Tensor, e: torch.Tensor) -> tuple[tuple[int, ...], float, float]:
    import numpy as np

    index = tuple(int(i) for i in np.unravel_index(flat, tuple(a.shape))) if a.dim() else ()
    return index, float(a.reshape(-1)[flat]), float(e.reshape(-1)[flat])
