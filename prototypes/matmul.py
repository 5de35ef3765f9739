"""Matrix product ``c = a @ b`` of a (M, K) and b (K, N), any M, N, K: a tiled GEMM.

A 2-D grid of 2-D blocks, one TILE x TILE block per tile of c; each step stages a tile
of a and a tile of b in shared memory (zero-filled past the edges, so M, N, K need not
be multiples of TILE), between two syncthreads. The sums are float64 for every dtype
(`allow-float64`): one rounding per element of c whatever K is, so float32 matches
torch's own matmul to its tolerance and float16/bfloat16 round once, at the store.

Backward: ``da = dc @ b^T`` and ``db = a^T @ dc``, the same kernel on transposed
copies made by the launcher (which runs identically against every implementation).
The tile loads index a and b in 64 bits (`allow-int64-index`), as the twin's long long
does: a matrix may hold more than 2**31 elements."""

import torch
from numba import cuda, float64

import portkit

TILE = 16
DTYPES = ("float32", "float16", "bfloat16", "float64")


@cuda.jit
def matmul_tiled(a, b, c, m, n, k):
    ta = cuda.shared.array((TILE, TILE), dtype=float64)
    tb = cuda.shared.array((TILE, TILE), dtype=float64)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx

    acc = 0.0
    for start in range(0, k, TILE):
        if row < m and start + tx < k:
            # portkit: allow-float64 allow-int64-index
            ta[ty, tx] = float64(a[row, start + tx])
        else:
            ta[ty, tx] = 0.0
        if start + ty < k and col < n:
            # portkit: allow-float64 allow-int64-index
            tb[ty, tx] = float64(b[start + ty, col])
        else:
            tb[ty, tx] = 0.0
        cuda.syncthreads()
        for i in range(TILE):
            acc += ta[ty, i] * tb[i, tx]  # portkit: allow-float64
        cuda.syncthreads()  # everyone is done with the tiles before they are refilled
    if row < m and col < n:
        c[row, col] = acc


def _launch(k, a, b):
    m, inner = a.shape
    n = b.shape[1]
    c = k.empty((m, n), a.dtype)
    if m and n:
        if inner:
            grid = (portkit.cdiv(n, TILE), portkit.cdiv(m, TILE))
            k.matmul_tiled[grid, (TILE, TILE)](a, b, c, m, n, inner)
        else:
            c.zero_()  # an empty sum
    return c


def _cases():
    # (M, K, N): edges of one tile and past it in each dimension, small for the simulator.
    shapes = ((1, 1, 1), (3, 5, 7), (17, 20, 9))
    cases = [
        portkit.cases.custom(f"{dt}-{m}x{kk}x{n}", [(m, kk), (kk, n)], dt, seed=i)
        for dt in DTYPES
        for i, (m, kk, n) in enumerate(shapes)
    ]
    cases.append(portkit.cases.custom("float32-2x0x3", [(2, 0), (0, 3)]))
    # A billion multiply-adds forward and two billion backward: about 10 minutes in the
    # simulator's lockstep engine on a 2-core CI machine (docs/scale.md), so GPU-only.
    gpu_only = "a billion multiply-adds: about 10 minutes in the simulator"
    cases.append(
        portkit.cases.custom(
            "float32-1000x1000x1000", [(1000, 1000), (1000, 1000)], large=True, gpu_only=gpu_only
        )
    )
    cases.append(
        portkit.cases.custom("float64-gradcheck", [(3, 4), (4, 5)], "float64", gradcheck=True)
    )
    return cases


# The kernels sum K products in float64 (wide()): torch's float32 matmul carries more error
# than they do at K = 1000 (seen on an H100), so the reference runs in float64, rounded once.
@portkit.op(
    reference=torch.matmul,
    cases=_cases(),
    dtypes=DTYPES,
    same_shape=False,
    reference_in="float64",
)
class Matmul:
    def check_inputs(a, b):
        if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
            raise portkit.InputError(
                f"matmul takes a (M, K) and b (K, N); got {tuple(a.shape)} and {tuple(b.shape)}"
            )

    def forward(k, a, b):
        return _launch(k, a, b), (a, b)

    def backward(k, saved, dc):
        a, b = saved
        return _launch(k, dc, b.t().contiguous()), _launch(k, a.t().contiguous(), dc)
