"""Twins compile with NVRTC on a CPU-only machine and are cached by everything that
changes the binary; their signatures are parsed and arguments bound without a GPU."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from portkit.backends.twin.backend import bind_arguments
from portkit.backends.twin.build import compile_twin
from portkit.backends.twin.instances import twin_expressions
from portkit.backends.twin.source import TwinParam, parse_twin
from portkit.cache_files import manifest_path
from portkit.errors import InputError, OpDefinitionError, TwinCompileError

SCALE = """\
#include "scale_helpers.cuh"

template <typename T>
__global__ void scale(const T* __restrict__ x, T* __restrict__ out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = twice(x[i]);
}
"""
HELPERS = "template <typename T> __device__ T twice(T v) { return v + v; }\n"
EXPRESSIONS = ["scale<float>", "scale<double>"]


@pytest.fixture
def twin(tmp_path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "scale_helpers.cuh").write_text(HELPERS)
    path = src / "scale.cu"
    path.write_text(SCALE)
    return path


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "cache"


def entries(cache: Path) -> list[str]:
    folder = cache / "twins"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def assert_no_temp_files(cache: Path) -> None:
    for name in entries(cache):
        assert not name.startswith("."), name
        assert name.endswith((".cubin", ".manifest.json")), name


def test_compile_then_cache(twin, cache):
    first = compile_twin(twin, EXPRESSIONS, cache)
    assert first.from_cache is False
    assert first.arch == "sm_90"
    assert first.cubin[:4] == b"\x7fELF"
    assert set(first.symbols) == set(EXPRESSIONS)
    assert all(sym.startswith("_Z") for sym in first.symbols.values())
    assert first.cache_file.is_file()
    assert manifest_path(first.cache_file).is_file()

    second = compile_twin(twin, EXPRESSIONS, cache)
    assert second.from_cache is True
    assert second.cubin == first.cubin
    assert second.symbols == first.symbols
    assert second.cache_file == first.cache_file
    assert len(entries(cache)) == 2
    assert_no_temp_files(cache)


def test_edit_invalidates(twin, cache):
    first = compile_twin(twin, EXPRESSIONS, cache)
    twin.write_text(twin.read_text() + "// an edit\n")
    edited = compile_twin(twin, EXPRESSIONS, cache)
    assert edited.from_cache is False
    assert edited.cache_file != first.cache_file
    assert compile_twin(twin, EXPRESSIONS, cache).from_cache is True


def test_header_edit_invalidates(twin, cache):
    first = compile_twin(twin, EXPRESSIONS, cache)
    header = twin.parent / "scale_helpers.cuh"
    header.write_text(HELPERS + "// an edit\n")
    edited = compile_twin(twin, EXPRESSIONS, cache)
    assert edited.from_cache is False
    assert edited.cache_file != first.cache_file


def test_header_in_subfolder_edit_invalidates(twin, cache):
    """The twin includes a header through a subfolder of its own folder (the include path)."""
    (twin.parent / "inc").mkdir()
    header = twin.parent / "inc" / "twice.cuh"
    header.write_text(HELPERS)
    twin.write_text(SCALE.replace('"scale_helpers.cuh"', '"inc/twice.cuh"'))
    first = compile_twin(twin, EXPRESSIONS, cache)
    header.write_text(HELPERS.replace("v + v", "v * 3"))
    edited = compile_twin(twin, EXPRESSIONS, cache)
    assert edited.from_cache is False
    assert edited.cubin != first.cubin


def test_new_header_beside_twin_invalidates(twin, cache):
    compile_twin(twin, EXPRESSIONS, cache)
    (twin.parent / "other.h").write_text("#define X 1\n")
    assert compile_twin(twin, EXPRESSIONS, cache).from_cache is False


def test_unrelated_file_beside_twin_keeps_cache(twin, cache):
    compile_twin(twin, EXPRESSIONS, cache)
    (twin.parent / "notes.txt").write_text("hello\n")
    assert compile_twin(twin, EXPRESSIONS, cache).from_cache is True


def test_arch_and_expressions_are_in_the_key(twin, cache):
    base = compile_twin(twin, EXPRESSIONS, cache)
    other_arch = compile_twin(twin, EXPRESSIONS, cache, arch="sm_80")
    assert other_arch.from_cache is False and other_arch.arch == "sm_80"
    assert other_arch.cache_file != base.cache_file
    fewer = compile_twin(twin, ["scale<float>"], cache)
    assert fewer.from_cache is False
    assert set(fewer.symbols) == {"scale<float>"}


def test_missing_symbols_file_rebuilds(twin, cache):
    first = compile_twin(twin, EXPRESSIONS, cache)
    manifest_path(first.cache_file).unlink()
    again = compile_twin(twin, EXPRESSIONS, cache)
    assert again.from_cache is False
    assert again.cubin == first.cubin
    assert manifest_path(again.cache_file).is_file()
    assert compile_twin(twin, EXPRESSIONS, cache).from_cache is True
    assert_no_temp_files(cache)


def test_damaged_symbols_file_rebuilds(twin, cache):
    first = compile_twin(twin, EXPRESSIONS, cache)
    manifest_path(first.cache_file).write_text("{not json")
    again = compile_twin(twin, EXPRESSIONS, cache)
    assert again.from_cache is False
    assert (
        json.loads(manifest_path(again.cache_file).read_text())["meta"]["symbols"] == again.symbols
    )


def test_truncated_cubin_is_rebuilt_and_said(twin, cache, capsys):
    first = compile_twin(twin, EXPRESSIONS, cache)
    first.cache_file.write_bytes(first.cubin[: len(first.cubin) // 2])
    capsys.readouterr()
    again = compile_twin(twin, EXPRESSIONS, cache)
    assert again.from_cache is False
    assert again.cubin == first.cubin
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"portkit: cache entry {first.cache_file} is damaged: digest mismatch")
    assert line.endswith("rebuilding it")
    assert compile_twin(twin, EXPRESSIONS, cache).from_cache is True


def test_failing_compile_leaves_nothing(twin, cache, monkeypatch):
    monkeypatch.chdir(twin.parent)
    twin.write_text(SCALE.replace("twice(x[i]);", "twice(x[i])\n    int y = ;"))
    with pytest.raises(TwinCompileError) as info:
        compile_twin(twin, EXPRESSIONS, cache)
    message = str(info.value)
    assert f"twin {twin} does not compile for sm_90" in message
    assert "scale.cu(7): error" in message
    assert entries(cache) == []


def test_missing_name_expression(twin, cache):
    with pytest.raises(TwinCompileError):
        compile_twin(twin, ["scale<float>", "no_such_kernel"], cache)
    assert entries(cache) == []


def test_repository_twins_compile(tmp_path):
    """Every twin of the repository compiles for its prototype's dtypes."""
    from portkit.build.compile_checks import check_twin
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    config = load_config(Path(__file__).resolve().parents[2])
    private = type(config)(config.root, config.prototypes_dir, config.cuda_src_dir, tmp_path)
    catalog = discover(config)
    assert catalog.ops
    for op in catalog.ops.values():
        if op.has_twin:
            result = check_twin(op, private)
            assert result.status == "pass", result.detail


# -- parse_twin ----------------------------------------------------------------------------


def parse(tmp_path: Path, source: str):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(source))
    return parse_twin(path)


def test_parse_templated_kernel(tmp_path):
    kernels = parse(
        tmp_path,
        """
        template <typename T>
        __global__ void axpy(const T* __restrict__ x, T* y, T alpha, long long n) {}
        """,
    )
    k = kernels["axpy"]
    assert k.template_param == "T"
    assert k.params == (
        TwinParam("x", "T", True),
        TwinParam("y", "T", True),
        TwinParam("alpha", "T", False),
        TwinParam("n", "long long", False),
    )
    assert k.line == 3
    assert k.expression("float") == "axpy<float>"


def test_parse_template_class_keyword(tmp_path):
    kernels = parse(tmp_path, "template<class Scalar> __global__ void f(Scalar* p, int n) {}")
    assert kernels["f"].template_param == "Scalar"
    assert kernels["f"].params[0] == TwinParam("p", "Scalar", True)


def test_parse_extern_c(tmp_path):
    kernels = parse(tmp_path, 'extern "C" __global__ void plain(float* x, int n) {}')
    k = kernels["plain"]
    assert k.template_param is None
    assert k.expression(None) == "plain"
    assert k.params == (TwinParam("x", "float", True), TwinParam("n", "int", False))


def test_parse_launch_bounds(tmp_path):
    kernels = parse(
        tmp_path,
        """
        __global__ void __launch_bounds__(256) after(double* x) {}
        __global__ __launch_bounds__(128, 2) void before(double* x) {}
        template <typename T>
        __global__ void __launch_bounds__(1024) tmpl(T* x, unsigned int n) {}
        """,
    )
    assert set(kernels) == {"after", "before", "tmpl"}
    assert kernels["after"].params == (TwinParam("x", "double", True),)
    assert kernels["before"].line == 3
    assert kernels["tmpl"].params[1] == TwinParam("n", "unsigned int", False)


def test_parse_const_restrict_pointers(tmp_path):
    kernels = parse(
        tmp_path,
        "__global__ void k(const float * const __restrict__ a, volatile int *b, "
        "const double* __restrict c, size_t n) {}",
    )
    assert kernels["k"].params == (
        TwinParam("a", "float", True),
        TwinParam("b", "int", True),
        TwinParam("c", "double", True),
        TwinParam("n", "size_t", False),
    )


def test_parse_no_params_and_void(tmp_path):
    kernels = parse(tmp_path, "__global__ void a() {}\n__global__ void b(void) {}\n")
    assert kernels["a"].params == () and kernels["b"].params == ()


def test_parse_ignores_comments_and_keeps_lines(tmp_path):
    kernels = parse(
        tmp_path,
        """\
        // __global__ void fake_line(float4 v) {}
        /* a block comment
           __global__ void fake_block(float4 v) {}
        */
        __device__ float helper(float v) { return v; }
        template <typename T>
        __global__ void real(T* out, long long n) {}  // __global__ void fake_tail(int x)
        """,
    )
    assert set(kernels) == {"real"}
    assert kernels["real"].line == 7


def test_parse_unsupported_param_type(tmp_path):
    with pytest.raises(OpDefinitionError) as info:
        parse(tmp_path, "__global__ void k(float* x, float4 v) {}")
    message = str(info.value)
    assert "kernel k: parameter v has type 'float4'" in message
    assert "k.cu" in message


def test_parse_unreadable_param(tmp_path):
    with pytest.raises(OpDefinitionError, match="cannot read parameter 'float'"):
        parse(tmp_path, "__global__ void k(float) {}")


def test_repository_twins_declare_prototype_kernels():
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    catalog = discover(load_config(Path(__file__).resolve().parents[2]))
    for op in catalog.ops.values():
        if op.has_twin:
            declared = parse_twin(op.twin_path)
            assert set(op.kernels) <= set(declared), op.name
            expressions = twin_expressions(op)
            per_kernel = [
                len(op.definition.dtypes) ** len(declared[name].template_params)
                for name in op.kernels
            ]  # an extern "C" kernel once, a template once per dtype (combination)
            assert len(expressions) == sum(per_kernel), op.name


# -- bind_arguments ------------------------------------------------------------------------


@pytest.fixture
def kernel(tmp_path):
    return parse(
        tmp_path,
        "template <typename T>\n"
        "__global__ void k(const T* x, T* out, int n, double scale, long long m) {}\n",
    )["k"]


def test_bind_float32(kernel):
    x, out = torch.ones(4), torch.empty(4)
    scalar, values = bind_arguments(kernel, [x, out, 4, 0.5, 2**40])
    assert scalar == ("float",)
    assert values[:2] == [x.data_ptr(), out.data_ptr()]
    assert type(values[2]) is np.int32 and values[2] == 4
    assert type(values[3]) is np.float64 and values[3] == 0.5
    assert type(values[4]) is np.int64 and values[4] == 2**40


def test_bind_float64(kernel):
    x = torch.ones(4, dtype=torch.float64)
    scalar, _ = bind_arguments(kernel, [x, torch.empty_like(x), 4, 1.0, 1])
    assert scalar == ("double",)


def test_bind_rejects_tensor_for_scalar(kernel):
    x = torch.ones(4)
    with pytest.raises(InputError) as info:
        bind_arguments(kernel, [x, x, torch.tensor(4), 1.0, 1])
    assert "twin kernel k, parameter n is a int scalar; got a tensor" in str(info.value)


def test_bind_rejects_int_too_big(kernel):
    x = torch.ones(4)
    with pytest.raises(InputError) as info:
        bind_arguments(kernel, [x, x, 2**31, 1.0, 1])
    assert "parameter n: 2147483648 does not fit a int" in str(info.value)
    with pytest.raises(InputError, match="does not fit a long long"):
        bind_arguments(kernel, [x, x, 1, 1.0, 2**63])


def test_bind_rejects_float_for_int_param(kernel):
    """2.7 for `int n` would silently become 2 on the twin while the prototype sees 2.7."""
    x = torch.ones(4)
    with pytest.raises(InputError) as info:
        bind_arguments(kernel, [x, x, 2.7, 1.0, 1])
    assert "parameter n" in str(info.value)


def test_bind_rejects_mixed_dtypes(kernel):
    with pytest.raises(InputError) as info:
        bind_arguments(kernel, [torch.ones(4), torch.ones(4, dtype=torch.float64), 4, 1.0, 1])
    message = str(info.value)
    assert "out is float64" in message
    assert "were float32" in message


def test_bind_rejects_wrong_count(kernel):
    with pytest.raises(InputError) as info:
        bind_arguments(kernel, [torch.ones(4), torch.ones(4), 4])
    assert "twin kernel k takes 5 arguments (x, out, n, scale, m), got 3" in str(info.value)


def test_bind_rejects_number_for_pointer(kernel):
    with pytest.raises(InputError, match="parameter out is a pointer; pass a tensor, not float"):
        bind_arguments(kernel, [torch.ones(4), 1.5, 4, 1.0, 1])


def test_bind_rejects_dtype_without_instantiation(kernel):
    x = torch.ones(4, dtype=torch.complex64)  # float16 is instantiated now (__half)
    with pytest.raises(InputError, match="x is a complex64 tensor"):
        bind_arguments(kernel, [x, x, 4, 1.0, 1])


def test_bind_fixed_pointer_type(tmp_path):
    k = parse(tmp_path, 'extern "C" __global__ void f(const float* x, int n) {}')["f"]
    scalar, values = bind_arguments(k, [torch.ones(2), 2])
    assert scalar is None and values[1] == 2
    with pytest.raises(InputError, match="parameter x is float\\*; got a float64 tensor"):
        bind_arguments(k, [torch.ones(2, dtype=torch.float64), 2])
