"""A fused bias + GELU in bfloat16 end to end, written from the docs alone:
bfloat16 in and out, float32 inside, no declared tolerance. Summing the bias gradient in
bfloat16 instead of float32 (a rounding per row: 512 of them) fails the bias gradient,
named, in ULPs and multiples of torch's float32 error."""

from __future__ import annotations

import json

import pytest

from portkit.backends.twin_cpu.build import find_compiler
from tests.user_ops.op_files import sources

PROTOTYPE, TWIN = sources("bias_gelu")
CPU = ("--backend", "sim,torch,twin-cpu", "--no-compile", "--json")
needs_compiler = pytest.mark.skipif(find_compiler() is None, reason="no C++ compiler")
FLOAT32_SUM = "s += widen(dy[r * cols + c]) * gelu_grad(widen(x[r * cols + c]) + b);"
BFLOAT16_SUM = (
    "s = __bfloat162float(__float2bfloat16(s + widen(dy[r * cols + c]) * "
    "gelu_grad(widen(x[r * cols + c]) + b)));"
)


def test_the_op_is_bfloat16_only_and_declares_no_tolerance(load_op, make_project):
    _, op = load_op(make_project({"bias_gelu": (PROTOTYPE, None)}), "bias_gelu")
    assert not op.definition.tolerances
    assert {c.dtype for c in op.definition.cases} == {"bfloat16"}


@needs_compiler
def test_bias_gelu_passes_in_bfloat16_on_the_cpu_backends(make_project, cli):
    root = make_project({"bias_gelu": (PROTOTYPE, TWIN)})
    result = cli(root, "check", "bias_gelu", *CPU)
    rows = json.loads(result.stdout)["results"]
    assert result.exit_code == 0, [r for r in rows if r["status"] == "fail"]
    ran = {(r["case"], r["backend"], r["check"]) for r in rows if r["status"] == "pass"}
    for backend in ("sim", "twin-cpu"):
        assert {
            ("bfloat16-512x40", backend, "forward"),
            ("bfloat16-512x40", backend, "backward"),
        } <= ran
        assert ("bfloat16-special", backend, "forward") in ran


@needs_compiler
def test_a_bias_gradient_summed_in_bfloat16_fails(make_project, cli):
    rounded = TWIN.replace(FLOAT32_SUM, BFLOAT16_SUM)
    assert rounded != TWIN
    root = make_project({"bias_gelu": (PROTOTYPE, rounded)})
    result = cli(root, "check", "bias_gelu", *CPU, "--case", "bfloat16-512x40")
    rows = json.loads(result.stdout)["results"]
    assert result.exit_code == 1, rows
    failed = [r for r in rows if r["status"] == "fail"]
    assert {(r["backend"], r["check"]) for r in failed} == {
        ("twin-cpu", "backward"),
        ("sim", "vs twin-cpu"),
    }
    backward = next(r for r in failed if r["check"] == "backward")
    assert "grad of input 1 (bias)" in backward["detail"]
    assert "torch's float32 error" in backward["detail"]


@pytest.mark.compile
def test_bias_gelu_passes_check(check_op):
    result, rows = check_op("bias_gelu")
    assert result.exit_code == 0, [r for r in rows if r["status"] == "fail"]
