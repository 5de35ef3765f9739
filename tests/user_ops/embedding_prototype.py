"""Embedding gather, out[i, :] = weight[idx[i], :], with a scatter-add backward (float
atomics: several indices repeat, ``portkit.cases.duplicates``), written from
docs/authoring.md. The indices are a structured input: valid rows of the weight, drawn
by the case, so neither the launcher nor the reference clamps them.
"""

import torch
from numba import cuda
from portkit.cases import custom, duplicates, indices

import portkit

THREADS = 128


@cuda.jit
def embedding_fwd(weight, idx, out, n, dim):
    i = cuda.grid(1)
    if i < n * dim:
        r = i // dim
        c = i - r * dim
        out[r, c] = weight[idx[r], c]


@cuda.jit
def embedding_zero(dweight, rows, dim):
    i = cuda.grid(1)
    if i < rows * dim:
        r = i // dim
        dweight[r, i - r * dim] = 0.0


@cuda.jit
def embedding_bwd(dout, idx, dweight, n, dim):
    i = cuda.grid(1)
    if i < n * dim:
        r = i // dim
        c = i - r * dim
        cuda.atomic.add(dweight, (idx[r], c), dout[r, c])


def reference(weight, idx):
    return torch.nn.functional.embedding(idx, weight)


IDX = ("float32", "int64")
CASES = [
    custom("float32-valid", [(1000, 8), (300,)], input_dtypes=IDX, kinds=(None, indices((0, 0)))),
    custom("float32-duplicates", [(50, 16), (400,)], input_dtypes=IDX, seed=1,
           kinds=(None, duplicates((0, 0)))),
    custom("float64-duplicates", [(40, 5), (129,)], "float64", input_dtypes=("float64", "int64"),
           seed=2, kinds=(None, duplicates((0, 0)))),
    custom("float64-gradcheck", [(6, 3), (10,)], "float64", input_dtypes=("float64", "int64"),
           kinds=(None, duplicates((0, 0))), gradcheck=True),
]


@portkit.op(reference=reference, cases=CASES, same_shape=False, input_dtypes=(None, "int64"))
class Embedding:
    def forward(k, weight, idx):
        n, dim = idx.shape[0], weight.shape[1]
        out = k.empty((n, dim), weight.dtype)
        if out.numel():
            k.embedding_fwd[portkit.cdiv(n * dim, THREADS), THREADS](weight, idx, out, n, dim)
        return out, (weight, idx)

    def backward(k, saved, dout):
        weight, idx = saved
        rows, dim = weight.shape
        n = idx.shape[0]
        dweight = k.empty_like(weight)
        if dweight.numel():
            grid = portkit.cdiv(rows * dim, THREADS)
            k.embedding_zero[grid, THREADS](dweight, rows, dim)
        if dout.numel():
            k.embedding_bwd[portkit.cdiv(n * dim, THREADS), THREADS](dout, idx, dweight, n, dim)
        return dweight, None
