"""Compare two tensors the way a kernel author needs: dtype-aware tolerances, NaN and
Inf as values, and a report that says how many, how far, where, and how to reproduce.

Tolerances live in one table keyed by dtype; there is never an absolute tolerance
alone (an all-zero output would pass it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


# Against the PyTorch reference: torch.testing.assert_close's defaults for these dtypes.
REFERENCE_TOLERANCE = {
    "float32": Tolerance(rtol=1.3e-6, atol=1e-5),
    "float64": Tolerance(rtol=1e-7, atol=1e-7),
}
# Prototype against twin: the same algorithm in two languages, so a tighter bound:
# two float32 ULPs relative; the absolute floors sit a decade under the reference's.
TWIN_TOLERANCE = {
    "float32": Tolerance(rtol=2.4e-7, atol=1e-6),
    "float64": Tolerance(rtol=1e-12, atol=1e-12),
}

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
    tolerance: Tolerance | None
    problem: str = ""  # shape or dtype disagreement, when that is the whole story

    def report(self, seed_note: str = "") -> str:
        if self.problem:
            return f"{self.what}: {self.problem}{seed_note}"
        shown = "; ".join(
            f"[{','.join(map(str, i))}] got {a!r} expected {e!r}" for i, a, e in self.first
        )
        return (
            f"{self.what}: {self.count} of {self.total} elements differ "
            f"(rtol={self.tolerance.rtol:g}, atol={self.tolerance.atol:g}); "
            f"max abs err {self.max_abs:.3g}, max rel err {self.max_rel:.3g}, "
            f"max ULP {self.max_ulp}; first: {shown}{seed_note}"
        )


def ulp_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Units in the last place between same-dtype floats (NaN-free positions only)."""
    import torch

    int_type = torch.int32 if a.dtype == torch.float32 else torch.int64
    if a.dtype not in (torch.float32, torch.float64):
        a, b = a.double(), b.double()
        int_type = torch.int64

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

    a, e = actual, expected
    close = torch.isclose(a, e, rtol=tolerance.rtol, atol=tolerance.atol, equal_nan=True)
    finite = torch.isfinite(a) & torch.isfinite(e)
    diff = torch.where(finite, (a - e).abs(), torch.zeros_like(a))
    rel = diff / e.abs().clamp_min(torch.finfo(e.dtype).tiny)
    zero = torch.zeros((), dtype=torch.int64, device=a.device)
    ulps = torch.where(finite, ulp_distance(a, e), zero)
    return ElementErrors(~close, finite, diff, rel, ulps)


def compare(
    what: str, actual: torch.Tensor, expected: torch.Tensor, tolerance: Tolerance
) -> Mismatch | None:
    """None when ``actual`` matches ``expected``; otherwise what differs."""

    def problem(text: str) -> Mismatch:
        return Mismatch(what, 0, 0, 0.0, 0.0, 0, (), tolerance, problem=text)

    if actual.shape != expected.shape:
        return problem(f"shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    if actual.dtype != expected.dtype:
        return problem(f"dtype {actual.dtype}, expected {expected.dtype}")
    a = actual.detach().cpu()
    e = expected.detach().cpu()
    errors = elementwise_errors(a, e, tolerance)
    bad, diff, rel, ulps = errors.bad, errors.abs, errors.rel, errors.ulps
    if not bool(bad.any()):
        return None
    indices = bad.nonzero()[:SHOWN_MISMATCHES]
    first = tuple(
        (tuple(int(i) for i in idx), float(a[tuple(idx)]), float(e[tuple(idx)])) for idx in indices
    )
    return Mismatch(
        what=what,
        count=int(bad.sum()),
        total=a.numel(),
        max_abs=float(diff[bad].max()) if bad.any() else 0.0,
        max_rel=float(rel[bad].max()) if bad.any() else 0.0,
        max_ulp=int(ulps[bad].max()) if bad.any() else 0,
        first=first,
        tolerance=tolerance,
    )


def identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equal (so NaN equals the same NaN): the test that an input was left alone."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.is_floating_point and a.element_size() in (4, 8):
        bits = torch.int32 if a.element_size() == 4 else torch.int64
        return bool(torch.equal(a.contiguous().view(bits), b.contiguous().view(bits)))
    return bool(torch.equal(a, b))
