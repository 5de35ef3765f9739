"""`portkit lint`: planted problems are reported with their line, and exit codes follow
severity (`--strict` turns warnings into errors)."""

from __future__ import annotations

import json

import pytest


def line_of(source: str, text: str) -> int:
    return next(n for n, line in enumerate(source.splitlines(), 1) if text in line)


@pytest.fixture
def float64_op(make_project, sources):
    # `* 0.1` is a Python float literal: float32 * float64 -> float64 (and 0.1 is not a float32,
    # so LLVM cannot fold the promotion away as it does for 2.5).
    py = sources.unary_op("lint_lit", "out[i] = x[i] * 0.1", reference="lambda x: x * 0.1")
    cu = sources.unary_twin("lint_lit", "out[i] = x[i] * T(0.1);")
    return make_project({"lint_lit": (py, cu)}), py


def test_float64_literal_reported_with_line_and_fix(float64_op, cli):
    root, py = float64_op
    result = cli(root, "lint", "lint_lit", "--json")
    assert result.exit_code == 1, result.output  # float64 arithmetic changes results
    findings = json.loads(result.output)["findings"]
    float64 = [f for f in findings if f["kind"] == "float64"]
    assert float64, findings
    assert float64[0]["where"].endswith(f"lint_lit.py:{line_of(py, 'x[i] * 0.1')}")
    assert "float32" in float64[0]["fix"] or "typed" in float64[0]["fix"]


def test_strict_turns_warnings_into_errors(float64_op, cli):
    root, _ = float64_op
    result = cli(root, "lint", "lint_lit", "--strict", "--no-resources")
    assert result.exit_code == 1
    assert "(--strict)" in result.output


def test_typed_constant_and_allow_comment_are_clean(make_project, sources, cli):
    clean = sources.unary_op(
        "lint_ok", "out[i] = x[i] * numba.float32(2.5)", reference="lambda x: x * 2.5"
    ).replace("import torch\n", "import numba\nimport torch\n")
    allowed = sources.unary_op(
        "lint_allow", "out[i] = x[i] * 2.5  # portkit: allow-float64", reference="lambda x: x * 2.5"
    )
    root = make_project({"lint_ok": (clean, None), "lint_allow": (allowed, None)})
    result = cli(root, "lint", "--strict", "--json", "--no-resources")
    findings = json.loads(result.output)["findings"]
    assert [f for f in findings if f["kind"] == "float64"] == []
    assert result.exit_code == 0, result.output


def test_compile_error_is_an_error(make_project, sources, cli):
    # Valid Python for the simulator, but numba cannot type a dict on the GPU.
    py = sources.unary_op("lint_bad", "d = {}\nout[i] = x[i]", reference="lambda x: x")
    root = make_project({"lint_bad": (py, None)})
    result = cli(root, "lint", "lint_bad", "--no-resources")
    assert result.exit_code == 1
    assert "error" in result.output and "lint_bad_fwd" in result.output


def test_launch_that_cannot_fill_an_h100_is_a_warning(make_project, sources, load_op):
    from portkit.lint.findings import launch_fill_findings

    # One block for the whole tensor: the large case runs on a single SM.
    py = sources.unary_op(
        "lint_fill",
        "for j in range(i, n, 32):\n        out[j] = x[j]",
        reference="lambda x: x.clone()",
        cases="portkit.cases.elementwise(sizes=(1,), large=1 << 16, special=())",
        grid="1",
    )
    root = make_project({"lint_fill": (py, None)})
    _, op = load_op(root, "lint_fill")
    findings = launch_fill_findings(op)
    assert len(findings) == 1
    assert "launches 1 block(s)" in findings[0].message and "132 SMs" in findings[0].message


def test_resource_table_has_prototype_and_twin(float64_op, cli):
    root, _ = float64_op
    result = cli(root, "lint", "lint_lit", "--json")
    rows = json.loads(result.output)["resources"]
    sides = {(r["kernel"], r["dtype"], r["side"]) for r in rows}
    for dtype in ("float32", "float64"):
        assert ("lint_lit_fwd", dtype, "prototype") in sides
        assert ("lint_lit_fwd", dtype, "twin") in sides
    proto32 = next(r for r in rows if r["side"] == "prototype" and r["dtype"] == "float32")
    twin32 = next(r for r in rows if r["side"] == "twin" and r["dtype"] == "float32")
    assert proto32["usage"]["f64_instructions"] > 0  # the literal promotes
    assert twin32["usage"]["f64_instructions"] == 0
    assert proto32["usage"]["registers"] > 0 and twin32["usage"]["registers"] > 0


def test_check_includes_a_lint_row(float64_op, cli):
    root, _ = float64_op
    result = cli(root, "check", "lint_lit", "--backend", "torch", "-v")
    assert result.exit_code == 1, result.output  # the lint row fails on the error
    assert "lint" in result.output and "1 error(s), 0 warning(s)" in result.output
