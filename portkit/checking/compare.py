"""Compare two tensors the way a kernel author needs: dtype-aware tolerances, NaN and
Inf as values, and a report that says how many, how far, where, and how to reproduce.

Tolerances live in one table keyed by dtype; there is never an absolute tolerance
alone (an all-zero output would pass it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from portkit.results import ValueMismatch

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float
    reason: str = ""  # set for a tolerance the op declares (project/tolerances.py)

    def describe(self) -> str:
        bound = f"rtol={self.rtol:g}, atol={self.atol:g}"
        return f"{bound}, declared: {self.reason}" if self.reason else bound


EXACT = Tolerance(rtol=0.0, atol=0.0)


@dataclass(frozen=True)
class DtypeTolerance:
    reference: Tolerance  # an implementation against the PyTorch reference
    twin: Tolerance  # prototype against twin: one algorithm in two languages, so tighter


# The one tolerance table, keyed by the dtype of the tensors compared. Reasons:
TOLERANCES = {
    # torch.testing.assert_close's defaults (the bound the PyTorch test suite holds its own
    # kernels to). Twin: two float32 ULPs relative (2**-23 * 2), floors a decade lower.
    "float32": DtypeTolerance(Tolerance(1.3e-6, 1e-5), Tolerance(2.4e-7, 1e-6)),
    # Reference: assert_close's defaults. Twin: the same float64 operations in C and numba
    # agree to a few ULPs (2.2e-16 each); 1e-12 leaves room for a libm difference in exp.
    "float64": DtypeTolerance(Tolerance(1e-7, 1e-7), Tolerance(1e-12, 1e-12)),
    # 10 mantissa bits: one ULP is 2**-10 = 9.8e-4 relative at worst. Kernels compute in
    # float32 and round once, torch's CPU half kernels too (float "opmath"), so the two may
    # land on neighbouring halves: assert_close's 1e-3 is that one ULP. Twin: one ULP,
    # since one FMA contraction more or less can flip the final rounding.
    "float16": DtypeTolerance(Tolerance(1e-3, 1e-5), Tolerance(9.8e-4, 1e-6)),
    # 7 mantissa bits: one ULP is 2**-7 = 7.8e-3 relative; assert_close's 1.6e-2 is two,
    # for a reference that rounds an intermediate to bfloat16 where a kernel keeps float32.
    # Twin: one ULP (as for float16).
    "bfloat16": DtypeTolerance(Tolerance(1.6e-2, 1e-5), Tolerance(7.9e-3, 1e-6)),
    # Integers and bool are counts, indices and masks: any difference is a wrong answer.
    **{
        name: DtypeTolerance(EXACT, EXACT)
        for name in ("int8", "uint8", "int16", "int32", "int64", "bool")
    },
}
# The two columns of the table, for callers that pick one per comparison.
REFERENCE_TOLERANCE = {name: t.reference for name, t in TOLERANCES.items()}
TWIN_TOLERANCE = {name: t.twin for name, t in TOLERANCES.items()}


def tolerance_for(table: dict[str, Tolerance], dtype: torch.dtype) -> Tolerance:
    """The tolerance for tensors of ``dtype`` from one column of the table."""
    name = str(dtype).removeprefix("torch.")
    if name not in table:
        raise ValueError(f"no tolerance for dtype {name}; the table covers {', '.join(table)}")
    return table[name]


SHOWN_MISMATCHES = 5


@dataclass(frozen=True)
class Mismatch:
    what: str
    count: int
    total: int
    max_abs: float
    max_rel: float
    max_ulp: int
    first: tuple[tuple[tuple[int, ...], float, float], ...]  # (index, actual, expected)
    tolerance: Tolerance
    # Shape or dtype disagreement, when that is the whole story ({got}/{expected} fields).
    problem: str = ""
    got: str = ""  # who produced ``actual`` and ``expected``: "sim", "reference"
    expected: str = ""
    nonfinite: int = 0  # mismatches where one side is NaN or Inf (no error figures)
    integer: bool = False  # exact comparison: differences, never ULPs

    def values(self) -> ValueMismatch | None:
        """How many values differ, for the check row; None for a shape or dtype problem."""
        return ValueMismatch(self.what, self.count, self.total) if self.count else None

    def report(self, seed_note: str = "") -> str:
        got = f"got ({self.got})" if self.got else "got"
        expected = f"expected ({self.expected})" if self.expected else "expected"
        if self.problem:
            return f"{self.what}: {self.problem.format(got=got, expected=expected)}{seed_note}"
        whole = self.integer
        shown = "; ".join(
            f"[{','.join(map(str, i))}] got {_value(a, whole)} expected {_value(e, whole)}"
            for i, a, e in self.first
        )
        finite = self.count - self.nonfinite
        figures = []
        if self.nonfinite:
            figures.append(f"{self.nonfinite} NaN/Inf where the other side differs")
        if finite and self.integer:
            figures.append(f"max difference {self.max_abs:.0f}")
        elif finite:
            figures.append(
                f"max abs err {self.max_abs:.3g}, max rel err {self.max_rel:.3g}, "
                f"max ULP {self.max_ulp}"
            )
        bound = "exact" if self.integer and self.tolerance == EXACT else self.tolerance.describe()
        return (
            f"{self.what}: {self.count} of {self.total} elements differ, {got} vs "
            f"{expected} ({bound}); {'; '.join(figures)}; first: {shown}{seed_note}"
        )


def _value(x: float, integer: bool) -> str:
    """An element as it reads: ``3`` for an integer, ``nan``, ``1.5`` for a float."""
    return str(int(x)) if integer else repr(x)


def ulp_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Units in the last place between same-dtype floats (NaN-free positions only)."""
    import torch

    if not a.dtype.is_floating_point:
        return (a.to(torch.int64) - b.to(torch.int64)).abs()  # integers: the distance itself
    int_type = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]

    def ordered(x: torch.Tensor) -> torch.Tensor:
        bits = x.contiguous().view(int_type).to(torch.int64)
        sign_mask = torch.iinfo(int_type).min
        return torch.where(bits < 0, sign_mask - bits, bits)

    return (ordered(a) - ordered(b)).abs()


@dataclass(frozen=True)
class ElementErrors:
    """Per-element figures of ``actual`` against ``expected`` (same shape and dtype);
    errors are 0 where either side is not finite."""

    bad: torch.Tensor  # outside the tolerance (NaN equals NaN)
    finite: torch.Tensor  # both sides finite
    abs: torch.Tensor
    rel: torch.Tensor
    ulps: torch.Tensor


def elementwise_errors(
    actual: torch.Tensor, expected: torch.Tensor, tolerance: Tolerance
) -> ElementErrors:
    import torch

    if not actual.dtype.is_floating_point:
        # Integers and bool compare exactly; the figures are in float64 (no overflow).
        bad = actual != expected
        a, e = actual.to(torch.float64), expected.to(torch.float64)
        diff = (a - e).abs()
        rel = diff / e.abs().clamp_min(1.0)
        finite = torch.ones_like(bad)
        return ElementErrors(bad, finite, diff, rel, ulp_distance(actual, expected))
    a, e = actual, expected
    close = torch.isclose(a, e, rtol=tolerance.rtol, atol=tolerance.atol, equal_nan=True)
    finite = torch.isfinite(a) & torch.isfinite(e)
    # Figures in float32 at least: a float16 difference of two large halves overflows.
    wide = a.to(torch.promote_types(a.dtype, torch.float32))
    wide_e = e.to(wide.dtype)
    diff = torch.where(finite, (wide - wide_e).abs(), torch.zeros_like(wide))
    rel = diff / wide_e.abs().clamp_min(torch.finfo(wide.dtype).tiny)
    zero = torch.zeros((), dtype=torch.int64, device=a.device)
    ulps = torch.where(finite, ulp_distance(a, e), zero)
    return ElementErrors(~close, finite, diff, rel, ulps)


def compare(
    what: str,
    actual: torch.Tensor,
    expected: torch.Tensor,
    tolerance: Tolerance,
    got: str = "",
    expected_by: str = "",
) -> Mismatch | None:
    """None when ``actual`` matches ``expected``; otherwise what differs. ``got`` and
    ``expected_by`` name the two sides in the report."""

    def problem(text: str) -> Mismatch:
        return Mismatch(what, 0, 0, 0.0, 0.0, 0, (), tolerance, text, got, expected_by)

    if actual.shape != expected.shape:
        return problem(
            f"{{got}} shape {tuple(actual.shape)}, {{expected}} shape {tuple(expected.shape)}"
        )
    if actual.dtype != expected.dtype:
        return problem(f"{{got}} dtype {actual.dtype}, {{expected}} dtype {expected.dtype}")
    # The usual case, all close, is decided where the tensors are (a GPU output is not
    # copied to the host to pass); the figures of a mismatch are computed on the host.
    if _all_close(actual.detach(), expected.detach().to(actual.device), tolerance):
        return None
    import torch

    figures = _MismatchFigures()
    flat_a = actual.detach().reshape(-1)
    flat_e = expected.detach().to(actual.device).reshape(-1)
    # In slices: the float64 figures of a 2^31-element case would take ~100 GB at once.
    for start in range(0, flat_a.numel(), FIGURE_SLICE):
        a, e = flat_a[start : start + FIGURE_SLICE], flat_e[start : start + FIGURE_SLICE]
        if _all_close(a, e, tolerance):  # decided where they are: only a slice that differs
            continue  # is copied and figured (4096 bad of 2^31: 140 s -> seconds on a CPU)
        a, e = a.cpu(), e.cpu()
        figures.add(start, a, e, elementwise_errors(a, e, tolerance))
    if not figures.count:
        return None
    first = tuple(
        (tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), actual.shape)), a, e)
        for flat, a, e in figures.first
    )
    return Mismatch(
        what=what,
        count=figures.count,
        total=actual.numel(),
        max_abs=figures.max_abs,
        max_rel=figures.max_rel,
        max_ulp=figures.max_ulp,
        first=first,
        tolerance=tolerance,
        got=got,
        expected=expected_by,
        nonfinite=figures.nonfinite,
        integer=not actual.dtype.is_floating_point,
    )


FIGURE_SLICE = 1 << 24  # elements per slice of a mismatch's figures (~0.7 GB of float64)


class _MismatchFigures:
    """A mismatch's figures gathered slice by slice of the flattened tensors."""

    def __init__(self) -> None:
        self.count = self.nonfinite = self.max_ulp = 0
        self.max_abs = self.max_rel = 0.0
        self.first: list[tuple[int, float, float]] = []  # (flat index, actual, expected)

    def add(self, start: int, a: torch.Tensor, e: torch.Tensor, errors: ElementErrors) -> None:
        bad = errors.bad
        count = int(bad.sum())
        if not count:
            return
        self.count += count
        figured = bad & errors.finite  # NaN/Inf mismatches have no error figures
        self.nonfinite += int((bad & ~errors.finite).sum())
        if figured.any():
            self.max_abs = max(self.max_abs, float(errors.abs[figured].max()))
            self.max_rel = max(self.max_rel, float(errors.rel[figured].max()))
            self.max_ulp = max(self.max_ulp, int(errors.ulps[figured].max()))
        for i in bad.nonzero()[: SHOWN_MISMATCHES - len(self.first)].flatten().tolist():
            self.first.append((start + i, float(a[i]), float(e[i])))


def _all_close(a: torch.Tensor, e: torch.Tensor, tolerance: Tolerance) -> bool:
    """``elementwise_errors(...).bad`` is all False, in one pass over the tensors."""
    import torch

    if not a.dtype.is_floating_point:
        return bool(torch.equal(a, e))
    close = torch.isclose(a, e, rtol=tolerance.rtol, atol=tolerance.atol, equal_nan=True)
    return bool(close.all())


def identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equal (so NaN equals the same NaN): the test that an input was left alone."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.is_floating_point:
        bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        return bool(torch.equal(a.contiguous().view(bits), b.contiguous().view(bits)))
    return bool(torch.equal(a, b))
