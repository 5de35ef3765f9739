"""What a check row is, as fields set where the row is built: its stage (a compile row
is told by ``stage``, never by its label), where a failure happened (``site``) and how
many values differ (``mismatch``), in ``--json``, through the -j handoff file and back."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from portkit.results import CheckResult, FailureSite, Outcome, Stage, ValueMismatch


def rows_of(result) -> list[dict]:
    return json.loads(result.output[result.output.index('{\n "results"') :])["results"]


def one(rows: list[dict], backend: str, check: str) -> dict:
    (row,) = [r for r in rows if r["backend"] == backend and r["check"] == check]
    return row


BROKEN_TWIN_BODY = "out[i] = x[i] * T(2)"  # no ";": g++ stops at line 5, NVRTC at line 6


def test_a_compile_failure_row_and_a_run_failure_row_carry_their_stage(make_project, sources, cli):
    name = "rf_stage"
    prototype = sources.unary_op(name, "out[i] = x[i] * 2.5", cases=sources.ONE_CASE)
    root = make_project({name: (prototype, sources.unary_twin(name, BROKEN_TWIN_BODY))})
    twin = root / "cuda_src" / f"{name}.cu"

    # the case runner's compile row (twin-cpu, no compile checks first) and a run row
    result = cli(root, "check", name, "--backend", "sim,twin-cpu", "--no-compile", "--json")
    assert result.exit_code == 1, result.output
    rows = rows_of(result)
    compiled = one(rows, "twin-cpu", "compile")
    assert compiled["status"] == "fail" and compiled["stage"] == "compile"
    assert compiled["site"]["line"] == 5 and Path(compiled["site"]["file"]).name == twin.name
    assert compiled["mismatch"] is None
    forward = one(rows, "sim", "forward")
    assert forward["status"] == "fail" and forward["stage"] == "run"
    assert forward["mismatch"] == {"tensor": "output 0", "mismatched": 129, "total": 129}
    assert forward["site"] is None  # values differ; no kernel raised

    # the compile checks' rows: NVRTC's twin build and numba's PTX build
    result = cli(root, "check", name, "--backend", "sim", "--json")
    assert result.exit_code == 1, result.output
    rows = rows_of(result)
    nvrtc = one(rows, "twin", "compile sm_90")
    assert nvrtc["status"] == "fail" and nvrtc["stage"] == "compile"
    assert nvrtc["site"]["line"] == 6 and Path(nvrtc["site"]["file"]).name == twin.name
    ptx = one(rows, "numba", "compile sm_90")
    assert ptx["status"] == "pass" and ptx["stage"] == "compile" and ptx["site"] is None
    assert one(rows, "sim", "forward")["stage"] == "run"


def test_a_simulator_out_of_bounds_fault_carries_kernel_block_thread_and_line(
    make_project, sources, cli
):
    name = "rf_oob"
    root = make_project(
        {name: (sources.unary_op(name, bound="i <= n", cases=sources.ONE_CASE), None)}
    )
    backends = "sim,numba-sim"
    result = cli(root, "check", name, "--backend", backends, "--json")
    assert result.exit_code == 1, result.output
    lint = one(rows_of(result), "numba", "lint")  # read without running: static
    assert (
        lint["stage"] == "static"
        and one(rows_of(result), "numba", "compile sm_90")["stage"] == "compile"
    )
    prototype = str(root / "prototypes" / f"{name}.py")
    for backend in backends.split(","):
        row = one(rows_of(result), backend, "forward")
        assert row["status"] == "fail" and row["stage"] == "run" and row["mismatch"] is None
        # thread 129 = block 4 (of 32 threads), thread 1: reads x[129], line 15
        site = {"kernel": f"{name}_fwd", "block": [4, 0, 0], "thread": [1, 0, 0]}
        assert row["site"] == {**site, "file": prototype, "line": 15}, backend
        back = CheckResult.from_dict(row)  # what the -j handoff and the verdict store do
        assert back.site == FailureSite(f"{name}_fwd", (4, 0, 0), (1, 0, 0), prototype, 15)
        assert back.site.where == f"{prototype}:15"


def test_a_kernel_that_raises_in_the_simulator_carries_its_thread_and_line(
    make_project, sources, cli
):
    """The kernel's own exception is re-raised as its type and a SimulationFault at once
    (simt/kernel_exceptions.py): it keeps the site of the thread that raised it."""
    name = "rf_kraise"
    body = "if i == 37:\n    raise ValueError('no 37')\nout[i] = x[i] * 2.0"
    root = make_project({name: (sources.unary_op(name, body, cases=sources.ONE_CASE), None)})
    result = cli(root, "check", name, "--backend", "sim", "--no-compile", "--json")
    assert result.exit_code == 1, result.output
    row = one(rows_of(result), "sim", "forward")
    assert "raised ValueError: no 37" in row["detail"]
    path = str(root / "prototypes" / f"{name}.py")
    line = (root / "prototypes" / f"{name}.py").read_text().splitlines().index(
        "            raise ValueError('no 37')"
    ) + 1
    assert row["site"] == {
        "kernel": f"{name}_fwd", "block": [1, 0, 0], "thread": [5, 0, 0], "file": path, "line": line
    }  # fmt: skip


def test_a_launcher_that_raises_carries_its_line(make_project, sources, cli):
    name = "rf_raise"
    prototype = sources.unary_op(name, cases=sources.ONE_CASE).replace(
        "        out = k.empty_like(x)\n", "        out = k.empty_like(x)\n        [][0]\n"
    )
    root = make_project({name: (prototype, None)})
    result = cli(root, "check", name, "--backend", "sim", "--no-compile", "--json")
    assert result.exit_code == 1, result.output
    row = one(rows_of(result), "sim", "forward")
    path = root / "prototypes" / f"{name}.py"
    line = path.read_text().splitlines().index("        [][0]") + 1
    assert row["site"] == {
        "kernel": None, "block": None, "thread": None, "file": str(path), "line": line
    }  # fmt: skip


def test_rows_with_their_fields_survive_the_worker_handoff(tmp_path):
    from portkit.checking.parallel.handoff import FORMAT, HandoffError, OpRun, read_run, write_run

    site = FailureSite("k_fwd", (4, 0, 0), (1, 0, 0), "/p/k.py", 15)
    rows = [
        CheckResult("k", "all", "twin", "compile sm_90", Outcome.FAIL, "x", stage=Stage.COMPILE),
        CheckResult("k", "all", "numba", "lint", Outcome.PASS, stage=Stage.STATIC),
        CheckResult("k", "n1", "sim", "forward", Outcome.FAIL, "oob", site=site),
        CheckResult(
            "k", "n1", "sim", "backward", Outcome.FAIL, "differ",
            mismatch=ValueMismatch("grad x", 3, 129),
        ),
    ]  # fmt: skip
    path = tmp_path / "k.json"
    write_run(path, OpRun("k", rows))
    assert read_run(path).results == rows
    assert FORMAT == 3
    older = json.loads(path.read_text()) | {"format": 2}  # rows without a stage
    path.write_text(json.dumps(older))
    with pytest.raises(HandoffError, match="format 2; this portkit reads format 3"):
        read_run(path)


def test_a_row_read_back_needs_its_stage():
    row = asdict(CheckResult("k", "c", "sim", "forward", Outcome.PASS))
    assert row["stage"] == Stage.RUN and json.loads(json.dumps(row))["stage"] == "run"
    del row["stage"]
    with pytest.raises(KeyError):  # a row of an older file is not guessed from its label
        CheckResult.from_dict(row)


@pytest.mark.parametrize(
    ("log", "where"),
    [
        ('/p/cuda_src/a.cu(6): error: expected a ";"\n      }\n', "/p/cuda_src/a.cu:6"),
        ("/p/a.cu: In function 'void f()':\n/p/a.cu:5:29: error: expected ';'\n", "/p/a.cu:5"),
        ("a.cu:3:1: warning: unused\na.cu:9:2: fatal error: x.h: No such file\n", "a.cu:9"),
        ("nvrtc: something went wrong\n", None),
    ],
)
def test_a_compilers_first_error_is_read_where_it_is_raised(log, where):
    from portkit.backends.compiler_log import first_error_site

    site = first_error_site(log)
    assert (site.where if site else None) == where
