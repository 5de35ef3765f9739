"""One outcome vocabulary for check, bench and watch, and check labels parsed one way."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from portkit.results import Outcome, compile_check

PORTKIT = Path(__file__).resolve().parents[1] / "portkit"


def test_the_values_are_what_json_writes_and_failures_shout():
    assert [o.value for o in Outcome] == ["pass", "fail", "skip", "error", "running"]
    assert Outcome("error") is Outcome.ERROR and f"{Outcome.SKIP}" == "skip"
    assert Outcome.FAIL.label == "FAIL" and Outcome.PASS.label == "pass"
    assert {o for o in Outcome if o.bad} == {Outcome.FAIL, Outcome.ERROR}


def test_a_rows_stage_is_a_field_and_its_value_is_what_json_writes():
    """Which step made a row is declared where the row is built (results.Stage); the
    compile label is for people and no reader parses it (tests/test_row_fields.py)."""
    import portkit.results
    from portkit.results import CheckResult, Stage

    assert [s.value for s in Stage] == ["compile", "static", "run"]
    assert compile_check() == "compile" and compile_check("sm_100") == "compile sm_100"
    assert CheckResult("op", "c", "sim", "forward", Outcome.PASS).stage is Stage.RUN
    row = CheckResult(
        "op", "all", "twin", compile_check("sm_90"), Outcome.FAIL, stage=Stage.COMPILE
    )
    assert row.stage is Stage.COMPILE and f"{row.stage}" == "compile"
    assert "is_compile_check" not in vars(portkit.results)  # no label parser is left


def _string_comparisons(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Constant) and isinstance(side.value, str):
                    yield node, side.value
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("startswith", "endswith") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    yield node, arg.value


def test_no_module_parses_a_check_label_or_an_outcome_by_its_spelling():
    """``== "compile"``, ``.startswith("compile")``, ``status == "FAIL"``: the spellings
    that drifted apart. A row's stage is its ``stage`` field, statuses are Outcome."""
    words = {"compile", "compile ", "pass", "fail", "FAIL", "skip", "error", "running", "ok"}
    found = []
    for path in sorted(PORTKIT.rglob("*.py")):
        if path.name == "results.py":
            continue
        for node, value in _string_comparisons(ast.parse(path.read_text())):
            text = ast.unparse(node)
            if value in words and ("status" in text or "check" in text):
                found.append(f"{path.relative_to(PORTKIT.parent)}:{node.lineno}: {text}")
    assert not found, "\n".join(found)


def test_a_row_carries_its_configuration_and_comparison_as_fields():
    """What a row is comes from its fields; its labels are made from them and printed as
    before. A backend whose own name has " (" in it stays itself (splitting the label at
    " (" once made "my (fork)" a backend called "my")."""
    from portkit.results import CheckResult, comparison_check, configured

    backend = configured("my (fork)", "threads=64")
    assert backend == "my (fork) (threads=64)"
    row = CheckResult("op", "c", backend, "forward", Outcome.PASS, configuration="threads=64")
    assert row.base_backend == "my (fork)" and not row.is_comparison
    plain = CheckResult("op", "c", "my (fork)", "forward", Outcome.PASS)
    assert plain.base_backend == "my (fork)" and plain.configuration is None
    check = comparison_check("twin", "defaults")
    assert check == "vs twin (defaults)" and comparison_check("twin") == "vs twin"
    vs = CheckResult(
        "op", "c", "sim (defaults)", check, Outcome.PASS,
        configuration="defaults", compared_with="twin",
    )  # fmt: skip
    assert vs.is_comparison and vs.compared_with == "twin" and vs.base_backend == "sim"


@pytest.mark.parametrize(
    ("backend", "check", "configuration", "compared_with"),
    [
        ("twin", "forward", "threads=64", None),  # the label lacks the configuration
        (" (threads=64)", "forward", "threads=64", None),  # no backend before it
        ("sim (defaults)", "vs twin", "defaults", "twin"),  # the check lacks it
        ("sim", "forward", None, "twin"),  # a comparison row must say so in its check
    ],
)
def test_a_row_whose_labels_disagree_with_its_fields_is_refused(
    backend, check, configuration, compared_with
):
    from portkit.results import CheckResult

    with pytest.raises(ValueError):
        CheckResult(
            "op", "c", backend, check, Outcome.PASS,
            configuration=configuration, compared_with=compared_with,
        )  # fmt: skip
