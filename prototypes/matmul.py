"""Matrix product ``c = a @ b`` of a (M, K) and b (K, N), any M, N, K: a register-blocked GEMM.

A 2-D grid of 128-thread blocks, one BM x BN = 128 x 64 tile of c per block; its 4 warps
(2 x 2) own 64 x 32 each, as 4 x 4 tiles of 16 x 8 in which lane (g, t) = (lane // 4,
lane % 4) owns rows g and g + 8, columns 2t and 2t + 1: the C fragment of the twin's
mma.sync m16n8k8 (cuda_src/matmul.cu, which runs the products on the FP64 tensor cores).
Each k-tile of BK = 8 is staged in double-buffered shared memory as float64 (zero past the
edges: M, N, K need not be multiples of anything), the next tile's loads issued before the
current one is multiplied, one syncthreads per k-tile. The sums are float64 for every dtype
(`allow-float64`), in k order, one rounding per element of c whatever K is: a float32 sum
of K = 1000 products fails the float64 reference's float32 tolerance (the twin's comment
has the figures); float16/bfloat16 round once, at the store.

Backward: ``da = dc @ b^T`` and ``db = a^T @ dc``, the same kernel on transposed
copies made by the launcher (which runs identically against every implementation).
The tile loads index a and b in 64 bits (`allow-int64-index`), as the twin's long long
does: a matrix may hold more than 2**31 elements.

A teaching example, left out of speed claims (``teaching=``): the float64 sums run on the
FP64 tensor cores at 0.27-0.41x of cuBLAS's float32 matmul (H100 and H200, 2026-11-27,
H100 and H200, 2026-11-27), which no tuning of this design closes. A twin worth benchmarking would
accumulate in float32, with a tolerance from the measured control (the reference's own
float32 error), and reach at least 0.8x of cuBLAS at the bench shapes."""

import torch
from numba import cuda, float64, int32

import portkit

BM, BN, BK = 128, 64, 8
SA, SB = BK + 4, BN + 4  # shared row strides (the twin's, where they avoid bank conflicts)
THREADS = 128
WM, WN = 64, 32  # a warp's tile
MT, NT = WM // 16, WN // 8  # its 16 x 8 tiles
A_TILES = (2, BM * SA)  # shared shapes: numba wants module-level constants
B_TILES = (2, BK * SB)
ACC = MT * NT * 4
DTYPES = ("float32", "float16", "bfloat16", "float64")


@cuda.jit(device=True)
def load_pack(p, rows, cols, row, col, out):
    """Four elements of row ``row`` from column ``col`` as float64, zero past the edges
    (the twin loads a pack inside the matrix as one 16-byte access)."""
    for i in range(4):
        if row < rows and col + i < cols:
            # portkit: allow-float64 allow-int64-index
            out[i] = float64(p[row, col + i])
        else:
            out[i] = 0.0


@cuda.jit(device=True)
def fetch(a, b, m, n, k, row0, col0, k0, tid, sa0, sa1, sb):
    # Two packs of a (rows tid // 2 and 64 + tid // 2), one of b (row tid // 16).
    load_pack(a, m, k, row0 + tid // 2, k0 + 4 * (tid % 2), sa0)
    load_pack(a, m, k, row0 + 64 + tid // 2, k0 + 4 * (tid % 2), sa1)
    load_pack(b, k, n, k0 + tid // 16, col0 + 4 * (tid % 16), sb)


@cuda.jit(device=True)
def stash(ta, tb, buf, tid, sa0, sa1, sb):
    ar, ac, br, bc = tid // 2, 4 * (tid % 2), tid // 16, 4 * (tid % 16)
    for i in range(4):
        ta[buf, int32(ar * SA + ac + i)] = sa0[i]
        ta[buf, int32((64 + ar) * SA + ac + i)] = sa1[i]
        tb[buf, int32(br * SB + bc + i)] = sb[i]


@cuda.jit
def matmul_tiled(a, b, c, m, n, k):
    ta = cuda.shared.array(A_TILES, dtype=float64)
    tb = cuda.shared.array(B_TILES, dtype=float64)
    tid = cuda.threadIdx.x
    lane = tid % 32
    warp = tid // 32
    g = lane // 4
    t = lane % 4
    wm = (warp // 2) * WM
    wn = (warp % 2) * WN
    row0 = cuda.blockIdx.y * BM
    col0 = cuda.blockIdx.x * BN
    sa0 = cuda.local.array(4, dtype=float64)
    sa1 = cuda.local.array(4, dtype=float64)
    sb = cuda.local.array(4, dtype=float64)
    acc = cuda.local.array(ACC, dtype=float64)
    for i in range(ACC):
        acc[i] = 0.0

    tiles = (k + BK - 1) // BK
    fetch(a, b, m, n, k, row0, col0, 0, tid, sa0, sa1, sb)
    stash(ta, tb, 0, tid, sa0, sa1, sb)
    cuda.syncthreads()
    for tile in range(tiles):
        buf = int32(tile % 2)
        if tile + 1 < tiles:
            fetch(a, b, m, n, k, row0, col0, (tile + 1) * BK, tid, sa0, sa1, sb)
        # The twin's mma_16x8x8, one product at a time, in k order.
        for kk in range(BK):
            for i in range(MT):
                for j in range(NT):
                    for e in range(4):
                        r = int32((wm + 16 * i + g + 8 * (e // 2)) * SA + kk)
                        col = int32(kk * SB + wn + 8 * j + 2 * t + e % 2)
                        x = ta[buf, r] * tb[buf, col]  # portkit: allow-float64
                        acc[int32((i * NT + j) * 4 + e)] += x  # portkit: allow-float64
        if tile + 1 < tiles:
            stash(ta, tb, 1 - buf, tid, sa0, sa1, sb)  # read last before the previous barrier
        cuda.syncthreads()

    for i in range(MT):
        for j in range(NT):
            for e in range(4):
                row = row0 + wm + 16 * i + g + 8 * (e // 2)  # portkit: allow-int64-index
                col = col0 + wn + 8 * j + 2 * t + e % 2  # portkit: allow-int64-index
                if row < m and col < n:
                    c[row, col] = acc[int32((i * NT + j) * 4 + e)]  # portkit: allow-int64-index


def _launch(k, a, b):
    m, inner = a.shape
    n = b.shape[1]
    c = k.empty((m, n), a.dtype)
    if m and n:
        if inner:
            grid = (portkit.cdiv(n, BN), portkit.cdiv(m, BM))
            k.matmul_tiled[grid, THREADS](a, b, c, m, n, inner)
        else:
            c.zero_()  # an empty sum
    return c


def _cases():
    # (M, K, N), small for the simulator: inside one block tile (K past one k-tile, N odd:
    # element-wise loads); 130x12x68 crosses BM and BN with K and N multiples of 4 (the
    # twin's 16-byte packs, and packs that cross the edge), in float32 only: the simulator
    # takes minutes over its backward in every dtype.
    shapes = ((1, 1, 1), (3, 5, 7), (17, 20, 9))
    cases = [
        portkit.cases.custom(f"{dt}-{m}x{kk}x{n}", [(m, kk), (kk, n)], dt, seed=i)
        for dt in DTYPES
        for i, (m, kk, n) in enumerate(shapes)
    ]
    cases.append(portkit.cases.custom("float32-130x12x68", [(130, 12), (12, 68)], seed=3))
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


def _flops(a, b):
    return 2 * a.shape[0] * a.shape[1] * b.shape[1]


# The kernels sum K products in float64: torch's float32 matmul carries more error than
# they do at K = 1000 (seen on an H100), so the reference runs in float64, rounded once.
# Timed at 1000^3 (edge tiles: 1000 = 7 * 128 + 104) and 4096^3 (every tile full).
BENCH = [portkit.cases.custom(f"float32-{s}x{s}x{s}", [(s, s), (s, s)]) for s in (1000, 4096)]


@portkit.op(
    reference=torch.matmul,
    baseline=torch.matmul,  # cuBLAS
    teaching="float64 sums: 0.27-0.41x cuBLAS (2026-11-27); a teaching example, no speed claim",
    cases=_cases(),
    dtypes=DTYPES,
    same_shape=False,
    reference_in="float64",
    bench=BENCH,
    flops={"forward": _flops, "backward": lambda a, b: 2 * _flops(a, b)},
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
