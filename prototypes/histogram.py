"""Histogram: counts of x's values in ``bins`` equal bins over [lo, hi), by atomics.

Mixed dtypes: a float input (float16, bfloat16, float32, float64) and an int32 output,
compared exactly. No backward (counts are not differentiable). Values outside [lo, hi)
and NaN are not counted. The bin index is computed in float64 in the kernel, the twin
and the reference alike, so a value on a bin edge lands in the same bin in all three."""

import torch
from numba import cuda, float64

import portkit

THREADS = 256
BINS, LO, HI = 16, -2.0, 2.0


@cuda.jit
def histogram(x, counts, n, bins, lo, hi):
    i = cuda.grid(1)
    if i < n:
        v = float64(x[i])  # portkit: allow-float64
        if v >= lo and v < hi:
            b = int((v - lo) / (hi - lo) * bins)  # portkit: allow-float64
            if b >= bins:  # v just under hi can round up to bins
                b = bins - 1
            cuda.atomic.add(counts, b, 1)


def reference(x, bins=BINS, lo=LO, hi=HI):
    v = x.detach().double().reshape(-1)
    inside = v[(v >= lo) & (v < hi)]
    index = ((inside - lo) / (hi - lo) * bins).long().clamp_max(bins - 1)
    return torch.bincount(index, minlength=bins).to(torch.int32)


def _cases():
    sizes = (0, 1, 129, 1000)
    cases = [
        portkit.cases.custom(f"{dt}-n{n}", [(n,)], dt, seed=i)
        for dt in ("float32", "float16", "bfloat16", "float64")
        for i, n in enumerate(sizes)
    ]
    # Bin edges, the ends of the range, NaN and infinities: which bin, or none.
    edges = [-2.0, 2.0, 1.75, -1.75, 0.0, -0.0, float("nan"), float("inf"), 1.9999, -2.0001]
    cases += [
        portkit.cases.custom(f"{dt}-edges", [(40,)], dt, special=tuple(edges))
        for dt in ("float32", "bfloat16")
    ]
    cases.append(portkit.cases.custom("float32-n16777216", [(1 << 24,)], large=True))
    return cases


@portkit.op(
    reference=reference,
    cases=_cases(),
    dtypes=("float16", "bfloat16", "float32", "float64"),
)
class Histogram:
    def check_inputs(x):
        if x.dim() != 1:
            raise portkit.InputError(f"histogram takes a 1-D tensor, got {x.dim()}-D")

    def forward(k, x):
        counts = torch.zeros(BINS, dtype=torch.int32, device=x.device)
        n = x.numel()
        if n:
            k.histogram[portkit.cdiv(n, THREADS), THREADS](x, counts, n, BINS, LO, HI)
        return counts, ()
