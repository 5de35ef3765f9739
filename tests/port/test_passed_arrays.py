"""Arrays handed to device functions, and shapes and launch options a kernel takes from
its module's constants: one construct per test, the expected C line, the draft
compiled with NVRTC (sm_90) and the CPU twin's compiler."""

from __future__ import annotations

import torch

from tests.port.porting import compile_both, function, launch, port

F32, F64 = torch.float32, torch.float64


def mat(rows, cols, dtype=F32):
    return torch.zeros(rows, cols, dtype=dtype)


def test_a_2d_array_passed_to_a_device_function_brings_its_row_length(tmp_path):
    draft = port(
        tmp_path,
        """
        @cuda.jit(device=True)
        def scaled(x, row, c):
            return x[row, c] * 2

        @cuda.jit(device=True)
        def store(x, out, row, c):
            out[row, c] = scaled(x, row, c)

        @cuda.jit
        def k(x, out, cols):
            row = cuda.blockIdx.x
            c = cuda.threadIdx.x
            if c < cols:
                store(x, out, row, c)
        """,
        launch("k", 3, 8, mat(3, 5), mat(3, 5), 5),
        launch("k", 2, 8, mat(2, 7, F64), mat(2, 7, F64), 7),
    )
    assert draft.gaps == []
    scaled = function(draft, "scaled")
    assert "__device__ double scaled(const T* x, long long x_dim1, int row, int c) {" in scaled
    assert "return (double)x[row * x_dim1 + c] * 2;" in scaled
    store = function(draft, "store")
    assert "__device__ void store(const T* x, long long x_dim1, T* out, long long out_dim1," in (
        store
    )
    assert "out[row * out_dim1 + c] = scaled(x, x_dim1, row, c);" in store  # passed on
    assert "store(x, cols, out, cols, row, c);" in function(draft, "k")  # the launch's length
    compile_both(tmp_path, draft, ["k<float>", "k<double>"])


def test_shared_and_local_arrays_passed_to_a_device_function(tmp_path):
    draft = port(
        tmp_path,
        """
        TILE = 4

        @cuda.jit(device=True)
        def fill(tile, regs, t):
            for i in range(TILE):
                regs[i] = float64(t + i)
                tile[t, i] = regs[i]

        @cuda.jit
        def k(out):
            tile = cuda.shared.array((8, TILE), dtype=float64)
            regs = cuda.local.array(TILE, dtype=float64)
            t = cuda.threadIdx.x
            fill(tile, regs, t)
            cuda.syncthreads()
            out[t] = tile[7 - t, 0] + regs[1]
        """,
        launch("k", 1, 8, torch.zeros(8, dtype=F64)),
    )
    assert draft.gaps == []
    fill = function(draft, "fill")
    assert "__device__ void fill(double* tile, long long tile_dim1, double* regs, int t) {" in fill
    assert "tile[t * tile_dim1 + i] = regs[i];" in fill
    assert "fill(&tile[0][0], TILE, regs, t);" in function(draft, "k")
    compile_both(tmp_path, draft, ["k"])


def test_a_shared_shape_named_by_a_module_tuple_keeps_its_spelling(tmp_path):
    draft = port(
        tmp_path,
        """
        ROWS, COLS = 2, 16
        TILES = (ROWS, COLS * 2)
        FLAT = tuple([3 * 4])  # no tuple display to spell: its number

        @cuda.jit
        def k(out):
            t = cuda.threadIdx.x
            tiles = cuda.shared.array(TILES, dtype=float32)
            flat = cuda.shared.array(FLAT, dtype=float32)
            tiles[1, t] = float32(t)
            flat[t % 12] = float32(t)
            cuda.syncthreads()
            out[t] = tiles[1, t] + flat[0]
        """,
        launch("k", 1, 32, torch.zeros(32)),
    )
    assert draft.gaps == []
    body = function(draft, "k")
    assert "__shared__ float tiles[ROWS][COLS * 2];" in body
    assert "__shared__ float flat[12];" in body
    assert "constexpr long long COLS = 16LL;" in draft.text
    compile_both(tmp_path, draft, ["k"])


def test_launch_bounds_become_the_kernels_launch_bounds(tmp_path):
    draft = port(
        tmp_path,
        """
        THREADS = 256

        @cuda.jit(launch_bounds=THREADS)
        def one(x):
            x[cuda.threadIdx.x] = 1.0

        @cuda.jit(launch_bounds=(THREADS, 2))
        def two(x):
            x[cuda.threadIdx.x] = 2.0

        @cuda.jit(launch_bounds=THREADS // (2 * 2))  # parentheses: written as its number
        def cast(x):
            x[cuda.threadIdx.x] = 3.0
        """,
        *(launch(k, 1, 32, torch.zeros(32)) for k in ("one", "two", "cast")),
    )
    assert draft.gaps == []
    assert "__global__ void __launch_bounds__(THREADS) one(float* x) {" in draft.text
    assert "__global__ void __launch_bounds__(THREADS, 2) two(float* x) {" in draft.text
    assert "__global__ void __launch_bounds__(64) cast(float* x) {" in draft.text
    compile_both(tmp_path, draft, ["one", "two", "cast"])


def test_a_device_function_asking_an_arrays_first_length_is_an_error_line(tmp_path):
    draft = port(
        tmp_path,
        """
        @cuda.jit(device=True)
        def last(x, c):
            return x[len(x) - 1, c]

        @cuda.jit
        def k(x, out):
            c = cuda.threadIdx.x
            out[c] = last(x, c)
        """,
        launch("k", 1, 4, mat(3, 4), torch.zeros(4)),
    )
    assert [g.construct for g in draft.gaps] == [
        "dimension 0 of x in a device function, which sees no launch"
    ]
    assert "out[c] = last(x, (long long)blockDim.x, c);" in function(draft, "k")


def test_an_array_made_as_a_call_argument_is_named_and_declared_first(tmp_path):
    """C has no array expression: ``f(cuda.shared.array(...))`` becomes a declaration of
    a named array before the statement, typed from its dtype= (a parameter's .dtype
    follows the launch: float for one, double for the other)."""
    draft = port(
        tmp_path,
        """
        WARPS = 4

        @cuda.jit(device=True)
        def block_sum(value, part):
            part[cuda.threadIdx.x] = value
            cuda.syncthreads()
            total = part[0]
            for i in range(1, WARPS):
                total += part[i]
            return total

        @cuda.jit(device=True)
        def count(part):
            part[cuda.threadIdx.x] = 1
            cuda.syncthreads()
            return part[0] + part[WARPS - 1]

        @cuda.jit
        def k(x, out):
            t = cuda.threadIdx.x
            total = block_sum(x[t], cuda.shared.array(WARPS, dtype=x.dtype))
            out[t] = total
            out[t] += count(cuda.shared.array(WARPS, int32))
        """,
        launch("k", 1, 4, torch.ones(4), torch.zeros(4)),
        launch("k", 1, 4, torch.ones(4, dtype=F64), torch.zeros(4, dtype=F64)),
    )
    assert draft.gaps == []
    k = function(draft, "k")
    assert "__shared__ T shared_array_0[WARPS];" in k
    assert "T total = block_sum(x[t], shared_array_0);" in k  # declared where first set
    assert "__shared__ int shared_array_1[WARPS];" in k
    assert "count(shared_array_1)" in k
    compile_both(tmp_path, draft, ["k<float>", "k<double>"])


def test_an_inline_array_of_a_dtype_the_port_cannot_name_is_a_gap_that_says_so(tmp_path):
    draft = port(
        tmp_path,
        """
        @cuda.jit(device=True)
        def first(part):
            part[0] = 1.0
            return part[0]

        @cuda.jit
        def k(out):
            out[0] = first(cuda.local.array(2, dtype=out[0:1].dtype))
        """,
        launch("k", 1, 1, torch.zeros(1)),
    )
    assert [g.construct for g in draft.gaps] == [
        "cuda.local.array as an argument with dtype=out[0:1].dtype: name the array first"
    ]
