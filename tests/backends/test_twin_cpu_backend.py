"""The ``twin-cpu`` backend end to end: registry entry, build cache, plain and check
launches, errors with file and line, and a clear reason when there is no compiler."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

import portkit
from portkit.backends.twin_cpu import build
from portkit.backends.twin_cpu.build import compile_twin_cpu, find_compiler
from portkit.errors import KernelError, TwinCompileError
from portkit.launch.compose import compose_kernels

REPO = Path(__file__).resolve().parents[2]
needs_compiler = pytest.mark.skipif(find_compiler() is None, reason="no C++ compiler")

SCALE = """\
#include "scale_helpers.cuh"

template <typename T>
__global__ void scale(const T* __restrict__ x, T* __restrict__ out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = twice(x[i]);
}
"""


@pytest.fixture
def twin(tmp_path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "scale_helpers.cuh").write_text(
        "template <typename T> __device__ T twice(T v) { return v + v; }\n"
    )
    path = src / "scale.cu"
    path.write_text(SCALE)
    return path


def test_registered_as_a_cpu_twin():
    from portkit.backends import backend_class, default_names

    backend = backend_class("twin-cpu")
    assert (backend.role, backend.device, backend.simulated) == ("twin", "cpu", True)
    assert "twin-cpu" in default_names()


def test_no_compiler_is_a_skip_reason_with_install_hint(monkeypatch, load_op):
    from portkit.backends import create

    monkeypatch.setenv("CXX", "no-such-compiler-xyz")  # the compiler is found per $CXX
    config, _ = load_op(REPO, "vector_add")
    reason = create("twin-cpu", config).unavailable_reason
    assert find_compiler() is None
    assert reason and "no C++ compiler" in reason and "apt-get install g++" in reason


@needs_compiler
def test_cache_hits_and_every_input_of_the_binary_is_in_the_key(twin, tmp_path):
    cache = tmp_path / "cache"
    expressions = ["scale<float>", "scale<double>"]
    first = compile_twin_cpu(twin, expressions, cache, "plain")
    again = compile_twin_cpu(twin, expressions, cache, "plain")
    assert not first.from_cache and again.from_cache and again.path == first.path
    assert compile_twin_cpu(twin, expressions, cache, "check").path != first.path  # flags
    assert compile_twin_cpu(twin, expressions[:1], cache, "plain").path != first.path
    (twin.parent / "scale_helpers.cuh").write_text(
        "template <typename T> __device__ T twice(T v) { return v * T(2); }\n"
    )
    assert compile_twin_cpu(twin, expressions, cache, "plain").path != first.path  # header
    twin.write_text(SCALE + "\n// edited\n")
    assert compile_twin_cpu(twin, expressions, cache, "plain").path != first.path  # source
    assert not list((cache / "twins-cpu").glob(".build-*"))  # no half-written leftovers


def test_key_covers_portkit_header_and_compiler(twin, monkeypatch):
    unit = build.translation_unit(twin, ["scale<float>"])
    compiler = build.Compiler("/usr/bin/g++", "g++ 12.2.0")
    key = build.cache_key(unit, twin, "plain", compiler)
    assert build.cache_key(unit, twin, "plain", build.Compiler("/usr/bin/g++", "g++ 13.1.0")) != key
    original = build._headers
    monkeypatch.setattr(
        build,
        "_headers",
        lambda folder: (
            original(folder) + ([("extra.h", b"x")] if folder == build.INCLUDE_DIR else [])
        ),
    )
    assert build.cache_key(unit, twin, "plain", compiler) != key


def test_dynamic_shared_rewrite_keeps_lines():
    source = "a\nextern __shared__ __align__(16)\n  unsigned char raw[];\nb\n"
    source += "extern __shared__ float s[];\n"
    rewritten = build.rewrite_dynamic_shared(source)
    assert rewritten.count("\n") == source.count("\n")
    lines = rewritten.splitlines()
    assert "unsigned char* const raw = reinterpret_cast<unsigned char*>" in lines[1]
    assert lines[3] == "b" and "float* const s = reinterpret_cast<float*>" in lines[4]
    assert build.rewrite_dynamic_shared("static __shared__ int t[4];") == " __shared__ int t[4];"


@needs_compiler
def test_compile_error_names_the_twin_line(tmp_path):
    path = tmp_path / "broken.cu"
    path.write_text(
        "template <typename T>\n__global__ void k(T* out) {\n    out[0] = undefined_name;\n}\n"
    )
    with pytest.raises(TwinCompileError, match=r"broken\.cu:3"):
        compile_twin_cpu(path, ["k<float>"], tmp_path / "cache", "plain")


@needs_compiler
def test_load_runs_the_plain_build_with_gradients(monkeypatch):
    monkeypatch.chdir(REPO)
    softmax = portkit.load("softmax_warp", "twin-cpu")
    x = torch.randn(3, 200, dtype=torch.float64, requires_grad=True)
    y = softmax(x)
    (y * torch.arange(200.0, dtype=torch.float64)).sum().backward()
    expected = torch.softmax(x.detach().clone().requires_grad_(), dim=1)
    torch.testing.assert_close(y, expected.detach())
    x2 = x.detach().clone().requires_grad_()
    (torch.softmax(x2, dim=1) * torch.arange(200.0, dtype=torch.float64)).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)


@needs_compiler
def test_plain_and_check_builds_agree_bit_for_bit(load_op):
    from portkit.backends import create

    config, op = load_op(REPO, "softmax")
    backend = create("twin-cpu", config)
    x = torch.randn(4, 300)
    outs = []
    for checked in (False, True):
        k = compose_kernels(backend, op, checked=checked, poison=checked)
        out = k.empty_like(x)
        k.softmax_fwd[4, 128](x, out, 300)
        outs.append(out)
    assert torch.equal(outs[0], outs[1])


DEADLOCK = """\
template <typename T>
__global__ void hang_fwd(const T* __restrict__ x, T* __restrict__ out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x < 16) {
        out[i] = __shfl_sync(0xffffffffu, x[i], 0);
    } else {
        __syncthreads();
    }
}
"""


@needs_compiler
def test_kernel_errors_are_kernel_errors_in_both_modes(make_project, load_op, sources):
    from portkit.backends import create

    prototype = sources.unary_op("hang", "out[i] = x[i]", cases=sources.ONE_CASE)
    root = make_project({"hang": (prototype, DEADLOCK)})
    config, op = load_op(root, "hang")
    backend = create("twin-cpu", config)
    for checked in (False, True):
        k = compose_kernels(backend, op, checked=checked, poison=checked)
        x = torch.ones(32)
        with pytest.raises(
            KernelError, match=r"deadlock in hang_fwd<float> block \(0,0,0\).*hang\.cu:5"
        ):
            k.hang_fwd[1, 32](x, k.empty_like(x), 32)


@needs_compiler
def test_check_worker_survives_a_sanitizer_report(make_project, load_op, sources):
    """A report ends the worker process, not the caller; the next launch starts a new one."""
    from portkit.backends import create

    overflow = textwrap.dedent(sources.unary_twin("spill", "out[i] = x[i];")).replace(
        "i < n", "i <= n"
    )
    root = make_project(
        {"spill": (sources.unary_op("spill", "out[i] = x[i]", cases=sources.ONE_CASE), overflow)}
    )
    config, op = load_op(root, "spill")
    k = compose_kernels(create("twin-cpu", config), op, checked=True, poison=True)
    x = torch.arange(40.0)
    with pytest.raises(
        KernelError, match=r"heap-buffer-overflow.*past the end of x .*thread \(8,0,0\)"
    ):
        k.spill_fwd[2, 32](x, k.empty_like(x), 40)
    inside = x[:32].clone()
    out = k.empty_like(inside)
    k.spill_fwd[1, 32](inside, out, 32)  # no thread 32 exists: nothing past the end
    assert torch.equal(out, inside)


FLOAT_SUM = """\
template <typename T>
__global__ void fsum_fwd(const T* __restrict__ x, T* __restrict__ out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    __shared__ T partial;
    if (threadIdx.x == 0) partial = T(0);
    __syncthreads();
    if (i < n) atomicAdd(&partial, x[i]);
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(out, partial);
}
"""


@needs_compiler
def test_float_atomic_sums_are_not_blamed_on_the_order(make_project, load_op, sources):
    """Reversing the thread order rounds a float atomicAdd sum differently; that is not a
    missing barrier, so the schedule check leaves the atomics' target alone."""
    from portkit.backends import create

    prototype = sources.unary_op("fsum", "out[i] = x[i]", cases=sources.ONE_CASE)
    root = make_project({"fsum": (prototype, FLOAT_SUM)})
    config, op = load_op(root, "fsum")
    backend = create("twin-cpu", config)
    x = torch.tensor([1e8, 1.0, -1e8, 3.0] * 16)  # the sum depends on the order
    results = []
    for checked in (False, True):
        k = compose_kernels(backend, op, checked=checked, poison=checked)
        out = torch.zeros(1)
        k.fsum_fwd[2, 32](x, out, x.numel())  # would raise "order-dependent" if blamed
        results.append(out)
    assert torch.equal(results[0], results[1])
