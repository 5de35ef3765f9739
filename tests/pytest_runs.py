"""Several runs of pytest with the portkit plugin over one throwaway project, in one fresh
process: one ``pytest.main`` after another, each with its own output. A fresh process
costs seconds before the first item (torch, numba, the prototypes' imports), most of
what a collection or a one-item run takes; the runs still share nothing but the process
(each has its own session, config and reports), and the tests still read each run's
exit code and output lines as pytester's ``RunResult``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Each run's stdout and stderr go to buffers: pytest's terminal reporter writes to the
# sys.stdout it finds when it configures, and a usage error goes to sys.stderr.
_RUNS = """
import io, json, os, sys
import pytest

found = []
for folder, args in json.loads(sys.argv[1]):
    os.chdir(folder)
    out, err = io.StringIO(), io.StringIO()
    sys.stdout, sys.stderr = out, err
    try:
        code = pytest.main(args)
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    found.append([int(code), out.getvalue(), err.getvalue()])
print("PYTEST-RUNS " + json.dumps(found))
"""


def pytest_runs(pytester: pytest.Pytester, *arg_lists: list[str]) -> list[pytest.RunResult]:
    """The result of ``pytest *args`` for each of ``arg_lists``, run in ``pytester.path``
    one after another in one fresh Python process."""
    return pytest_runs_in(pytester.path, *arg_lists)


def pytest_runs_in(
    root: Path, *arg_lists: list[str], folders: list[Path] | None = None
) -> list[pytest.RunResult]:
    """``pytest_runs`` in the folder ``root`` (for a module's project, made once), or
    each run in its own of ``folders`` (a project each)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    runs = [[str(f), list(a)] for f, a in zip(folders or [root] * len(arg_lists), arg_lists)]
    assert len(runs) == len(arg_lists), "one folder for each run"
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _RUNS, json.dumps(runs)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("PYTEST-RUNS ")]
    assert done.returncode == 0 and lines, done.stdout + done.stderr
    duration = time.perf_counter() - started
    return [
        pytest.RunResult(code, out.splitlines(), err.splitlines(), duration)
        for code, out, err in json.loads(lines[-1].removeprefix("PYTEST-RUNS "))
    ]
