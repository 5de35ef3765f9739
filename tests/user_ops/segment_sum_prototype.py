"""CSR segment sum: out[s, :] = sum of values[offsets[s]:offsets[s+1], :], written from
docs/authoring.md. The offsets are a structured input (``portkit.cases.offsets``): sorted,
from 0 to the number of rows, so neither the launcher nor the reference sorts them.

One thread per (segment, column) adds its rows in order in the data's dtype; the
reference runs in float64 (``reference_in``) and the check holds the kernel to twice the
error of torch's own float32 sum (the measured control), not to a guessed atol: the
``float32-cancelling`` case sums 32 terms of size ~8 to about 0.1 per output.
"""

import torch
from numba import cuda
from portkit.cases import custom, offsets

import portkit

THREADS = 128
ROWS_PER_SEGMENT = 32


@cuda.jit
def segment_sum_fwd(values, offsets, out, segments, cols):
    i = cuda.grid(1)
    if i < segments * cols:
        s = i // cols
        c = i - s * cols
        out[s, c] = 0.0
        for r in range(offsets[s], offsets[s + 1]):
            out[s, c] += values[r, c]


@cuda.jit
def segment_sum_bwd(dout, offsets, dvalues, segments, cols):
    i = cuda.grid(1)
    if i < segments * cols:
        s = i // cols
        c = i - s * cols
        for r in range(offsets[s], offsets[s + 1]):
            dvalues[r, c] = dout[s, c]


def reference(values, offsets):
    counts = offsets[1:] - offsets[:-1]
    ids = torch.repeat_interleave(torch.arange(counts.numel(), device=values.device), counts)
    out = values.new_zeros((counts.numel(), values.shape[1]))
    return out.index_add(0, ids, values)


def cancelling(generator, dtype, device):
    """4096 segments of 32 terms ~N(0, 8) that add up to about 0.1 each."""
    segments = 4096
    terms = 8 * torch.randn(segments, ROWS_PER_SEGMENT, generator=generator, dtype=torch.float64)
    terms = terms - terms.mean(1, keepdim=True) + 0.1 / ROWS_PER_SEGMENT
    values = terms.reshape(-1, 1).to(dtype)
    offs = torch.arange(0, segments * ROWS_PER_SEGMENT + 1, ROWS_PER_SEGMENT)
    return values.to(device), offs.to(device)


CSR = ("float32", "int64")
CASES = [
    custom("float32-csr", [(1000, 3), (65,)], input_dtypes=CSR, kinds=(None, offsets((0, 0)))),
    custom("float32-csr-wide", [(300, 37), (9,)], input_dtypes=CSR, seed=3,
           kinds=(None, offsets((0, 0)))),
    custom("float32-cancelling", [(4096 * ROWS_PER_SEGMENT, 1), (4097,)], input_dtypes=CSR,
           inputs=cancelling),
    custom("float64-csr", [(200, 2), (17,)], "float64", input_dtypes=("float64", "int64"),
           kinds=(None, offsets((0, 0)))),
    custom("float64-gradcheck", [(12, 2), (5,)], "float64", input_dtypes=("float64", "int64"),
           kinds=(None, offsets((0, 0))), gradcheck=True),
]


@portkit.op(
    reference=reference,
    cases=CASES,
    same_shape=False,
    input_dtypes=(None, "int64"),
    reference_in="float64",
)
class SegmentSum:
    def forward(k, values, offsets):
        segments, cols = offsets.shape[0] - 1, values.shape[1]
        out = k.empty((segments, cols), values.dtype)
        if out.numel():
            grid = portkit.cdiv(segments * cols, THREADS)
            k.segment_sum_fwd[grid, THREADS](values, offsets, out, segments, cols)
        return out, (values, offsets)

    def backward(k, saved, dout):
        values, offsets = saved
        segments, cols = dout.shape
        dvalues = k.empty_like(values)
        if dout.numel():
            grid = portkit.cdiv(segments * cols, THREADS)
            k.segment_sum_bwd[grid, THREADS](dout, offsets, dvalues, segments, cols)
        return dvalues, None
