"""The measured control: an implementation's error bounded by the error torch itself makes.

Each float output (and gradient) of an implementation is compared against the reference
run in float64 (``wide``). The bound is not a guessed rtol/atol but the error of the same
reference run in the precision the kernels compute in (``low``: the dtype itself, float32
for float16/bfloat16 inputs, rounded to the output dtype), as FlashAttention's and NVIDIA
HSTU's tests hold their kernels to ``err(kernel) <= k * err(torch in that precision)``.
An element passes when

    |got - wide| <= k * max(|low - wide|, FLOOR * max_tensor |low - wide|)
                    + ULPS * ulp(wide) [+ 2 * gamma_n * S for float atomic sums]

with k = 2 for outputs and 5 for gradients (settable per op, ``error_factor=``).
Where the case runs on a GPU, ``low`` is per element the farther from ``wide`` of torch's
run on the GPU and its run on CPU copies of the same inputs (reference_run.py
``farther``): torch's error is its worst over both. Measured 2026-11-27: the newcomer's
sequential float32 segment sum came within 0.95 of the bound on an H200 against the
GPU's run alone (0.72 on an H100, 0.50 on the CPU), because the GPU's reduction is the
more accurate one there.

Why the tensor-wide floor. The element-wise term alone is a ratio of two independent
rounding errors: where torch's order happens to land next to the exact value, a correct
kernel summing in another order looks 100x worse there. Measured on float32 sums whose
terms ~N(0, 8) cancel to about 0.1 (the cancelling segment sum of tests/user_ops; 3 seeds;
131,072 sums of 32 terms, 4,096 of 1,024), against a sequential (index_add) and a
torch.sum control, kernels summing in reversed order, as a 32-lane block reduction, or
with torch.sum: the element-wise bound alone fails 11% to 63% of the elements of these
correct kernels. The floor (as a fraction of the tensor's largest torch error) that lets
them all pass is at most 0.66 for n = 32 and 0.67 for a block reduction of n = 1024, and
0.91 for a sequential loop of 32 terms against torch.sum (which sums 8 lanes and then
pairs: twice as accurate). ``FLOOR = 1``: a kernel as accurate as torch, in any order,
passes with a margin of about 0.5 to 0.9 (so the element-wise term only raises the bound
where an element's torch error exceeds the tensor's largest, i.e. never: the bound is
FlashAttention's, max error within twice torch's max error, stated per element so that
the report points at elements and counts ULPs). A floor of a small fraction (0.1) would
fail every one of these correct kernels. A kernel less accurate than torch by more than
k fails and says by how much: a sequential loop of 1,024 terms against torch.sum needs
2.96 (about 6x torch's error); a better reduction, or ``error_factor=`` (or a
``portkit.Tolerance``) with the reason, is the author's call. Mistakes are orders of
magnitude outside: float16 accumulation of these sums is about 3,000x torch's error,
a dropped term 10^5 x (tests/check/test_control.py).

``ULPS`` ulps of the output dtype at the exact value cover a correctly rounded result of
another order where torch's is exact.

The dtype table (checking/compare.py) is the floor: an element's allowed error is never below
``atol + rtol * |exact|``. Where torch's low run happens to land next to the exact value in
a whole tensor (one element, as rmsnorm's 1x1 backward, whose gradient is a cancellation
of terms of order 1/|x|), the bound collapses to a few ULP of the tiny result: on an H200
(2026-11-27) that case failed for the twin and the numba prototype, both correct, while
the CPU passed it with margin 0.64. So the control only ever widens the table (where
torch's own error is larger, as in cancelling sums), never narrows it.

float64 outputs have no wider torch reference: they keep the dtype table
(checking/compare.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from portkit.checking.compare import SHOWN_MISMATCHES, Tolerance
from portkit.results import ValueMismatch

if TYPE_CHECKING:
    import torch

FORWARD_FACTOR = 2.0
GRADIENT_FACTOR = 5.0
FLOOR = 1.0
ULPS = 2


def controlled(dtype: torch.dtype) -> bool:
    """Whether outputs of ``dtype`` are compared with the control: floats narrower than
    float64 (float64 has no wider reference; integers compare exactly)."""
    return dtype.is_floating_point and dtype.itemsize < 8


def low_precision(dtype: torch.dtype) -> torch.dtype:
    """The precision torch's control run computes an input of ``dtype`` in: the dtype
    itself, float32 for float16/bfloat16 (kernels widen halves to float32, and so do
    torch's CPU half kernels inside one op)."""
    import torch

    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def ulp(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """One unit in the last place of ``dtype`` at each of ``values`` (float64)."""
    import torch

    info = torch.finfo(dtype)
    _, exponent = torch.frexp(values.abs().clamp_min(info.tiny))
    spacing = torch.ldexp(torch.full_like(values, info.eps / 2), exponent)
    return spacing.clamp_min(info.tiny * info.eps)


@dataclass(frozen=True)
class ControlVerdict:
    """One compared tensor against the control."""

    what: str
    bad: int
    total: int
    factor: float
    low: str  # the dtype torch's control ran in: "float32"
    dtype: str  # the output dtype ULPs are counted in
    margin: float  # the largest err / bound (< 1 passes)
    # index, got, exact, err, ULPs, multiple of torch's error, bound
    worst: tuple[tuple[int, ...], float, float, float, float, float, float]
    first: tuple[tuple[tuple[int, ...], float, float, float, float], ...]  # idx, got, exp, ulps, x
    sides: tuple[str, str] = ("", "")
    nonfinite: int = 0

    @property
    def failed(self) -> bool:
        return self.bad > 0

    def values(self) -> ValueMismatch | None:
        """How many values differ, for the check row; None for a pass."""
        return ValueMismatch(self.what, self.bad, self.total) if self.failed else None

    def bound_text(self) -> str:
        return (
            f"{self.factor:g}x torch's {self.low} error against float64 "
            f"+ {ULPS} ULP of {self.dtype}, or the {self.dtype} table where that is larger"
        )

    def note(self) -> str:
        """A passing verdict, for the row's note."""
        _, _, _, err, ulps, multiple, bound = self.worst
        return (
            f"{self.what}: within {self.bound_text()}; closest: err {err:.2g} "
            f"({_ulps(ulps)} ULP, {_times(multiple)} torch's {self.low} error), margin "
            f"{self.margin:.2f}"
        )

    def report(self, seed_note: str = "") -> str:
        by, expected_by = self.sides
        got = f"got ({by})" if by else "got"
        expected = f"expected ({expected_by} in float64)" if expected_by else "expected"
        index, _, _, err, ulps, multiple, bound = self.worst
        where = ",".join(map(str, index))
        shown = "; ".join(
            f"[{','.join(map(str, i))}] got {a!r} expected {e!r} ({_ulps(u)} ULP, {_times(x)})"
            for i, a, e, u, x in self.first
        )
        specials = (
            f"{self.nonfinite} NaN/Inf where the other side differs; " if self.nonfinite else ""
        )
        return (
            f"{self.what}: {self.bad} of {self.total} elements differ, {got} vs {expected} "
            f"(bound: {self.bound_text()}); {specials}worst [{where}]: err {err:.3g}, "
            f"{_ulps(ulps)} ULP of {self.dtype}, {_times(multiple)} torch's {self.low} error; "
            f"bound {self.factor:g}x; first: {shown}{seed_note}"
        )


def _ulps(count: float) -> str:
    return f"{count:.1f}" if count < 100 else f"{count:.3g}"


def _times(multiple: float) -> str:
    return "inf x" if multiple == float("inf") else f"{multiple:.2g}x"


def control_bound(
    dtype: torch.dtype,
    wide: torch.Tensor,
    low: torch.Tensor,
    factor: float,
    table: Tolerance | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(allowed error, torch's error with the floor) per element, float64, for outputs of
    ``dtype`` against ``wide``, the control being ``low`` (module docstring); never below
    ``table`` (the dtype table's ``atol + rtol * |wide|``) where it is given. Computed on
    ``wide``'s device: a GPU output is judged on the GPU, only scalars come back."""
    import torch

    w = wide.detach().to(torch.float64)
    lo = low.detach().to(w.device, torch.float64)
    usable = torch.isfinite(lo) & torch.isfinite(w)
    torch_err = torch.where(usable, (lo - w).abs(), torch.zeros_like(w))
    scale = float(torch_err.max()) if torch_err.numel() else 0.0
    control = torch_err.clamp_min(FLOOR * scale)
    allowed = factor * control + ULPS * ulp(w, dtype)
    if table is not None:
        allowed = torch.maximum(allowed, table.atol + table.rtol * w.abs())
    return allowed, control


def control_compare(
    what: str,
    actual: torch.Tensor,
    wide: torch.Tensor,
    low: torch.Tensor,
    factor: float,
    low_dtype: torch.dtype,
    skip: torch.Tensor | None = None,
    sides: tuple[str, str] = ("", ""),
    table: Tolerance | None = None,
    bound: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> ControlVerdict:
    """``actual`` (an output in its dtype) against ``wide`` (the float64 reference), with
    ``low`` (torch in ``low_dtype``, rounded to ``actual``'s dtype) as the control.
    ``skip``: elements judged elsewhere (float atomic sums: checking/order_bound.py).
    ``bound``: ``control_bound``'s result when the caller already has it (it depends on
    the reference only, so every implementation compared against it shares one).

    Two passes, because a large output is nearly always within its bound: one over every
    element finds the suspects (outside the bound, NaN/Inf, or an exact value its dtype
    cannot hold), the second judges the suspects alone, special values included."""
    import torch

    a = actual.detach().to(torch.float64)
    w = wide.detach().to(a.device, torch.float64)
    allowed, control = bound if bound is not None else control_bound(
        actual.dtype, w, low, factor, table
    )
    err = (a - w).abs()  # NaN where either side is NaN: never within a bound
    within = (err <= allowed) & (w.abs() <= torch.finfo(actual.dtype).max)
    if skip is not None:
        within = within | skip.to(within.device)
    ratio = torch.where(within, err / allowed.clamp_min(1e-300), torch.zeros_like(w))
    if skip is not None:
        ratio = torch.where(skip.to(ratio.device), torch.zeros_like(ratio), ratio)
    flat_ratio = ratio.reshape(-1)
    suspects = (~within).reshape(-1).nonzero().reshape(-1)
    bad, nonfinite = suspects[:0], 0
    if suspects.numel():
        got = a.reshape(-1)[suspects]
        exact = w.reshape(-1)[suspects].to(actual.dtype).to(torch.float64)
        finite = torch.isfinite(got) & torch.isfinite(exact)
        both_nan = torch.isnan(got) & torch.isnan(exact)
        special = both_nan | (~torch.isfinite(exact) & (got == exact))
        room = allowed.reshape(-1)[suspects]
        gap = torch.where(finite, err.reshape(-1)[suspects], torch.zeros_like(got))
        is_bad = ~special & (~finite | (gap > room))
        judged = torch.where(finite & ~special, gap / room.clamp_min(1e-300), 0.0)
        flat_ratio[suspects] = torch.where(is_bad & ~finite, torch.inf, judged)
        bad, nonfinite = suspects[is_bad], int((is_bad & ~finite).sum())
    shape = tuple(a.shape)
    flat_a, flat_w, flat_err = a.reshape(-1), w.reshape(-1), err.reshape(-1)

    def point(flat: int) -> tuple[tuple[int, ...], float, float, float, float, float]:
        """index, got, exact, err, ULPs of the dtype, multiple of torch's error."""
        got, exact = float(flat_a[flat]), float(flat_w[flat])
        held = float(flat_w[flat : flat + 1].to(actual.dtype)[0])  # as the output dtype holds it
        gap = float(flat_err[flat]) if math.isfinite(got) and math.isfinite(held) else 0.0
        torch_err = float(control.reshape(-1)[flat])
        units = float(ulp(flat_w[flat : flat + 1], actual.dtype)[0])
        multiple = 0.0 if gap == 0 else (gap / torch_err if torch_err > 0 else math.inf)
        return _unravel(flat, shape), got, exact, gap, gap / units, multiple

    worst: tuple[tuple[int, ...], float, float, float, float, float, float] = (
        (), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    )
    if a.numel():
        at = int(flat_ratio.argmax())
        worst = point(at) + (float(allowed.reshape(-1)[at]),)
    first = tuple(
        (index, got, exact, units, multiple)
        for index, got, exact, _, units, multiple in (
            point(int(flat)) for flat in bad[:SHOWN_MISMATCHES]
        )
    )
    return ControlVerdict(
        what=what,
        bad=int(bad.numel()),
        total=a.numel(),
        factor=factor,
        low=str(low_dtype).removeprefix("torch."),
        dtype=str(actual.dtype).removeprefix("torch."),
        margin=float(flat_ratio.max()) if flat_ratio.numel() else 0.0,
        worst=worst,
        first=first,
        sides=sides,
        nonfinite=nonfinite,
    )


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return tuple(reversed(index))
