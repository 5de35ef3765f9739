"""An attention-style masked, scaled row softmax written from the docs alone:
float32, float16 and bfloat16, forward and backward, a boolean mask made by the case
(causal or random with the diagonal kept). It passes on the measured control with no
declared tolerance; a twin that ignores the mask or drops the scale from the backward
fails, naming the check."""

from __future__ import annotations

import json

import pytest

from portkit.backends.twin_cpu.build import find_compiler
from tests.user_ops.op_files import sources

PROTOTYPE, TWIN = sources("masked_softmax")
CPU = ("--backend", "sim,torch,twin-cpu", "--no-compile", "--json")
needs_compiler = pytest.mark.skipif(find_compiler() is None, reason="no C++ compiler")


def failed_checks(make_project, cli, twin: str, case: str) -> set[tuple[str, str]]:
    root = make_project({"masked_softmax": (PROTOTYPE, twin)})
    result = cli(root, "check", "masked_softmax", *CPU, "--case", case)
    rows = json.loads(result.stdout)["results"]
    assert result.exit_code == 1, rows
    return {(r["backend"], r["check"]) for r in rows if r["status"] == "fail"}


def test_the_op_declares_no_tolerance(load_op, make_project):
    _, op = load_op(make_project({"masked_softmax": (PROTOTYPE, None)}), "masked_softmax")
    assert not op.definition.tolerances
    assert {c.dtype for c in op.definition.cases} == {"float32", "float16", "bfloat16"}


@needs_compiler
def test_masked_softmax_passes_on_the_cpu_backends(make_project, cli):
    root = make_project({"masked_softmax": (PROTOTYPE, TWIN)})
    result = cli(root, "check", "masked_softmax", *CPU)
    rows = json.loads(result.stdout)["results"]
    assert result.exit_code == 0, [r for r in rows if r["status"] == "fail"]
    ran = {(r["case"], r["backend"], r["check"]) for r in rows if r["status"] == "pass"}
    for case in ("float32-causal", "float16-padded", "bfloat16-causal"):
        for backend in ("sim", "twin-cpu"):
            assert {(case, backend, "forward"), (case, backend, "backward")} <= ran
    half_grads = [
        r for r in rows if r["check"] == "backward" and not r["case"].startswith("float32")
    ]
    assert half_grads and all(0 <= r["margin"] < 1 for r in half_grads)


@needs_compiler
def test_a_twin_that_ignores_the_mask_fails(make_project, cli):
    unmasked = TWIN.replace("if (mr[c]) s += ", "s += ")
    assert unmasked != TWIN
    failed = failed_checks(make_project, cli, unmasked, "float32-causal")
    assert ("twin-cpu", "forward") in failed


@needs_compiler
def test_a_backward_without_the_scale_fails_in_bfloat16(make_project, cli):
    unscaled = TWIN.replace("g = sc * expf(", "g = expf(")
    assert unscaled != TWIN
    failed = failed_checks(make_project, cli, unscaled, "bfloat16-padded")
    assert ("twin-cpu", "backward") in failed
    assert ("twin-cpu", "forward") not in failed


@pytest.mark.compile
def test_masked_softmax_passes_check(check_op):
    result, rows = check_op("masked_softmax")
    assert result.exit_code == 0, [r for r in rows if r["status"] == "fail"]


def test_a_backward_that_forgets_the_scalars_gradient_says_they_count(make_project, cli):
    """A newcomer's first try returned (dx, None) for forward(k, x, mask, scale): the
    message now says that the op-level scalar counts as an input."""
    forgetful = PROTOTYPE.replace("return dx, None, None", "return dx, None")
    assert forgetful != PROTOTYPE
    root = make_project({"masked_softmax": (forgetful, None)})
    result = cli(
        root, "check", "masked_softmax", "--backend", "sim", "--case", "float32-causal", "--json"
    )
    rows = json.loads(result.stdout)["results"]
    assert result.exit_code == 1
    (failed,) = [r for r in rows if r["status"] == "fail"]
    assert "backward returned 2 gradient(s), expected 3" in failed["detail"]
    assert "scalars after the tensors, a case's extra=, count as inputs" in failed["detail"]
