"""numba-cuda's own ``doc_examples``, ``cudasim`` and ``cudadrv`` test folders under
numba's simulator and under portkit's, side by side.

    python scripts/compare_simulators.py [--folders doc_examples cudasim cudadrv]
                                         [--test-timeout 300] [--json FILE]

The folders are copied out of the installed numba-cuda package, unedited, into a
temporary directory with the ``conftest.py`` of numba-cuda's repository (its
``initialize_from_pytest_config`` fixture; the package does not ship it). Each folder
runs twice in pytest, each run in a fresh process:

- ``numba``: ``NUMBA_ENABLE_CUDASIM=1``;
- ``portkit``: ``pytest --portkit-simt``.

In ``doc_examples`` (all marked ``skip_on_cudasim``) the mark is lifted for both runs,
so both simulators try every example. A test still running after ``--test-timeout``
seconds fails as timed out (a SIGALRM in the conftest). Prints pass/fail/skip counts
per folder and simulator, and every test numba's simulator passes that portkit's does
not, with the first line of its failure; ``--json`` keeps each test's outcome, message
and seconds. Needs ``filecheck`` (numba.cuda.testing).

numba-cuda-mlir has no folder here: its 0.6.0 wheel ships no tests (only its test
helpers) and it has no sdist, and no simulator of its own to compare with
(docs/numba-world.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from portkit.bench.timing import host_call

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("doc_examples", "cudasim", "cudadrv")

CONFTEST = """
import os, signal
import pytest

if os.environ.get("COMPARE_LIFT_SKIP_ON_CUDASIM"):
    import numba.cuda.testing as testing
    testing.skip_on_cudasim = lambda reason: (lambda item: item)


def pytest_addoption(parser):
    parser.addoption("--dump-failed-filechecks", action="store_true")


@pytest.fixture(scope="class")
def initialize_from_pytest_config(request):
    request.cls._dump_failed_filechecks = request.config.getoption("dump_failed_filechecks")


class TimedOut(Exception):
    pass


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    seconds = int(os.environ.get("COMPARE_TEST_TIMEOUT", "300"))

    def stop(signum, frame):
        raise TimedOut(f"timed out after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        return (yield)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
"""


def tests_root() -> Path:
    import numba.cuda.tests as tests

    return Path(tests.__file__).parent


def outcomes(junit: Path) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    if not junit.exists():
        return found
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
                message = (child.get("message") or "").strip().splitlines()[:1]
                message = message[0][:160] if message else ""
            elif child.tag == "skipped":
                outcome, message = "skipped", (child.get("message") or "")[:160]
        seconds = round(float(case.get("time") or 0), 1)
        found[name] = {"outcome": outcome, "message": message, "seconds": seconds}
    return found


def run(folder: str, simulator: str, work: Path, timeout: int) -> dict:
    junit = work / f"{folder}-{simulator}.xml"
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    env["COMPARE_TEST_TIMEOUT"] = str(timeout)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env.pop("COMPARE_LIFT_SKIP_ON_CUDASIM", None)
    if folder == "doc_examples":
        env["COMPARE_LIFT_SKIP_ON_CUDASIM"] = "1"
    command = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider"]
    command += ["-q", f"--junitxml={junit}", folder]
    if simulator == "numba":
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    else:
        command.append("--portkit-simt")
    _, seconds = host_call(
        subprocess.run, command, cwd=work, env=env, capture_output=True, check=False
    )
    return {"seconds": round(seconds, 1), "tests": outcomes(junit)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folders", nargs="+", default=list(FOLDERS), choices=FOLDERS)
    parser.add_argument("--test-timeout", type=int, default=300, help="seconds per test")
    parser.add_argument("--json", type=Path, metavar="FILE")
    args = parser.parse_args()
    report: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "conftest.py").write_text(CONFTEST)
        for folder in args.folders:
            shutil.copytree(
                tests_root() / folder, work / folder, ignore=shutil.ignore_patterns("__pycache__")
            )
            report[folder] = {
                s: run(folder, s, work, args.test_timeout) for s in ("numba", "portkit")
            }
    print("| folder | simulator | passed | failed | skipped | seconds |")
    print("|---|---|---:|---:|---:|---:|")
    for folder, runs in report.items():
        for simulator, result in runs.items():
            counted = [t["outcome"] for t in result["tests"].values()]
            row = [counted.count(o) for o in ("passed", "failed", "skipped")]
            print(f"| {folder} | {simulator} | {' | '.join(map(str, row))} | {result['seconds']} |")
    for folder, runs in report.items():
        numba, portkit = runs["numba"]["tests"], runs["portkit"]["tests"]
        lost = [n for n, t in numba.items() if t["outcome"] == "passed"]
        lost = [n for n in lost if portkit.get(n, {}).get("outcome") != "passed"]
        print(f"\n{folder}: passed under numba's simulator, not under portkit's: {len(lost)}")
        for name in lost:
            t = portkit.get(name, {"outcome": "missing", "message": ""})
            print(f"- {name}: {t['outcome']}: {t['message']}")
        print(f"{folder}, both simulators' outcome per test where they differ:")
        for name in sorted(set(numba) | set(portkit)):
            a = numba.get(name, {}).get("outcome", "-")
            b = portkit.get(name, {}).get("outcome", "-")
            if a != b:
                why = portkit.get(name, {}).get("message") or numba.get(name, {}).get("message")
                print(f"  {name}: numba {a}, portkit {b}: {why}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
