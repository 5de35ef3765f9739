"""A launcher that raises on the op's own cases is the author's mistake: every command says
what it raised and on which line of the prototype, with no traceback. ``portkit check``
makes it the op's red rows (compile, signature, each case) and goes on; ``lint`` an error
finding (exit 1). ``k.sm_count`` (a newcomer's guess for ``portkit.sm_count(k)``,
2026-11-27) names the function to call."""

from __future__ import annotations

import json

import pytest

GRID = "min(portkit.cdiv(n, THREADS), 8 * k.sm_count)"  # the mistake: sm_count is not on k


@pytest.fixture
def wrong_grid(make_project, sources):
    root = make_project(
        {
            "wrong_grid": (
                sources.unary_op("wrong_grid", grid=GRID),
                sources.unary_twin("wrong_grid"),
            )
        }
    )
    prototype = root / "prototypes" / "wrong_grid.py"
    line = next(n for n, text in enumerate(prototype.read_text().splitlines(), 1) if GRID in text)
    return root, f"{prototype}:{line}"


def _rows(result) -> list[dict]:
    return json.loads(result.output[result.output.index('{\n "results"') :])["results"]


def test_check_makes_a_raising_launcher_the_op_s_red_rows_naming_its_line(wrong_grid, cli):
    root, where = wrong_grid
    result = cli(root, "check", "wrong_grid", "--json")
    assert result.exit_code == 1, result.output
    failed = {(r["backend"], r["check"]): r for r in _rows(result) if r["status"] == "fail"}
    compile_row = failed[("numba", "compile sm_90")]
    assert "its forward launcher raised AttributeError" in compile_row["detail"]
    assert f"(at {where})" in compile_row["detail"]
    assert "call portkit.sm_count(k)" in compile_row["detail"]
    assert ("twin", "signature") in failed
    forward = failed[("sim", "forward")]
    assert f"(at {where})" in forward["detail"]  # the author's line, not portkit's internals
    assert forward["site"]["line"] == int(where.rsplit(":", 1)[1])


def test_lint_makes_a_raising_launcher_an_error_finding(wrong_grid, cli):
    root, where = wrong_grid
    result = cli(root, "lint", "wrong_grid", "--json")
    assert result.exit_code == 1, result.output
    text = result.output
    assert "its forward launcher raised AttributeError" in text
    assert "wrong_grid.py:" in text and "Traceback" not in text


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("sm_count", "portkit.sm_count(k)"),
        ("cdiv", "portkit.cdiv(a, b)"),
        ("knobs", "portkit.knobs(k, x)"),
    ],
)
def test_a_portkit_helper_asked_of_k_names_the_function(name, hint):
    from portkit.runtime.kernels_protocol import no_kernel_message

    message = no_kernel_message("op1", name, ["op1_fwd"])
    assert message.endswith(f"{name} is not on k: call {hint}")
    assert no_kernel_message("op1", "op1_bwd", ["op1_fwd"]) == (
        "op op1 has no kernel 'op1_bwd'; kernels: op1_fwd"
    )


def test_a_forward_that_returns_only_its_output_is_named_as_the_contract_says(
    make_project, sources, cli
):
    prototype = sources.unary_op("one_return").replace("return out, (x,)", "return out")
    assert "return out\n" in prototype
    root = make_project({"one_return": (prototype, sources.unary_twin("one_return"))})
    result = cli(root, "check", "one_return")
    assert result.exit_code == 2, result.output
    assert "op one_return: forward must return (outputs, saved_for_backward)" in result.output
    assert "unpack" not in result.output


def test_export_says_a_raising_launcher_in_one_line_and_writes_nothing(wrong_grid, cli, tmp_path):
    root, where = wrong_grid
    out = tmp_path / "package"
    result = cli(root, "export", "wrong_grid", "--out", str(out))
    assert result.exit_code == 2, result.output
    assert "error: op wrong_grid: its forward launcher raised AttributeError" in result.output
    assert f"(at {where})" in result.output
    assert not out.exists()


def test_diff_names_the_prototype_s_line(wrong_grid, cli):
    root, where = wrong_grid
    result = cli(root, "diff", "wrong_grid")
    assert result.exit_code == 1, result.output
    assert f"(at {where})" in " ".join(result.output.split())
