"""Uninitialised values and 32-bit overflow in the CPU twin's check build
(backends/twin_cpu/uninit.py, docs/twin-cpu.md): a local, an accumulator, a register
array or a shared element read before it is written is called uninitialised, with the
compiler's variable and line, in float32 cases too; a twin that declares a variable and
writes it later stays green; an int index that overflows fails with UBSan's line."""

from __future__ import annotations

import json
import re

import pytest
import torch

from portkit.backends.twin_cpu import uninit
from portkit.backends.twin_cpu.build import compile_twin_cpu, find_compiler
from portkit.errors import KernelError
from portkit.launch.compose import compose_kernels

COMPILER = find_compiler()
pytestmark = [
    pytest.mark.skipif(COMPILER is None, reason="no C++ compiler on this machine"),
    pytest.mark.skipif(
        COMPILER is not None and not uninit.supported(COMPILER),
        reason="the compiler has no -ftrivial-auto-var-init",
    ),
]

ACCUMULATOR = """\
float acc;  // never set to 0
        for (int k = 0; k < 2; ++k) acc += (float)x[i];
        out[i] = (T)acc;"""
DECLARED_THEN_WRITTEN = """\
float v;
        if (n > 0) v = (float)x[i] * 2.0f;
        out[i] = (T)v;"""
REGISTER_ARRAY = """\
float parts[2];
        parts[0] = (float)x[i];  // parts[1] is never written
        out[i] = (T)(parts[0] + parts[1] + (float)x[i]);"""
SHARED_TWIN = """\
template <typename T>
__global__ void half_fwd(const T* __restrict__ x, T* __restrict__ out, long long n) {
    __shared__ float s[32];
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x < 16 && i < n) s[threadIdx.x] = (float)x[i] * 2.0f;
    __syncthreads();
    if (i < n) out[i] = (T)s[threadIdx.x];  // lanes 16..31 read what nobody wrote
}
"""
OVERFLOW = """\
int row = (int)i;
        int offset = row * 16777216;  // an int index with a large stride: 2^31 at row 128
        out[i] = x[offset / 16777216];"""


def _launch(make_project, load_op, sources, name: str, twin: str):
    from portkit.backends import create

    prototype = sources.unary_op(name, cases=sources.ONE_CASE)
    root = make_project({name: (prototype, twin)})
    config, op = load_op(root, name)
    k = compose_kernels(create("twin-cpu", config), op, checked=True, poison=True)
    x = torch.arange(129.0)
    out = k.empty_like(x)
    getattr(k, f"{name}_fwd")[5, 32](x, out, 129)
    return out


def test_an_uninitialised_float32_accumulator_is_called_so(make_project, load_op, sources):
    twin = sources.unary_twin("acc", ACCUMULATOR)
    with pytest.raises(KernelError) as caught:
        _launch(make_project, load_op, sources, "acc", twin)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("acc_fwd<float> in ")
    assert "acc.cu reads an uninitialised value: out (argument 1, 129 float32)" in message
    assert "(129 of 129 elements)" in message
    # The compiler's warning names the variable, the line it is read on and its declaration.
    assert re.search(
        r"acc\.cu:[67]: `acc` (may be|is) used uninitialized \(declared at line 5\)", message
    )


def test_a_variable_declared_then_written_stays_green(make_project, load_op, sources):
    out = _launch(
        make_project, load_op, sources, "late", sources.unary_twin("late", DECLARED_THEN_WRITTEN)
    )
    assert torch.equal(out, torch.arange(129.0) * 2)


def test_an_unwritten_register_array_element_is_caught(make_project, load_op, sources):
    twin = sources.unary_twin("regs", REGISTER_ARRAY)
    with pytest.raises(KernelError, match=r"regs_fwd<float> in .*regs\.cu reads an uninitialised"):
        _launch(make_project, load_op, sources, "regs", twin)


def test_shared_memory_read_before_any_write_is_called_uninitialised(
    make_project, load_op, sources
):
    with pytest.raises(KernelError) as caught:
        _launch(make_project, load_op, sources, "half", SHARED_TWIN)
    message = str(caught.value)
    assert "reads an uninitialised value: out (argument 1, 129 float32) differs at [16]" in message
    assert "the compiler names no variable" in message  # no local: shared memory
    assert "order-dependent" not in message  # the barrier is there: not a race


def test_a_missing_barrier_is_still_an_order_dependence(make_project, load_op, sources):
    """The uninitialised check comes after the schedule check: a read of shared memory
    that another thread writes later is a race, not an uninitialised local."""
    racy = SHARED_TWIN.replace("threadIdx.x < 16 && ", "").replace("    __syncthreads();\n", "")
    racy = racy.replace("(T)s[threadIdx.x];", "(T)s[31 - threadIdx.x];")
    assert "s[31 - threadIdx.x]" in racy and "__syncthreads" not in racy
    with pytest.raises(KernelError, match=r"half_fwd<float> is order-dependent: out"):
        _launch(make_project, load_op, sources, "half", racy)


def test_an_int_index_past_2_31_fails_with_ubsan_line(make_project, load_op, sources):
    twin = sources.unary_twin("stride", OVERFLOW)
    with pytest.raises(KernelError) as caught:
        _launch(make_project, load_op, sources, "stride", twin)
    message = str(caught.value)
    assert "\n" not in message
    assert "stride.cu:6" in message and "signed integer overflow" in message
    assert "128 * 16777216 cannot be represented in type 'int'" in message


def test_check_fails_the_float32_case_with_one_line(make_project, cli, sources):
    prototype = sources.unary_op("acc", cases=sources.ONE_CASE)
    root = make_project({"acc": (prototype, sources.unary_twin("acc", ACCUMULATOR))})
    result = cli(root, "check", "acc", "--backend", "twin-cpu", "--no-compile", "--json")
    assert result.exit_code == 1, result.output
    rows = json.loads(result.output[result.output.index('{\n "results"') :])["results"]
    failing = [r for r in rows if r["status"] == "fail"]
    assert failing and {r["case"] for r in failing} == {"float32-n129"}
    forward = next(r for r in failing if r["check"] == "forward")
    assert forward["detail"].count("\n") == 0
    assert forward["detail"].startswith("acc_fwd<float> in cuda_src/acc.cu reads an uninitialised")
    assert re.search(r"acc\.cu:[67]: `acc` (may be|is) used uninitialized", forward["detail"])


def test_the_two_check_builds_are_cached_apart(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(
        "template <typename T>\n__global__ void k(T* out) {\n    float a;\n    out[0] = a;\n}\n"
    )
    pattern = compile_twin_cpu(path, ["k<float>"], tmp_path / "cache", uninit.PATTERN)
    zero = compile_twin_cpu(path, ["k<float>"], tmp_path / "cache", uninit.ZERO)
    assert pattern.path != zero.path
    assert pattern.warnings and "`a`" in pattern.warnings[0] and "k.cu:4" in pattern.warnings[0]
    again = compile_twin_cpu(path, ["k<float>"], tmp_path / "cache", uninit.PATTERN)
    assert again.from_cache and again.warnings == pattern.warnings  # kept in the manifest


GCC_LOG = """\
In file included from acc.cpp:1:
/x/include/portkit_cuda_cpu.h:712:61: warning: poisoning existing macro "INT8_MAX"
cuda_src/acc.cu: In function \u2018void acc_fwd(const T*, T*, long long int) [with T = float]\u2019:
cuda_src/acc.cu:7:12: warning: \u2018acc\u2019 may be used uninitialized [-Wmaybe-uninitialized]
cuda_src/acc.cu:5:11: note: \u2018acc\u2019 was declared here
cuda_src/acc.cu:9:3: warning: 'm' is used uninitialized [-Wuninitialized]
"""
CLANG_LOG = (
    "cuda_src/k.cu:4:14: warning: variable 'a' is uninitialized when used here "
    "[-Wuninitialized]\ncuda_src/k.cu:3:11: note: initialize the variable 'a' to silence this\n"
)


def test_compiler_warnings_are_read_from_gcc_and_clang():
    assert uninit.warnings_in(GCC_LOG) == [
        "cuda_src/acc.cu:7: `acc` may be used uninitialized (declared at line 5)",
        "cuda_src/acc.cu:9: `m` is used uninitialized",
    ]
    assert uninit.warnings_in(CLANG_LOG) == ["cuda_src/k.cu:4: `a` is used uninitialized"]


def test_a_failed_build_shows_errors_without_warnings():
    log = GCC_LOG + "cuda_src/acc.cu:11:5: error: 'nope' was not declared in this scope\n"
    shown = uninit.without_warnings(log)
    assert "error: 'nope'" in shown and "warning" not in shown and "declared here" not in shown


def test_template_shared_memory_is_poisoned_before_every_block(make_project, load_op, sources):
    """GCC drops the section attribute of a static local in a template: each
    ``__shared__`` declaration registers its range, so the plain build too shows a read
    before any write as NaN, in the first block and in every later one."""
    from portkit.backends import create

    root = make_project({"half": (sources.unary_op("half", cases=sources.ONE_CASE), SHARED_TWIN)})
    config, op = load_op(root, "half")
    k = create("twin-cpu", config).kernels(op)
    x = torch.arange(129.0)
    out = torch.zeros(129)
    k.half_fwd[5, 32](x, out, 129)
    lanes = torch.arange(129) % 32
    assert torch.equal(out[lanes < 16], x[lanes < 16] * 2)
    assert torch.isnan(out[lanes >= 16]).all()  # blocks 1-3 do not see block 0's values


def test_every_shared_declarator_is_registered_on_its_own_line():
    from portkit.backends.twin_cpu.build import register_static_shared

    source = (
        "__global__ void k() {\n"
        "    __shared__ double sums_w[R][C], sums_b[R][C];\n"
        "    __shared__ __align__(16) float tile[BK][BM + 1];\n"
        "    __shared__ T partial;\n"
        "}\n"
    )
    lines = register_static_shared(source).splitlines()
    assert len(lines) == source.count("\n")
    assert lines[1].endswith("; PORTKIT_SHARED_REGISTER(sums_w) PORTKIT_SHARED_REGISTER(sums_b)")
    assert lines[2].endswith("; PORTKIT_SHARED_REGISTER(tile)")
    assert lines[3].endswith("; PORTKIT_SHARED_REGISTER(partial)")
