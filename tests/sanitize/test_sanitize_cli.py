"""`portkit check --sanitize` on the CPU: choices, the skip line and its exit code, and
the whole path through a stand-in compute-sanitizer that replays a sample log."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from portkit.cli.check import EXIT_SANITIZER_SKIPPED, SANITIZER_CHOICES
from portkit.sanitize import tools
from portkit.sanitize.child import child_command
from portkit.sanitize.tools import CHOICES, ERROR_EXITCODE, expand, sanitizer_command

LOGS = Path(__file__).resolve().parent / "logs"


def test_cli_choices_match_the_tools():
    assert SANITIZER_CHOICES == CHOICES


def test_unknown_tool_is_a_usage_error(make_project, sources, cli):
    root = make_project({"double": (sources.unary_op("double"), None)})
    result = cli(root, "check", "double", "--sanitize", "bogus")
    assert result.exit_code == 2
    assert "'bogus' is not one of" in result.output and "memcheck" in result.output


def test_sanitize_with_backend_is_a_usage_error(make_project, sources, cli):
    root = make_project({"double": (sources.unary_op("double"), None)})
    result = cli(root, "check", "double", "--sanitize", "memcheck", "--backend", "sim")
    assert result.exit_code == 2 and "drop --backend" in result.output


def test_expand_all_and_unknown():
    assert expand(["all"]) == ["memcheck", "racecheck", "initcheck", "synccheck"]
    assert expand(["racecheck", "all"])[0] == "racecheck"
    from portkit.errors import PortkitError

    with pytest.raises(PortkitError, match="unknown sanitizer tool 'x'"):
        expand(["x"])


def test_missing_sanitizer_is_a_skip_with_its_reason(make_project, sources, cli, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CUDA_HOME", "/nonexistent")
    monkeypatch.setattr(tools, "find_sanitizer", lambda: None)
    root = make_project({"double": (sources.unary_op("double"), None)})
    result = cli(root, "check", "double", "--sanitize", "all", "--json")
    assert result.exit_code == EXIT_SANITIZER_SKIPPED
    assert "SKIP sanitizer (memcheck, racecheck, initcheck, synccheck)" in result.output
    assert "compute-sanitizer was not found" in result.output


def test_no_gpu_is_a_skip_with_its_reason(monkeypatch):
    monkeypatch.setattr(tools, "find_sanitizer", lambda: Path("/bin/true"))
    assert tools.skip_reason(has_gpu=False) == "no CUDA GPU visible to PyTorch on this machine"
    assert tools.skip_reason(has_gpu=True) is None


def test_command_line_carries_the_settings(tmp_path):
    command = sanitizer_command(
        Path("/cuda/bin/compute-sanitizer"),
        "racecheck",
        tmp_path / "r.log",
        child_command("racecheck", ["softmax"], ["float32-3x127"], tmp_path / "r.json"),
    )
    text = " ".join(command)
    for setting in (
        "--tool racecheck",
        "--report-api-errors no",
        f"--error-exitcode {ERROR_EXITCODE}",
        "--print-limit 100",
        "--target-processes all",
        "--racecheck-report hazard",
        f"--log-file {tmp_path / 'r.log'}",
    ):
        assert setting in text
    # the child is sanitize's own entry point, never the CLI; results come back in a file
    assert command[-9:] == [
        "-m",
        "portkit.sanitize.child",
        "--tool",
        "racecheck",
        "--results",
        str(tmp_path / "r.json"),
        "--case",
        "float32-3x127",
        "softmax",
    ]


FAKE = """#!{python}
# A stand-in for compute-sanitizer: checks the settings, runs the child (the real
# `python -m portkit.sanitize.child ...`), then writes a sample log as the report.
import os, subprocess, sys
args = sys.argv[1:]
assert os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1"
log = args[args.index("--log-file") + 1]
child = args[args.index("--log-file") + 2:]
code = subprocess.run(child).returncode
open(log, "w").write(open({sample!r}).read())
sys.exit({exitcode} if code == 0 else code)
"""


def test_whole_path_with_a_stand_in_sanitizer(make_project, sources, cli, monkeypatch, tmp_path):
    fake = tmp_path / "bin" / "compute-sanitizer"
    fake.parent.mkdir()
    fake.write_text(
        FAKE.format(
            python=sys.executable, sample=str(LOGS / "memcheck_new.log"), exitcode=ERROR_EXITCODE
        )
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    # The repository first, then whatever the caller had (the GPU machine carries its
    # NumPy on PYTHONPATH: replacing it made the child's numba compiles fail there).
    path = [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in path if p))
    monkeypatch.setattr(tools, "skip_reason", lambda has_gpu=None: None)
    name = "wt_vector_add_bound_off_by_one"
    root = make_project({name: (sources.unary_op(name), None)})
    logs = tmp_path / "logs"
    result = cli(
        root, "check", name, "--sanitize", "memcheck", "--json", "--sanitize-log-dir", str(logs)
    )
    assert result.exit_code == 1, result.output
    report = json.loads(result.output[result.output.index("{") :])
    (run,) = report["sanitizer"]
    assert run["tool"] == "memcheck" and run["status"] == "errors"
    assert run["returncode"] == ERROR_EXITCODE
    twin = run["findings"][0]
    assert (twin["op"], twin["implementation"], twin["kernel"]) == (name, "twin", "vector_add")
    assert (twin["block"], twin["thread"], twin["line"]) == ("(0,0,0)", "(1,0,0)", 9)
    assert Path(run["log"]) == logs / "memcheck.log" and (logs / "memcheck.log").is_file()
    # the child ran portkit check with exact allocations: its output and results are kept
    assert "passed" in (logs / "memcheck.check.txt").read_text()
    assert run["results"] and {r["op"] for r in run["results"]} == {name}
    flat = " ".join(result.output.split())
    assert f"SANITIZER memcheck / {name} / twin / vector_add" in flat
    assert f"raw log {logs / 'memcheck.log'}" in flat


def test_pytest_option_skips_with_the_reason_without_a_sanitizer(make_project, sources, tmp_path):
    import subprocess

    root = make_project({"double": (sources.unary_op("double"), None)})
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = os.path.dirname(sys.executable)  # no compute-sanitizer on it
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    args = ["-m", "pytest", "-p", "no:cacheprovider", "prototypes"]  # plugin: entry point
    proc = subprocess.run(
        [sys.executable, *args, "--portkit-sanitize=racecheck"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if Path("/usr/local/cuda/bin/compute-sanitizer").is_file():
        pytest.skip("this machine has compute-sanitizer in /usr/local/cuda")
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "SKIP sanitizer (racecheck): compute-sanitizer was not found" in proc.stdout
    bad = subprocess.run(
        [sys.executable, *args, "--portkit-sanitize=bogus"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 4 and "invalid choice: 'bogus'" in bad.stderr
