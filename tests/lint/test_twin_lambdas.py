"""A generic lambda (an ``auto`` parameter) in a twin is a ``generic-lambda`` lint error:
older NVRTC refuses it in device code, so a green compile here could be a refusal on a
GPU machine (portkit/lint/twin_lambdas.py). Typed lambdas (which that machine compiled,
matmul's), subscripts, array declarators, attributes, comments and strings are not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portkit.lint.twin_lambdas import LAMBDA, generic_lambda_lines, twin_lambda_findings

REPO = Path(__file__).resolve().parents[2]

GENERIC = """\
template <typename T> __device__ inline void twice_at(const T* x, T* out, long long i, bool wide) {
    out[i] = x[i] * T(2);
}

template <typename T>
__global__ void gl_fwd(const T* __restrict__ x, T* __restrict__ out, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    auto at = [&](auto wide) { twice_at(x, out, i, wide); };
    if (i < n) at(true);
}
"""
TYPED = GENERIC.replace("[&](auto wide)", "[&](bool wide)")


@pytest.mark.parametrize(
    ("code", "lines"),
    [
        ("auto f = [&](auto v) { return v; };", [1]),
        ("g(v, [=] __device__ (const auto& q) mutable -> int { return q; });", [1]),
        ("auto t = []<typename T>(T x) { return x; };", [1]),
        ("auto f = [&](long long k0) { h(k0); };", []),  # typed: compiled on the H200
        ("h([]{ return 1; });", []),
        ("x = buf[i] + arr[j][k]; int a[4] = {1, 2, 3, 4};", []),
        ("__shared__ float part[32]; if (a[1]) { }", []),
        ("[[nodiscard]] __device__ int g();", []),
        ("// [&](auto v) { }\nconst char* s = \"[&](auto v) { }\";", []),
        ("int y;\n/* [](auto) {} */\nauto f =\n    [](auto z) {\n return z; };", [4]),
    ],
)
def test_generic_lambdas_are_found_and_nothing_else(code, lines):
    assert generic_lambda_lines(code) == lines


def test_a_generic_lambda_in_a_twin_is_a_lint_error_naming_its_line(make_project, sources, cli):
    root = make_project({"gl": (sources.unary_op("gl", reference="lambda x: x * 2"), GENERIC)})
    linted = cli(root, "lint", "gl", "--json", "--no-resources")
    assert linted.exit_code == 1, linted.output
    (finding,) = [f for f in json.loads(linted.output)["findings"] if f["kind"] == LAMBDA]
    assert finding["severity"] == "error"
    assert finding["where"] == f"{root / 'cuda_src' / 'gl.cu'}:8"
    assert "older NVRTC releases refuse one in device code" in finding["message"]
    assert "struct with a __device__ operator()" in finding["fix"]


def test_the_lint_row_without_a_config_reports_it_too(make_project, sources, load_op):
    """lint_result(op) without a project config (a notebook, a test) takes the twin's
    findings from the same place as `portkit lint`: it had only the signature check."""
    from portkit.checking.harness import lint_result

    root = make_project({"gl": (sources.unary_op("gl", reference="lambda x: x * 2"), GENERIC)})
    _, op = load_op(root, "gl")
    row = lint_result(op)
    assert row.failed and "generic lambda" in row.detail


def test_a_typed_lambda_is_not_reported(make_project, sources, load_op):
    root = make_project({"tl": (sources.unary_op("tl", reference="lambda x: x * 2"),
                                TYPED.replace("gl_fwd", "tl_fwd"))})  # fmt: skip
    _, op = load_op(root, "tl")
    assert twin_lambda_findings(op) == []


@pytest.mark.parametrize("op_name", ["matmul", "rmsnorm", "layernorm", "softmax_warp"])
def test_the_repository_twins_have_no_generic_lambda(op_name, load_op):
    _, op = load_op(REPO, op_name)
    assert twin_lambda_findings(op) == []
