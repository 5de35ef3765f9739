"""Layer normalisation over the last dimension with weight and bias:
``y = (x - mean) / sqrt(var + eps) * w + b`` for each row of a 2-D ``x``.

Forward: one block per row, two shared-memory tree reductions (mean, then variance about
the mean: the two-pass form does not cancel). It also writes each row's mean and 1/std
to float64 buffers for the backward: one kernel, two dtypes (x's and float64).

Backward, two kernels: ``layernorm_bwd_x`` (one block per row, two reductions) and
``layernorm_bwd_wb``, the cross-row reduction for the weight and bias gradients (one
thread per column looping over rows: deterministic, no atomics).

Sums are float64 for every dtype (`allow-float64`), so float64 is exact enough for
gradcheck and float16/bfloat16 round once, at the store."""

import torch
from numba import cuda, float64

import portkit

THREADS = 128  # a power of two: the tree reduction halves it
# The weight/bias kernel has one thread per column: blocks of 16 give a 4096-column
# layer 256 blocks, enough for every SM of an H100 (132); 128 would leave most idle.
WB_THREADS = 16
EPS = 1e-5
DTYPES = ("float32", "float16", "bfloat16", "float64")


@cuda.jit(device=True)
def block_sum(buf, tid, value):
    """Sum ``value`` over the block (every thread must call it); all threads get it."""
    buf[tid] = value
    cuda.syncthreads()
    stride = THREADS // 2
    while stride > 0:
        if tid < stride:
            buf[tid] += buf[tid + stride]  # portkit: allow-float64 allow-int64-index
        cuda.syncthreads()
        stride //= 2  # portkit: allow-int64-index
    total = buf[0]
    cuda.syncthreads()  # everyone has read buf[0] before the next call overwrites it
    return total


@cuda.jit
def layernorm_fwd(x, w, b, out, mean, rstd, cols, eps):
    row = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    buf = cuda.shared.array(THREADS, dtype=float64)

    s = 0.0
    for c in range(tid, cols, THREADS):
        s += float64(x[row, c])  # portkit: allow-float64
    mu = block_sum(buf, tid, s) / cols  # portkit: allow-float64

    s = 0.0
    for c in range(tid, cols, THREADS):
        d = float64(x[row, c]) - mu  # portkit: allow-float64
        s += d * d  # portkit: allow-float64
    var = block_sum(buf, tid, s) / cols  # portkit: allow-float64
    r = 1.0 / (var + eps) ** 0.5  # portkit: allow-float64

    for c in range(tid, cols, THREADS):
        xhat = (float64(x[row, c]) - mu) * r  # portkit: allow-float64
        out[row, c] = xhat * float64(w[c]) + float64(b[c])  # portkit: allow-float64
    if tid == 0:
        mean[row] = mu
        rstd[row] = r


@cuda.jit
def layernorm_bwd_x(x, w, dy, mean, rstd, dx, cols):
    row = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    buf = cuda.shared.array(THREADS, dtype=float64)
    mu = mean[row]
    r = rstd[row]

    s1 = 0.0  # sum of g, g = dy * w
    s2 = 0.0  # sum of g * xhat
    for c in range(tid, cols, THREADS):
        g = float64(dy[row, c]) * float64(w[c])  # portkit: allow-float64
        s1 += g  # portkit: allow-float64
        s2 += g * (float64(x[row, c]) - mu) * r  # portkit: allow-float64
    m1 = block_sum(buf, tid, s1) / cols  # portkit: allow-float64
    m2 = block_sum(buf, tid, s2) / cols  # portkit: allow-float64

    for c in range(tid, cols, THREADS):
        g = float64(dy[row, c]) * float64(w[c])  # portkit: allow-float64
        xhat = (float64(x[row, c]) - mu) * r  # portkit: allow-float64
        dx[row, c] = r * (g - m1 - xhat * m2)  # portkit: allow-float64


@cuda.jit
def layernorm_bwd_wb(x, dy, mean, rstd, dw, db, rows, cols):
    c = cuda.grid(1)
    if c < cols:
        sw = 0.0
        sb = 0.0
        for row in range(rows):
            g = float64(dy[row, c])  # portkit: allow-float64
            sw += g * (float64(x[row, c]) - mean[row]) * rstd[row]  # portkit: allow-float64
            sb += g  # portkit: allow-float64
        dw[c] = sw
        db[c] = sb


def reference(x, w, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, EPS)


def _cases():
    shapes = ((1, 1), (3, 127), (2, 129), (4, 1000))
    cases = [
        portkit.cases.custom(f"{dt}-{r}x{c}", [(r, c), (c,), (c,)], dt, seed=i)
        for dt in DTYPES
        for i, (r, c) in enumerate(shapes)
    ]
    cases.append(
        portkit.cases.custom("float32-4096x4096", [(4096, 4096), (4096,), (4096,)], large=True)
    )
    cases.append(
        portkit.cases.custom("float64-gradcheck", [(2, 5), (5,), (5,)], "float64", gradcheck=True)
    )
    return cases


# portkit bench: the square float32 case, and a transformer's bfloat16 activations
BENCH = [
    portkit.cases.custom(f"{dt}-{r}x{c}", [(r, c), (c,), (c,)], dt)
    for dt, r, c in (("float32", 4096, 4096), ("bfloat16", 16384, 4096))
]


# Mean, 1/std and the weight/bias gradient sums are float64 in the kernels: the reference
# runs in float64 too, rounded once (torch's float32 sums over 4096 rows differ, H100 run).
@portkit.op(
    reference=reference,
    cases=_cases(),
    dtypes=DTYPES,
    same_shape=False,
    reference_in="float64",
    bench=BENCH,
)
class LayerNorm:
    def check_inputs(x, w, b):
        if x.dim() != 2 or w.shape != (x.shape[1],) or b.shape != (x.shape[1],):
            raise portkit.InputError(
                f"layernorm takes x (rows, cols), weight (cols,), bias (cols,); got "
                f"{tuple(x.shape)}, {tuple(w.shape)}, {tuple(b.shape)}"
            )

    def forward(k, x, w, b):
        rows, cols = x.shape
        out = k.empty_like(x)
        mean = k.empty((rows,), torch.float64)
        rstd = k.empty((rows,), torch.float64)
        if rows and cols:
            k.layernorm_fwd[rows, THREADS](x, w, b, out, mean, rstd, cols, EPS)
        return out, (x, w, mean, rstd)

    def backward(k, saved, dy):
        x, w, mean, rstd = saved
        rows, cols = x.shape
        dx, dw, db = k.empty_like(x), k.empty_like(w), k.empty_like(w)
        if rows and cols:
            k.layernorm_bwd_x[rows, THREADS](x, w, dy, mean, rstd, dx, cols)
            k.layernorm_bwd_wb[portkit.cdiv(cols, WB_THREADS), WB_THREADS](
                x, dy, mean, rstd, dw, db, rows, cols
            )
        return dx, dw, db
