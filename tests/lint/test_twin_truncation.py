"""A twin that squeezes a 64-bit size or index into an ``int`` is a ``truncation`` lint
error, from the compiler's -Wconversion/-Wsign-conversion (portkit/lint/twin_truncation.py);
an explicit cast, a bounded value and the repository's twins are not reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portkit.backends.twin_cpu.build import find_compiler
from portkit.build.finding import Severity
from portkit.lint.twin_truncation import TRUNCATION, diagnostics_findings, truncation_findings

REPO = Path(__file__).resolve().parents[2]
needs_compiler = pytest.mark.skipif(find_compiler() is None, reason="no C++ compiler")

INT_INDEX = """\
template <typename T>
__global__ void tr_index_fwd(const T* __restrict__ x, T* __restrict__ out, long long n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * T(2);
}
"""
ROW_TIMES_COLS = """\
template <typename T>
__global__ void tr_rows_fwd(const T* __restrict__ x, T* __restrict__ out, long long n) {
    const long long row = blockIdx.x, cols = blockDim.x;
    int idx = row * cols + threadIdx.x;
    if (idx < n) out[idx] = x[idx] * T(2);
}
"""
FITS = """\
template <typename T>
__global__ void tr_fits_fwd(const T* __restrict__ x, T* __restrict__ out, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x % 32;
    const int parity = i % 2;
    const int cols = (int)n;  // explicit: the author says it fits
    if (i < n) out[i] = x[i] * T(2) + T(lane * 0 + parity * 0 + cols * 0);
}
"""

# a shuffle's offset from a 64-bit loop variable (as `portkit port` drafts a scan); the
# same variable squeezed into an int beside it is still reported
SHUFFLE_OFFSET = """\
template <typename T>
__global__ void tr_scan_fwd(const T* __restrict__ x, T* __restrict__ out, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    T v = i < n ? x[i] : T(0);
    for (long long d = 1; d < 32; d *= 2) {
        T up = __shfl_up_sync(0xffffffffu, v, d);
        if ((threadIdx.x % 32) >= d) v += up;
    }
    int wrapped = i;
    if (i < n) out[i] = v + T(wrapped * 0);
}
"""


def _project(make_project, sources, name: str, twin: str) -> Path:
    return make_project({name: (sources.unary_op(name, reference="lambda x: x * 2"), twin)})


@needs_compiler
def test_an_int_global_index_against_a_64_bit_size_is_an_error(make_project, sources, cli):
    root = _project(make_project, sources, "tr_index", INT_INDEX)
    linted = cli(root, "lint", "tr_index", "--json", "--no-resources")
    assert linted.exit_code == 1, linted.output
    (finding,) = [f for f in json.loads(linted.output)["findings"] if f["kind"] == TRUNCATION]
    assert finding["severity"] == "error" and finding["kernel"] == "tr_index_fwd"
    assert finding["where"] == f"{root / 'cuda_src' / 'tr_index.cu'}:3"
    assert "global thread index in a 32-bit int, compared with the 64-bit `n`" in finding["message"]
    assert "long long i = (long long)blockIdx.x" in finding["fix"]


@needs_compiler
def test_a_64_bit_product_stored_in_an_int_is_an_error(make_project, sources, load_op):
    root = _project(make_project, sources, "tr_rows", ROW_TIMES_COLS)
    _, op = load_op(root, "tr_rows")
    (finding,) = truncation_findings(op)
    assert (finding.severity, finding.kind, finding.kernel) == (
        Severity.ERROR,
        TRUNCATION,
        "tr_rows_fwd",
    )
    assert finding.where.endswith("tr_rows.cu:4")
    assert "`int idx = row * cols + threadIdx.x;` converts a 64-bit `long long" in finding.message
    assert "to `int`" in finding.message


@needs_compiler
def test_explicit_casts_and_bounded_values_are_not_reported(make_project, sources, load_op):
    root = _project(make_project, sources, "tr_fits", FITS)
    _, op = load_op(root, "tr_fits")
    assert truncation_findings(op) == []


@needs_compiler
def test_a_shuffle_offset_is_not_a_truncation(make_project, sources, load_op):
    root = _project(make_project, sources, "tr_scan", SHUFFLE_OFFSET)
    _, op = load_op(root, "tr_scan")
    (finding,) = truncation_findings(op)
    assert finding.where.endswith("tr_scan.cu:9")  # `int wrapped = i;`, not the shuffle


@needs_compiler
@pytest.mark.parametrize("op_name", ["matmul", "add_rmsnorm", "layernorm", "vector_add"])
def test_the_repository_twins_do_not_truncate(op_name, load_op):
    _, op = load_op(REPO, op_name)
    assert truncation_findings(op) == []


def test_clang_diagnostics_are_read_too(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(
        "__global__ void k(float* out, long long n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    long long r = n / 2;\n"
        "    int j = r * 3;\n"
        "    if (i < n) out[j] = 0;\n"
        "}\n"
    )
    log = (
        f"{path}:2:45: warning: implicit conversion changes signedness: 'unsigned int' to "
        "'int' [-Wsign-conversion]\n"
        f"{path}:4:15: warning: implicit conversion loses integer precision: 'long long' to "
        "'int' [-Wshorten-64-to-32]\n"
        f"{path}:5:20: warning: implicit conversion from 'double' to 'float' [-Wconversion]\n"
    )
    found = diagnostics_findings("k", path, log, {"k": 1})
    assert [f.where for f in found] == [f"{path}:2", f"{path}:4"]
    assert "compared with the 64-bit `n`" in found[0].message
