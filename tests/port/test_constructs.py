"""One construct per test: a kernel's Python source in, the expected C out, and the
draft compiled with NVRTC (sm_90) and the CPU twin's compiler."""

from __future__ import annotations

import pytest
import torch

from tests.port.porting import compile_both, function, launch, port

F32, F64 = torch.float32, torch.float64


def vec(n, dtype=F32):
    return torch.zeros(n, dtype=dtype)


def test_grid_stride_loop_is_templated_on_the_element_type(tmp_path):
    draft = port(
        tmp_path,
        """
        @cuda.jit
        def scale(x, out, n):
            start = cuda.grid(1)
            stride = cuda.gridsize(1)
            for i in range(start, n, stride):
                out[i] = x[i] * float32(2)
        """,
        launch("scale", 2, 32, vec(5), vec(5), 5),
        launch("scale", 2, 32, vec(5, F64), vec(5, F64), 5),
    )
    assert function(draft, "scale") == (
        "template <typename T>\n"
        "__global__ void scale(const T* x, T* out, long long n) {\n"
        "    long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    long long stride = (long long)gridDim.x * blockDim.x;\n"
        "    for (long long i = start; i < n; i += stride) {\n"
        "        out[i] = x[i] * 2.0f;\n"
        "    }\n"
        "}"
    )
    assert "// k_proto.py:8" in draft.text  # each statement names its prototype line
    assert draft.gaps == []
    compile_both(tmp_path, draft, ["scale<float>", "scale<double>"])


def test_a_fixed_type_stays_fixed_and_int64_sizes_stay_64_bit(tmp_path):
    draft = port(
        tmp_path,
        """
        @cuda.jit
        def k(x, out, n):
            row = cuda.blockIdx.y * 16 + cuda.threadIdx.y
            acc = 0.0
            if row < n:
                acc = float64(x[row]) / n
            out[row] = acc
        """,
        launch("k", (1, 2), (1, 16), vec(20), vec(20), 20),
        launch("k", (1, 2), (1, 16), vec(20, F64), vec(20, F64), 20),
    )
    body = function(draft, "k")
    assert "long long row = (long long)blockIdx.y * 16 + threadIdx.y;" in body
    assert "double acc = 0.0;" in body
    assert "acc = (double)x[row] / n;" in body
    compile_both(tmp_path, draft, ["k<float>", "k<double>"])


def test_while_ternary_and_break(tmp_path):
    draft = port(
        tmp_path,
        """
        @cuda.jit
        def k(x, out, n):
            i = cuda.grid(1)
            if i < n:
                v = x[i]
                steps = 0
                while v > 1:
                    v = v / 2 if v < 100 else v / 10
                    steps += 1
                    if steps > 8:
                        break
                out[i] = v
        """,
        launch("k", 1, 32, vec(9), vec(9), 9),
    )
    body = function(draft, "k")
    assert "while (v > 1) {" in body
    assert "v = v < 100 ? v / 2 : v / 10;" in body
    assert "break;" in body
    compile_both(tmp_path, draft, ["k"])


def test_shared_arrays_barriers_and_their_variants(tmp_path):
    draft = port(
        tmp_path,
        """
        @cuda.jit
        def k(x, out):
            buf = cuda.shared.array((2, 32), dtype=float32)
            tid = cuda.threadIdx.x
            buf[0, tid] = x[tid]
            cuda.syncthreads()
            buf[1, tid] = buf[0, 31 - tid]
            positive = cuda.syncthreads_count(int32(x[tid] > 0))
            if cuda.syncthreads_or(int32(positive > 3)):
                out[tid] = buf[1, tid]
        """,
        launch("k", 1, 32, vec(32), vec(32)),
    )
    body = function(draft, "k")
    assert "__shared__ float buf[2][32];" in body
    assert "buf[1][tid] = buf[0][31 - (long long)tid];" in body  # numba: int64
    assert "int positive = __syncthreads_count((int)(x[tid] > 0));" in body
    assert "if (__syncthreads_or((int)(positive > 3))) {" in body
    compile_both(tmp_path, draft, ["k"])


def test_dynamic_shared_and_local_arrays(tmp_path):
    draft = port(
        tmp_path,
        """
        @cuda.jit
        def k(x, out):
            dyn = cuda.shared.array(0, dtype=x.dtype)
            tmp = cuda.local.array(4, dtype=float64)
            tid = cuda.threadIdx.x
            dyn[tid] = x[tid]
            for j in range(4):
                tmp[j] = dyn[tid] * j
            out[tid] = tmp[3]
        """,
        launch("k", 1, 32, vec(32), vec(32)),
        launch("k", 1, 32, vec(32, F64), vec(32, F64)),
    )
    body = function(draft, "k")
    assert "extern __shared__ __align__(16) unsigned char dynamic_smem[];" in body
    assert "T* dyn = reinterpret_cast<T*>(dynamic_smem);" in body
    assert "double tmp[4];" in body
    compile_both(tmp_path, draft, ["k<float>", "k<double>"])


def test_warp_shuffles_votes_and_masks(tmp_path):
    draft = port(
        tmp_path,
        """
        @cuda.jit
        def k(x, out, flags):
            lane = cuda.threadIdx.x
            v = x[lane]
            v += cuda.shfl_down_sync(0xFFFFFFFF, v, 16)
            v = cuda.shfl_sync(0xFFFFFFFF, v, 0)
            mask = cuda.activemask()
            votes = cuda.ballot_sync(mask, x[lane] > 0)
            if cuda.all_sync(mask, v == v):
                out[lane] = v
            flags[lane] = votes
        """,
        launch("k", 1, 32, vec(32), vec(32), torch.zeros(32, dtype=torch.int64)),
    )
    body = function(draft, "k")
    assert "v += __shfl_down_sync(0xFFFFFFFFLL, v, 16);" in body
    assert "v = __shfl_sync(0xFFFFFFFFLL, v, 0);" in body
    assert "__ballot_sync(mask, x[lane] > 0)" in body
    assert "if (__all_sync(mask, v == v)) {" in body
    compile_both(tmp_path, draft, ["k"])


def test_atomics_with_their_return_values(tmp_path):
    draft = port(
        tmp_path,
        """
        @cuda.jit
        def k(x, counter, total, big, slots):
            i = cuda.grid(1)
            slot = cuda.atomic.add(counter, 0, 1)
            slots[slot] = i
            cuda.atomic.add(total, 0, x[i])
            old = cuda.atomic.max(big, 0, i)
            cuda.atomic.cas(counter, 1, 0, old)
        """,
        launch(
            "k",
            1,
            32,
            vec(32),
            torch.zeros(2, dtype=torch.int32),
            vec(1),
            torch.zeros(1, dtype=torch.int64),
            torch.zeros(32, dtype=torch.int64),
        ),
    )
    body = function(draft, "k")
    assert "int slot = atomicAdd(&counter[0], 1);" in body
    assert "atomicAdd(&total[0], x[i]);" in body
    assert (
        "long long old = (long long)atomicMax((unsigned long long*)&big[0], (unsigned long long)i);"
    ) in body
    assert "atomicCAS(&counter[1], 0, (int)old);" in body
    compile_both(tmp_path, draft, ["k"])


def test_math_has_the_float32_spelling_where_the_type_is_float32(tmp_path):
    source = """
        @cuda.jit
        def k(x, out):
            i = cuda.threadIdx.x
            out[i] = math.exp(x[i]) + math.sqrt(abs(x[i])) + float32(math.pi)
        """
    fixed = port(tmp_path, source, launch("k", 1, 32, vec(32), vec(32)), name="f32")
    assert "out[i] = expf(x[i]) + sqrtf(fabsf(x[i])) + (float)CUDART_PI;" in fixed.text
    assert "#include <math_constants.h>" in fixed.text
    both = port(
        tmp_path,
        source,
        launch("k", 1, 32, vec(32), vec(32)),
        launch("k", 1, 32, vec(32, F64), vec(32, F64)),
        name="both",
    )
    assert "out[i] = exp(x[i]) + sqrt(fabs(x[i])) + (float)CUDART_PI;" in both.text
    compile_both(tmp_path, both, ["k<float>", "k<double>"])


def test_half_precision_is_stored_as_is_and_computed_in_float(tmp_path):
    draft = port(
        tmp_path,
        """
        @cuda.jit
        def k(x, out, n):
            i = cuda.grid(1)
            if i < n:
                v = float32(x[i])
                out[i] = v * v
                out[i] = x[i] * x[i]
        """,
        *[
            launch("k", 1, 32, vec(9, dt), vec(9, dt), 9)
            for dt in (torch.float16, torch.bfloat16, F32)
        ],
    )
    body = function(draft, "k")
    assert "float v = widen(x[i]);" in body
    assert "out[i] = (T)(v * v);" in body  # rounded once, at the store
    assert "out[i] = (T)(widen(x[i]) * widen(x[i]));" in body  # numba's f16 * f16 is f16
    assert "#include <cuda_fp16.h>" in draft.text and "#include <cuda_bf16.h>" in draft.text
    compile_both(tmp_path, draft, ["k<__half>", "k<__nv_bfloat16>", "k<float>"])


def test_device_functions_are_templates_and_tuples_are_structs(tmp_path):
    draft = port(
        tmp_path,
        """
        @cuda.jit(device=True)
        def minmax(a, b):
            if a < b:
                return a, b
            return b, a

        @cuda.jit
        def k(x, lo, hi):
            i = cuda.threadIdx.x
            small, large = minmax(x[i], x[31 - i])
            lo[i] = small
            hi[i] = large
        """,
        launch("k", 1, 32, vec(32), vec(32), vec(32)),
        launch("k", 1, 32, vec(32, F64), vec(32, F64), vec(32, F64)),
    )
    assert function(draft, "minmax") == (
        "template <typename T>\n"
        "__device__ Tuple2<T, T> minmax(T a, T b) {\n"
        "    if (a < b) {\n"
        "        return Tuple2<T, T>{a, b};\n"
        "    }\n"
        "    return Tuple2<T, T>{b, a};\n"
        "}"
    )
    body = function(draft, "k")
    assert "const Tuple2<T, T> small_large = minmax(x[i], x[31 - (long long)i]);" in body
    assert "T small = small_large.v0;" in body
    compile_both(tmp_path, draft, ["k<float>", "k<double>"])


def test_two_and_three_dimensional_arrays_through_the_lengths_the_launcher_passes(tmp_path):
    draft = port(
        tmp_path,
        """
        @cuda.jit
        def k(x, y, out, rows, depth, cols):
            i, j, c = cuda.grid(3)
            if i < out.shape[0] and j < depth and c < cols:
                out[i, c] = x[i, j, c] + y[i, cuda.blockIdx.x]
        """,
        *[
            launch("k", (2, 3, 1), (4, 4, 2), vec((r, d, c)), vec((r, 2)), vec((r, c)), r, d, c)
            for r, d, c in ((5, 3, 2), (6, 2, 4))
        ],
    )
    body = function(draft, "k")
    assert "long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;" in body
    assert "if (i < rows && j < depth && c < cols) {" in body
    assert (
        "out[i * cols + c] = x[(i * depth + j) * cols + c] + y[i * (long long)gridDim.x + "
        "blockIdx.x];"
    ) in body
    compile_both(tmp_path, draft, ["k"])


def test_a_row_length_nothing_gives_is_an_error_line(tmp_path):
    draft = port(
        tmp_path,
        """
        @cuda.jit
        def k(x, out):
            i = cuda.threadIdx.x
            out[i] = x[i, 0]
        """,
        launch("k", 1, 4, vec((4, 3)), vec(4)),
        launch("k", 1, 4, vec((4, 5)), vec(4)),
    )
    assert [g.construct for g in draft.gaps] == [
        "dimension 1 of x, which no scalar parameter or launch dimension equals in every launch"
    ]
    assert draft.gaps[0].line == 10
    assert (
        '    #error "portkit port: dimension 1 of x, which no scalar parameter or launch '
        'dimension equals in every launch at k_proto.py:10 is not translated"'
    ) in draft.text


def test_an_untranslatable_construct_is_an_error_at_its_place(tmp_path):
    draft = port(
        tmp_path,
        """
        @cuda.jit
        def k(x, out):
            i = cuda.threadIdx.x
            for v in x:
                out[i] = v
            out[i] = x[i]
        """,
        launch("k", 1, 4, vec(4), vec(4)),
    )
    body = function(draft, "k").splitlines()
    assert body[2].strip().startswith('#error "portkit port: for loop over anything but range()')
    assert body[3].strip() == "out[i] = x[i];"  # the rest is still translated
    assert [(g.file, g.line) for g in draft.gaps] == [("k_proto.py", 10)]


def test_a_variable_set_in_both_branches_is_declared_before_them(tmp_path):
    draft = port(
        tmp_path,
        """
        @cuda.jit
        def k(x, out):
            i = cuda.threadIdx.x
            if x[i] > 0:
                s = 1
            else:
                s = -1
            out[i] = s
        """,
        launch("k", 1, 4, vec(4), vec(4)),
    )
    body = function(draft, "k")
    assert "    long long s;\n    if (x[i] > 0) {\n        s = 1;" in body
    compile_both(tmp_path, draft, ["k"])


def test_two_template_parameters_when_inputs_differ_in_dtype(tmp_path):
    draft = port(
        tmp_path,
        """
        @cuda.jit
        def k(x, stats, out):
            i = cuda.threadIdx.x
            out[i] = x[i] * stats[0]
        """,
        launch("k", 1, 4, vec(4, torch.float16), vec(1), vec(4, torch.float16)),
        launch("k", 1, 4, vec(4, F64), vec(1, F64), vec(4, F64)),
    )
    assert "template <typename T, typename U>" in draft.text
    assert "__global__ void k(const T* x, const U* stats, T* out)" in draft.text
    compile_both(tmp_path, draft, ["k<__half, float>", "k<double, double>"])


@pytest.mark.parametrize("word", ["int", "new"])
def test_a_python_name_that_is_a_c_keyword_is_renamed(tmp_path, word):
    draft = port(
        tmp_path,
        f"""
        @cuda.jit
        def k(x, out):
            {word} = cuda.threadIdx.x
            out[{word}] = x[{word}]
        """,
        launch("k", 1, 4, vec(4), vec(4)),
    )
    assert f"out[{word}_] = x[{word}_];" in draft.text
    compile_both(tmp_path, draft, ["k"])
