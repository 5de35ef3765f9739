"""Scatter-add with duplicate int64 indices, out[idx[i], :] += src[i, :], written from
README.md and docs/authoring.md alone: float atomics where indices repeat (the case kind
`duplicates`), the output's row count an op-level scalar (`extra=`), and a gather for the
backward, dsrc[i, :] = dout[idx[i], :].

The forward's atomics sum in an order the GPU does not promise: `portkit check` compares
those elements with the summation-order bound (authoring.md, "Float atomics").
"""

from numba import cuda
from portkit.cases import custom, duplicates, indices

import portkit

THREADS = 128


@cuda.jit
def scatter_add_zero(out, rows, dim):
    i = cuda.grid(1)
    if i < rows * dim:
        r = i // dim
        out[r, i - r * dim] = 0.0


@cuda.jit
def scatter_add_fwd(src, idx, out, n, dim):
    i = cuda.grid(1)
    if i < n * dim:
        r = i // dim
        c = i - r * dim
        cuda.atomic.add(out, (idx[r], c), src[r, c])


@cuda.jit
def scatter_add_bwd(dout, idx, dsrc, n, dim):
    i = cuda.grid(1)
    if i < n * dim:
        r = i // dim
        c = i - r * dim
        dsrc[r, c] = dout[idx[r], c]


def reference(src, idx, rows):
    return src.new_zeros((rows, src.shape[1])).index_add_(0, idx, src)


def case(name, dtype, n, dim, rows, seed=0, kind=duplicates, **options):
    return custom(
        name,
        [(n, dim), (n,)],
        dtype,
        input_dtypes=(dtype, "int64"),
        kinds=(None, kind(rows)),
        extra=(rows,),
        seed=seed,
        **options,
    )


CASES = [
    case("float32-duplicates", "float32", 400, 16, 50),
    case("float32-few-rows", "float32", 2048, 3, 8, seed=1),  # ~256 adds per element
    case("float32-distinct", "float32", 300, 5, 1000, seed=2, kind=indices),
    case("float32-tail", "float32", 129, 1, 7, seed=3),
    case("float64-duplicates", "float64", 257, 4, 30, seed=4),
    case("float64-gradcheck", "float64", 12, 3, 5, seed=5, gradcheck=True),
]


@portkit.op(reference=reference, cases=CASES, same_shape=False, input_dtypes=(None, "int64"))
class ScatterAdd:
    def forward(k, src, idx, rows):
        n, dim = src.shape
        out = k.empty((rows, dim), src.dtype)
        if out.numel():
            k.scatter_add_zero[portkit.cdiv(rows * dim, THREADS), THREADS](out, rows, dim)
        if src.numel():
            k.scatter_add_fwd[portkit.cdiv(n * dim, THREADS), THREADS](src, idx, out, n, dim)
        return out, (idx,)

    def backward(k, saved, dout):
        (idx,) = saved
        n, dim = idx.shape[0], dout.shape[1]
        dsrc = k.empty((n, dim), dout.dtype)
        if dsrc.numel():
            k.scatter_add_bwd[portkit.cdiv(n * dim, THREADS), THREADS](dout, idx, dsrc, n, dim)
        return dsrc, None, None
