"""Which (op, case) pairs a check runs: all of them, the named ones, or all but the
GPU-sized ones (`portkit check --quick`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from portkit.checking.harness import plan_suite
from portkit.errors import PortkitError
from portkit.project.cases import Case


def _op() -> SimpleNamespace:
    cases = (
        Case("float32-n129", ((129,),), "float32"),
        Case("float32-n16777216", ((1 << 24,),), "float32", large=True),
    )
    return SimpleNamespace(name="double", definition=SimpleNamespace(cases=cases))


def test_every_case_by_default_and_no_large_one_when_quick() -> None:
    op = _op()
    assert [c.name for _, c in plan_suite([op], set())] == ["float32-n129", "float32-n16777216"]
    assert [c.name for _, c in plan_suite([op], set(), skip_large=True)] == ["float32-n129"]


def test_a_named_large_case_runs_even_when_quick() -> None:
    plan = plan_suite([_op()], {"float32-n16777216"}, skip_large=True)
    assert [c.name for _, c in plan] == ["float32-n16777216"]


def test_an_unknown_case_name_is_an_error_naming_the_known_ones() -> None:
    with pytest.raises(PortkitError, match="no op has case"):
        plan_suite([_op()], {"nope"})
