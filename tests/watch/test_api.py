"""``portkit.check``/``sim``/``diff``: result objects, rendering, and a call after an
edit seeing the edit."""

from __future__ import annotations

import pytest

import portkit
from portkit.api.sessions import forget
from portkit.errors import OpDefinitionError, OpNotFound
from portkit.results import Outcome
from tests.watch.conftest import edit


@pytest.fixture(autouse=True)
def fresh_api_sessions():
    forget()
    yield
    forget()


def test_check_returns_rows_problems_and_prints_the_check_table(watched):
    root = watched("api_check")
    report = portkit.check("api_check", backends="sim,twin-cpu")
    assert report.passed and report.failed == [] and report.mismatches == report.faults == []
    assert {(r.backend, r.check) for r in report.results} >= {
        ("sim", "forward"),
        ("twin-cpu", "forward"),
        ("sim", "vs twin-cpu"),
    }
    text = str(report)
    assert "portkit check" in text and "implementation" in text and "twin-cpu" in text
    assert "0 failed" in text
    html = report._repr_html_()
    assert html.lstrip().startswith("<!DOCTYPE html>") and "twin-cpu" in html

    edit(root / "cuda_src" / "api_check.cu", "x[i] * T(2)", "x[i] * T(3)")
    again = portkit.check("api_check", backends=["sim", "twin-cpu"])
    assert not again.passed
    assert {(r.backend, r.check) for r in again.failed} == {
        ("twin-cpu", "forward"),
        ("sim", "vs twin-cpu"),
    }
    assert {p.backend for p in again.mismatches} == {"twin-cpu", "sim"}
    assert "FAIL api_check / twin-cpu / forward" in str(again)


def test_sim_sees_an_edit_and_reports_a_fault_as_data(watched):
    root = watched("api_sim")
    assert portkit.sim("api_sim").passed
    edit(root / "prototypes" / "api_sim.py", "if i < n:", "if i <= n:")
    report = portkit.sim("api_sim")
    assert [r.status for r in report.results] == [Outcome.FAIL]
    (fault,) = report.faults
    assert (fault.kernel, fault.block, fault.thread) == ("api_sim_fwd", (4, 0, 0), (1, 0, 0))
    assert fault.where.endswith("api_sim.py:15")
    assert "out-of-bounds" in str(report)


def test_diff_names_the_writer_of_the_first_mismatch(watched):
    root = watched("api_diff")
    assert portkit.diff("api_diff").passed
    edit(root / "prototypes" / "api_diff.py", "x[i] * 2.0", "x[i] * 2.5")
    report = portkit.diff("api_diff")
    (mismatch,) = report.mismatches
    assert mismatch.kernel == "api_diff_fwd" and mismatch.thread == (0, 0, 0)
    assert mismatch.where.endswith("api_diff.py:15")
    assert "first mismatches" in str(report) and "<!DOCTYPE html>" in report._repr_html_()


def test_user_errors_raise_the_portkit_error(watched):
    root = watched("api_err")
    with pytest.raises(OpNotFound, match="unknown op 'nope'"):
        portkit.check("nope")
    edit(root / "prototypes" / "api_err.py", "x[i] * 2.0", "x[i] * (2.0")
    with pytest.raises(OpDefinitionError, match="line 15"):
        portkit.sim("api_err")


def test_one_session_per_project_is_reused(watched):
    from portkit.api.sessions import project_session

    root = watched("api_reuse")
    portkit.sim("api_reuse")
    session = project_session()
    op = session.op("api_reuse")
    portkit.sim("api_reuse")
    assert project_session(root / "prototypes") is session
    assert session.op("api_reuse") is op  # nothing changed: not imported again
