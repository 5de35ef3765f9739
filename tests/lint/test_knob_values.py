"""A declared knob value whose launches a GPU would refuse (threads=2048) runs only when a
tuned table picks it, so a CPU check never launched it: lint traces each value (the other
knobs at their defaults) and makes the refusal an error, which `check`'s lint row shows.
Found writing an op from the README (2026-11-27): `check` was green with such a value."""

from __future__ import annotations

import pytest

BLOCK = "portkit.knobs(k, x).threads"


def _op(sources, name: str, threads: str) -> tuple[str, str]:
    prototype = sources.unary_op(name, block=BLOCK, op_options=f'knobs={{"threads": {threads}}}')
    return prototype, sources.unary_twin(name)


@pytest.fixture
def knob_project(make_project, sources):
    return make_project(
        {
            "too_wide": _op(sources, "too_wide", "[32, 2048]"),
            "within": _op(sources, "within", "[32, 64]"),
        }
    )


def test_lint_says_which_knob_value_a_gpu_would_refuse(knob_project, cli):
    result = cli(knob_project, "lint", "too_wide")
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())  # the table wraps its cells
    assert "knob threads=2048 (the others at their defaults)" in text
    assert "asks for 2048 threads per block; a GPU allows at most 1024" in text


def test_values_within_the_limits_are_no_finding(knob_project):
    from portkit.lint.findings import knob_value_findings
    from portkit.project.session import Session

    session = Session.from_environment(knob_project, require=False)
    assert knob_value_findings(session.op("within")) == []
    (finding,) = knob_value_findings(session.op("too_wide"))
    assert finding.severity.name == "ERROR" and "drop 2048" in finding.fix


def test_check_fails_the_lint_row_and_runs_the_rest(knob_project, cli):
    result = cli(knob_project, "check", "too_wide", "--backend", "sim")
    assert result.exit_code == 1, result.output
    assert "FAIL too_wide / numba / lint / all" in result.output
    assert "knob threads=2048" in result.output
