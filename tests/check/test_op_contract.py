"""The op contract's declarations, end to end in a throwaway project: float inputs
without a gradient (rotary embedding's cos/sin tables), tolerances with a reason, the
gradcheck row of an op whose cases ask for none."""

from __future__ import annotations

import json

import pytest

from portkit.errors import OpDefinitionError

ROTARY = """\
import torch
from numba import cuda

import portkit

THREADS = 32


@cuda.jit
def rot_fwd(x, cos, sin, out, rows, half):
    i = cuda.grid(1)
    if i < rows * half:
        r, c = i // half, i % half
        a, b = x[r, c], x[r, c + half]
        out[r, c] = a * cos[r, c] - b * sin[r, c]
        out[r, c + half] = a * sin[r, c] + b * cos[r, c]


@cuda.jit
def rot_bwd(dy, cos, sin, dx, rows, half):
    i = cuda.grid(1)
    if i < rows * half:
        r, c = i // half, i % half
        da, db = dy[r, c], dy[r, c + half]
        dx[r, c] = da * cos[r, c] + db * sin[r, c]
        dx[r, c + half] = db * cos[r, c] - da * sin[r, c]


def reference(x, cos, sin):
    cos, sin = {tables}
    half = x.shape[1] // 2
    a, b = x[:, :half], x[:, half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=1)


CASES = [
    portkit.cases.custom("float32-3x8", [(3, 8), (3, 4), (3, 4)]),
    portkit.cases.custom("float64-gradcheck", [(2, 6), (2, 3), (2, 3)], "float64", gradcheck=True),
]


@portkit.op(reference=reference, cases=CASES, same_shape=False{options})
class Rotary:
    def forward(k, x, cos, sin):
        out = k.empty_like(x)
        rows, half = x.shape[0], x.shape[1] // 2
        k.rot_fwd[portkit.cdiv(rows * half, THREADS), THREADS](x, cos, sin, out, rows, half)
        return out, (cos, sin)

    def backward(k, saved, dy):
        cos, sin = saved
        dx = k.empty_like(dy)
        rows, half = dy.shape[0], dy.shape[1] // 2
        k.rot_bwd[portkit.cdiv(rows * half, THREADS), THREADS](dy, cos, sin, dx, rows, half)
        return dx, {cos_grad}, None
"""


def rotary(
    options: str = ', no_grad=("cos", "sin")', cos_grad: str = "None", tables: str = "cos, sin"
) -> str:
    return ROTARY.format(options=options, cos_grad=cos_grad, tables=tables)


def check_json(cli, root, *args):
    result = cli(root, "check", *args, "--backend", "sim", "--no-compile", "--json")
    report = json.loads(result.output[result.output.index('{\n "results"') :])
    return result, report["results"]


@pytest.mark.parametrize(
    ("options", "cos_grad", "why"),
    [
        (', no_grad=("cos", "sin")', "None", "declared no_grad"),
        (", no_grad=(1, 2)", "k.empty_like(cos)", "declared no_grad"),  # whatever it returns
        # inferred from the backward, where the reference gives the tables no gradient
        # either (where it does, a None is a forgotten gradient: tests/cli/test_mistakes.py)
        ("", "None", "its backward returns None"),
    ],
)
def test_rotary_tables_carry_no_gradient(make_project, cli, options, cos_grad, why):
    tables = "cos, sin" if options else "cos.detach(), sin.detach()"
    root = make_project({"rotary": (rotary(options, cos_grad, tables), None)})
    result, rows = check_json(cli, root, "rotary")
    assert result.exit_code == 0, result.output
    statuses = {(r["case"], r["check"]): r["status"] for r in rows}
    assert statuses == {
        ("float32-3x8", "forward"): "pass",
        ("float32-3x8", "backward"): "pass",
        ("float64-gradcheck", "forward"): "pass",
        ("float64-gradcheck", "backward"): "pass",
        ("float64-gradcheck", "gradcheck"): "pass",
    }
    (backward, *_) = [r for r in rows if r["check"] == "backward"]
    assert f"input 1 (cos): no gradient ({why})" in backward["detail"]
    assert f"input 2 (sin): no gradient ({why})" in backward["detail"]


def test_registered_rotary_returns_no_gradient_for_the_tables(make_project, load_op):
    import torch

    from portkit.backends import create
    from portkit.torch_op.load import registered_callable

    root = make_project({"rotary_reg": (rotary(cos_grad="k.empty_like(cos)"), None)})
    config, op = load_op(root, "rotary_reg")
    f = registered_callable(op, create("sim", config).kernels(op), "portkit_test_contract")
    x = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    cos, sin = (torch.randn(2, 3, dtype=torch.float64, requires_grad=True) for _ in "cs")
    for out in (f(x, cos, sin), f.op(x, cos, sin)):  # eager and the registered op
        grads = torch.autograd.grad(out.sum(), (x, cos, sin), allow_unused=True)
        assert grads[0] is not None and grads[1] is None and grads[2] is None


TOLERANT = dict(
    body="out[i] = x[i] * 3.0001",
    reference="lambda x: x * 3",
    cases='[portkit.cases.custom("float32-n129", [(129,)])]',
)


def test_declared_tolerance_passes_and_shows_its_reason(make_project, sources, cli):
    option = (
        'tolerances=[portkit.Tolerance(rtol=1e-3, atol=1e-5, output=0, against="reference", '
        'reason="scaled by an approximate constant")]'
    )
    root = make_project(
        {"approx": (sources.unary_op("approx", **TOLERANT, op_options=option), None)}
    )
    result, rows = check_json(cli, root, "approx")
    assert result.exit_code == 0, result.output
    (forward,) = [r for r in rows if r["check"] == "forward"]
    assert forward["status"] == "pass"
    assert forward["detail"] == (
        "output 0: rtol=0.001, atol=1e-05, declared: scaled by an approximate constant"
    )
    table = cli(root, "check", "approx", "--backend", "sim", "--no-compile")
    assert "declared: scaled by an approximate constant" in table.output


def test_without_the_tolerance_the_same_op_fails_naming_both_sides(make_project, sources, cli):
    root = make_project({"approx2": (sources.unary_op("approx2", **TOLERANT), None)})
    result, rows = check_json(cli, root, "approx2")
    assert result.exit_code == 1
    (forward,) = [r for r in rows if r["check"] == "forward"]
    # Without it, the measured control: x * 3.0001 is 360 ULP from the exact x * 3.
    assert "got (sim) vs expected (reference in float64)" in forward["detail"]
    assert "x torch's float32 error; bound 2x" in forward["detail"]


def test_a_tolerance_for_another_case_does_not_apply(make_project, sources, cli):
    option = (
        'bench=[portkit.cases.custom("big", [(4096,)])], '
        'tolerances=[portkit.Tolerance(rtol=1e-3, atol=0, case="big", reason="bench only")]'
    )
    root = make_project(
        {"approx3": (sources.unary_op("approx3", **TOLERANT, op_options=option), None)}
    )
    result, _ = check_json(cli, root, "approx3")
    assert result.exit_code == 1


def test_tolerance_without_reason_is_a_one_line_error(make_project, sources, cli):
    option = "tolerances=[portkit.Tolerance(rtol=1e-3, atol=1e-5)]"
    root = make_project({"noreason": (sources.unary_op("noreason", op_options=option), None)})
    result = cli(root, "check", "noreason", "--backend", "sim", "--no-compile")
    assert result.exit_code == 2
    assert 'portkit.Tolerance(rtol=0.001, atol=1e-05) needs reason="..."' in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(rtol=1e-3, atol=0, reason=" "), 'needs reason="..."'),
        (dict(rtol=-1, atol=0, reason="r"), "rtol must be a number >= 0"),
        (dict(rtol=1, atol=0, reason="r", against="numba"), "against is 'reference' or 'twin'"),
        (dict(rtol=1, atol=0, reason="r", output="dx"), "output='dx' names an input"),
        (dict(rtol=1, atol=0, reason="r", dtype="float8"), "dtype 'float8' is not one of"),
    ],
)
def test_tolerance_declarations_are_validated(kwargs, message):
    import portkit

    with pytest.raises(OpDefinitionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        portkit.Tolerance(**kwargs)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            'no_grad=("tables",)',
            "no_grad names input 'tables'; the forward's inputs are x, cos, sin",
        ),
        (
            'tolerances=portkit.Tolerance(rtol=1, atol=0, case="nope", reason="r")',
            "tolerance for case 'nope'",
        ),
        (
            'tolerances=portkit.Tolerance(rtol=1, atol=0, grad=True, output="w", reason="r")',
            "tolerance names input 'w'",
        ),
    ],
)
def test_op_declarations_name_real_inputs_and_cases(make_project, cli, options, message):
    root = make_project({"rotbad": (rotary(", " + options), None)})
    result = cli(root, "list")
    assert message in result.output
    assert "Traceback" not in result.output


def test_op_with_backward_and_no_gradcheck_case_gets_a_skip_row(make_project, sources, cli):
    py = sources.unary_op("nogc", backward="dx[i] = dy[i] * 2.0", cases=sources.ONE_CASE)
    root = make_project({"nogc": (py, None)})
    result, rows = check_json(cli, root, "nogc")
    (row,) = [r for r in rows if r["check"] == "gradcheck"]
    assert row["status"] == "skip" and row["case"] == "all"
    assert row["detail"].startswith("no gradcheck: no case is marked gradcheck=True")


def test_diff_uses_the_declared_tolerance_and_says_why(make_project, sources, load_op):
    from portkit.diffing.case_diff import diff_case, plan_diff

    option = 'tolerances=[portkit.Tolerance(rtol=1e-3, atol=1e-5, reason="approximate constant")]'
    root = make_project(
        {"approxd": (sources.unary_op("approxd", **TOLERANT, op_options=option), None)}
    )
    config, op = load_op(root, "approxd")
    plan = plan_diff(op, config, simulate=True)
    (tensor,) = diff_case(op, op.definition.cases[0], plan).tensors
    assert tensor.mismatches == 0
    assert tensor.tolerance.reason == "approximate constant"
