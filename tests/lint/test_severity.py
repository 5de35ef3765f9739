"""One severity model: an error (a change of results) fails `portkit lint`, the `lint` row
of `portkit check` and the pytest `::lint` item alike; a warning (a speed hint) fails none
of them unless `[tool.portkit] lint-warnings = "error"`. One finding per source line,
and float64 findings only where the PTX really computes in float64."""

from __future__ import annotations

import json

import pytest

from portkit.build.finding import Severity

from .test_lint import line_of

ACCUMULATE = """\
acc = 0.0
for j in range(3):
    acc += x[i]
out[i] = acc"""
# int64 index arithmetic inside a loop: a speed hint, nothing changes in the results.
INDEX_IN_LOOP = """\
for j in range(1):
    out[i + j] = x[i + j]"""
WARN_ONLY_TABLE = 'prototypes = "prototypes"\ncuda-src = "cuda_src"\ncache-dir = ".portkit-cache"\n'


@pytest.fixture
def accumulator_op(make_project, sources):
    py = sources.unary_op("sev_acc", ACCUMULATE, reference="lambda x: x * 3")
    twin = sources.unary_twin("sev_acc", "out[i] = x[i] * T(3);")
    return make_project({"sev_acc": (py, twin)}), py


def warning_project(make_project, sources, lint_warnings: str | None = None):
    py = sources.unary_op("sev_warn", INDEX_IN_LOOP, reference="lambda x: x.clone()")
    table = WARN_ONLY_TABLE + (f'lint-warnings = "{lint_warnings}"\n' if lint_warnings else "")
    twin = sources.unary_twin("sev_warn", "out[i] = x[i];")
    return make_project({"sev_warn": (py, twin)}, portkit_table=table)


def check_rows(cli, root, op: str) -> tuple[int, dict[str, dict]]:
    """`portkit check OP --backend torch --json`: the exit code and the rows by check."""
    result = cli(root, "check", op, "--backend", "torch", "--json")
    assert "Traceback" not in result.output
    report = json.loads(result.output[result.output.index('{\n "results"') :])
    return result.exit_code, {r["check"]: r for r in report["results"] if r["case"] == "all"}


def test_a_float64_accumulator_is_an_error_everywhere(accumulator_op, cli):
    root, py = accumulator_op
    result = cli(root, "lint", "sev_acc", "--json", "--no-resources")
    assert result.exit_code == 1, result.output
    (finding,) = [f for f in json.loads(result.output)["findings"] if f["kind"] == "float64"]
    assert finding["severity"] == "error"
    assert "float64 arithmetic in a float32 kernel" in finding["message"]
    assert finding["dtypes"] == ["float32"]

    assert finding["where"].endswith(f"sev_acc.py:{line_of(py, 'acc += x[i]')}")
    code, rows = check_rows(cli, root, "sev_acc")
    assert (code, rows["lint"]["status"]) == (1, "fail")
    assert finding["where"] in rows["lint"]["detail"]


def test_a_speed_warning_fails_nothing_unless_the_project_says_so(make_project, sources, cli):
    root = warning_project(make_project, sources)
    result = cli(root, "lint", "sev_warn", "--json", "--no-resources")
    assert result.exit_code == 0, result.output
    kinds = {(f["kind"], f["severity"]) for f in json.loads(result.output)["findings"]}
    assert kinds == {("int64-index", "warning")}
    code, rows = check_rows(cli, root, "sev_warn")
    assert (code, rows["lint"]["status"]) == (0, "pass")

    strict = warning_project(make_project, sources, "error")
    result = cli(strict, "lint", "sev_warn", "--no-resources")
    assert result.exit_code == 1, result.output
    assert '1 error(s), 1 warning(s) (lint-warnings = "error")' in result.output
    code, rows = check_rows(cli, strict, "sev_warn")
    assert (code, rows["lint"]["status"]) == (1, "fail")


def test_lint_warnings_must_be_warning_or_error(make_project, sources, cli):
    root = warning_project(make_project, sources, "fatal")
    result = cli(root, "lint", "--no-resources")
    assert result.exit_code == 2
    assert result.output.strip().endswith(
        '[tool.portkit] lint-warnings must be "warning" or "error", not \'fatal\''
    )
    assert "Traceback" not in result.output


def test_a_folded_float32_constant_is_no_finding(make_project, sources, load_op):
    from portkit.lint.findings import code_findings
    from portkit.lint.numba_ir import float64_findings

    body = "m = numba.float32(-math.inf)\nout[i] = max(x[i], m)"
    py = sources.unary_op("sev_inf", body, reference="lambda x: x.clamp(min=float('-inf'))")
    py = py.replace("import torch\n", "import numba\nimport torch\n")
    root = make_project({"sev_inf": (py, None)})
    _, op = load_op(root, "sev_inf")
    from portkit.build.compile_checks import signatures_by_dtype

    signature = signatures_by_dtype(op)["float32"]["sev_inf_fwd"]
    # numba's typed IR negates a float64 math.inf; the PTX has no float64 instruction
    assert float64_findings("sev_inf_fwd", op.kernels["sev_inf_fwd"], signature)
    assert [f for f in code_findings(op) if f.kind == "float64"] == []


def test_a_finding_in_several_dtypes_is_one_line_listing_them(make_project, sources, load_op):
    from portkit.lint.findings import code_findings

    cases = sources.SMALL_CASES.replace('dtypes=("float32",)', 'dtypes=("float32", "float64")')
    py = sources.unary_op("sev_dup", INDEX_IN_LOOP, reference="lambda x: x.clone()", cases=cases)
    root = make_project({"sev_dup": (py, None)})
    _, op = load_op(root, "sev_dup")
    (finding,) = code_findings(op)
    assert finding.severity is Severity.WARNING
    assert finding.dtypes == ("float32", "float64")
    line = line_of(py, "out[i + j] = x[i + j]")
    assert finding.line().startswith(f"{op.prototype_path}:{line} int64 index math in a loop")
    assert finding.line().endswith("[float32, float64]")


def test_pytest_lint_item_follows_the_same_model(tmp_path, make_project, sources):
    from tests.pytest_runs import pytest_runs_in
    from tests.test_plugin import outcomes, plugin_args

    acc = sources.unary_op("sev_pacc", ACCUMULATE, reference="lambda x: x * 3")
    warn = sources.unary_op("sev_pwarn", INDEX_IN_LOOP, reference="lambda x: x.clone()")
    default = make_project({"sev_pacc": (acc, None), "sev_pwarn": (warn, None)})
    table = WARN_ONLY_TABLE + 'lint-warnings = "error"\n'
    strict = make_project({"sev_pwarn": (warn, None)}, portkit_table=table)
    # both projects' suites in one fresh process (tests/pytest_runs.py), each from its folder
    args = [*plugin_args(), "prototypes", "-p", "no:cacheprovider", "--strict-markers", "-v"]
    first, second = pytest_runs_in(
        tmp_path,
        [*args, "-k", "lint"],
        [*args, "-k", "sev_pwarn and lint"],
        folders=[default, strict],
    )
    assert outcomes(first) == {"sev_pacc.py::lint": "FAILED", "sev_pwarn.py::lint": "PASSED"}
    assert outcomes(second) == {"sev_pwarn.py::lint": "FAILED"}
