"""The sanitizer's child (``python -m portkit.sanitize.child``) and its hand-off to the
parent, on the CPU: the results file and its format number, the child run on the
simulator in place of the GPU backends, its exit codes, and the parent refusing a file
of another format through ``portkit check --sanitize``."""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from portkit.results import CheckResult, Outcome
from portkit.sanitize import child, tools
from portkit.sanitize.handoff import FORMAT, HandoffError, read_results, write_results

PASS, FAIL, SKIP = Outcome.PASS, Outcome.FAIL, Outcome.SKIP
ROWS = [
    CheckResult("sigmoid", "float32-n129", "twin", "forward", PASS, "", 0.25),
    CheckResult("sigmoid", "float32-n129", "numba", "backward", FAIL, "2 of 129 differ", 0.5),
    CheckResult("sigmoid", "all", "numba", "compile", SKIP, "no GPU"),
]


def test_results_round_trip_through_a_versioned_file(tmp_path):
    path = tmp_path / "memcheck.results.json"
    write_results(path, ROWS)
    assert json.loads(path.read_text())["format"] == FORMAT == 1
    # JSON's own types: an Outcome as its string, a row's warnings tuple as a list
    assert read_results(path) == json.loads(json.dumps([asdict(r) for r in ROWS]))


def test_no_file_means_no_results(tmp_path):
    assert read_results(tmp_path / "never-written.json") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"format": 2, "results": []}', "in format 2; this portkit reads format 1"),
        ('{"results": []}', "in format None; this portkit reads format 1"),
        ("[1, 2]", "in format None; this portkit reads format 1"),
        ('{"format": 1, "resu', "the sanitizer child's results are not JSON"),
    ],
)
def test_a_file_of_another_format_is_refused(tmp_path, text, message):
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(HandoffError) as caught:
        read_results(path)
    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_prepare_checks_is_the_one_setup_for_running_under_a_tool(tmp_path):
    from portkit.backends import create
    from portkit.checking.harness import CheckSettings
    from portkit.project.config import load_config

    config = load_config(tmp_path)
    numba, twin, sim = (create(name, config) for name in ("numba", "twin", "sim"))
    settings = tools.prepare_checks("memcheck", [numba, twin, sim])
    assert settings == CheckSettings(guards=False, poison=True)
    # line info where the backend declares it can compile with it: numba alone
    assert (numba.lineinfo, twin.lineinfo, sim.lineinfo) == (True, False, False)
    assert tools.prepare_checks("initcheck", []) == CheckSettings(guards=False, poison=False)


@pytest.fixture
def run_child(make_project, sources, monkeypatch, capsys, tmp_path):
    """``run_child(op, *options, body=..., tool=..., ask=op)`` -> (exit code, stdout,
    stderr, results file) of the child in a project of one op, asked to check ``ask``,
    with portkit's simulator standing in for the GPU backends."""

    def run(op: str, *options: str, body="out[i] = x[i] * 2.0", tool="memcheck", ask=None):
        root = make_project({op: (sources.unary_op(op, body), None)})
        results = tmp_path / f"{tool}.results.json"
        monkeypatch.chdir(root)
        monkeypatch.setattr(child, "BACKENDS", ("sim",))
        code = child.main(["--tool", tool, "--results", str(results), *options, ask or op])
        out, err = capsys.readouterr()
        return code, out, err, results

    return run


def test_the_child_runs_the_harness_and_hands_back_its_results(run_child):
    code, out, _, results = run_child("double")
    assert code == 0, out
    rows = read_results(results)
    assert rows and {(r["op"], r["backend"]) for r in rows} == {("double", "sim")}
    passed = sum(r["status"] == PASS for r in rows)
    assert passed > 0 and not any(r["status"] == FAIL for r in rows)
    skipped = sum(r["status"] == SKIP for r in rows)
    assert out.splitlines()[-1] == f"{passed} passed, 0 failed, {skipped} skipped"


def test_the_child_exits_1_on_a_failed_check_and_names_it(run_child):
    body = "out[i] = x[i] * 3.0"  # the reference doubles
    code, out, _, results = run_child(
        "triple", "--case", "float32-n129", body=body, tool="racecheck"
    )
    assert code == child.EXIT_FAILED
    failed = [r for r in read_results(results) if r["status"] == FAIL]
    assert failed and all(r["case"] == "float32-n129" for r in failed)
    assert f"FAIL triple / sim / {failed[0]['check']} / float32-n129" in out


def test_a_mistake_in_the_child_is_one_line_and_exit_2(run_child):
    code, out, err, results = run_child("double", ask="nosuchop")
    assert code == child.EXIT_MISTAKE and out == ""
    assert err.startswith("error: ") and "nosuchop" in err and err.count("\n") == 1
    assert not results.exists()


# Stands in for compute-sanitizer and for a child of another portkit: writes a results
# file in a format this portkit does not read.
OTHER_FORMAT = """#!{python}
import json, sys
args = sys.argv[1:]
json.dump({{"format": 99, "results": []}}, open(args[args.index("--results") + 1], "w"))
open(args[args.index("--log-file") + 1], "w").write("========= ERROR SUMMARY: 0 errors\\n")
"""


def test_the_parent_refuses_results_of_another_format(
    make_project, sources, cli, monkeypatch, tmp_path
):
    fake = tmp_path / "bin" / "compute-sanitizer"
    fake.parent.mkdir()
    fake.write_text(OTHER_FORMAT.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(tools, "skip_reason", lambda has_gpu=None: None)
    root = make_project({"double": (sources.unary_op("double"), None)})
    logs = tmp_path / "logs"
    result = cli(root, "check", "double", "--sanitize", "memcheck", "--sanitize-log-dir", str(logs))
    assert result.exit_code == 2, result.output
    wanted = (
        f"error: {(logs / 'memcheck.results.json').resolve()}: the sanitizer child's results "
        f"are in format 99; this portkit reads format 1 (parent and child must be the same "
        f"portkit)"
    )
    assert wanted in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_the_child_module_is_the_one_its_command_names():
    command = child.child_command("memcheck", ["op"], [], Path("r.json"))
    assert command[1:3] == ["-m", child.__name__]
