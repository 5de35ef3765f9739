"""numba-cuda's own tests (``numba/cuda/tests/{cudapy,doc_examples,cudadrv,cudasim,nocuda}``)
under numba's simulator and under portkit's, side by side.

    python scripts/run_numba_suite.py [--folders cudapy doc_examples ...]
                                      [--modules test_atomics cudadrv.test_events ...]
                                      [--json FILE] [--timeout 1800]

Without ``--modules``, every ``test_*`` module of each folder (default: all five); a
module without a folder is ``cudapy``'s. Two unittest runs of each folder's modules from
the installed numba-cuda package, each in a fresh process:

- ``numba``: ``NUMBA_ENABLE_CUDASIM=1``, numba's simulator, as numba-cuda's CI runs them;
- ``portkit``: ``portkit.simt.simulated_cuda()`` on (what ``pytest --portkit-simt``
  turns on) and nothing else set by hand: ``cuda.jit`` kernels launch in portkit's
  simulator, host arrays are numba's simulator's, and the switch itself sets numba's
  ``config.ENABLE_CUDASIM`` (and ``NUMBA_ENABLE_CUDASIM`` for child processes), so the
  tests that numba marks ``skip_on_cudasim`` (PTX, LLVM, driver internals) skip in both
  runs alike. (unittest, not pytest: pytest cannot import numba-cuda's test modules by
  path from its site-packages layout.)

Prints a table folder x simulator (passed, failed, skipped, wall seconds), and the tests
that pass under numba's simulator but not under portkit's, with the last line of each
failure, so each difference can be given its reason (docs/numba-world.md). Needs
``filecheck``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FOLDERS = ("cudapy", "doc_examples", "cudadrv", "cudasim", "nocuda")
# A quick subset of cudapy: modules about kernels (not about the driver, PTX, caching, or
# bindings), bounded to a few minutes on 2 cores.
QUICK_MODULES = [
    "test_atomics",
    "test_intrinsics",
    "test_localmem",
    "test_sync",
    "test_warp_ops",
    "test_laplace",
    "test_matmul",
    "test_blackscholes",
    "test_idiv",
    "test_freevar",
    "test_globals",
    "test_constmem",
    "test_math",
    "test_montecarlo",
    "test_vectorize_scalar_arg",
    "test_flow_control",
    "test_forall",
    "test_mandel",
    "test_reduction",
    "test_random",
]

# One process runs modules in order, appending a JSON line per event to a log: a test that
# starts, a test's outcome, a module done. A test that crashes the process (numba's tests
# include some that exit or segfault under a simulator) is the one started without an
# outcome; the next process resumes after its module.
_BOOT = """
import json, sys, unittest
log = open(sys.argv[2], "a", buffering=1)
def put(**event):
    log.write(json.dumps(event) + "\\n")
import numba.cuda
if sys.argv[1] == "portkit":
    import portkit.simt
    switch = portkit.simt.simulated_cuda()
    switch.__enter__()
failed = set()

class Result(unittest.TextTestResult):
    def _put(self, test, outcome, message=""):
        put(test=test.id(), outcome=outcome, message=message)
    def _last_line(self, test, err):  # the exception's type and its message's first line
        text = str(err[1]).strip()
        return f"{type(err[1]).__name__}: {text.splitlines()[0] if text else ''}"[:200]
    def startTest(self, test):
        put(test=test.id(), outcome="started")
        super().startTest(test)
    def addFailure(self, test, err):
        failed.add(test.id())
        self._put(test, "failed", self._last_line(test, err))
    def addError(self, test, err):
        failed.add(test.id())
        self._put(test, "failed", self._last_line(test, err))
    def addSubTest(self, test, subtest, err):
        if err is not None:  # a failed subtest fails its test (it is not reported otherwise)
            failed.add(test.id())
            self._put(test, "failed", f"{subtest.id()}: {self._last_line(test, err)}")
    def addSuccess(self, test):
        if test.id() not in failed:
            self._put(test, "passed")
    def addSkip(self, test, reason):
        self._put(test, "skipped", reason)
    def addExpectedFailure(self, test, err):
        self._put(test, "skipped", "expected failure")
    def addUnexpectedSuccess(self, test):
        self._put(test, "passed")

loader = unittest.TestLoader()
for module in sys.argv[4:]:
    put(module=module, outcome="started")
    try:
        suite = loader.loadTestsFromName(f"numba.cuda.tests.{sys.argv[3]}.{module}")
    except Exception as exc:
        put(test=module, outcome="failed", message=f"import: {exc}"[:200])
    else:
        runner = unittest.TextTestRunner(
            resultclass=Result, verbosity=0, stream=open("/dev/null", "w")
        )
        runner.run(suite)
    put(module=module, outcome="done")
"""


def tests_folder(folder: str) -> Path:
    import numba.cuda.tests as tests

    return Path(tests.__file__).parent / folder


def _read_log(path: Path) -> tuple[dict[str, dict], list[str]]:
    """Each test's last event, and the modules started (in order)."""
    tests: dict[str, dict] = {}
    modules: list[str] = []
    for line in path.read_text().splitlines() if path.exists() else []:
        event = json.loads(line)
        if "module" in event:
            if event["outcome"] == "started":
                modules.append(event["module"])
        else:
            message = event.get("message", "")
            tests[event["test"]] = {"outcome": event["outcome"], "message": message}
    return tests, modules


def run(simulator: str, folder: str, modules: list[str], timeout: int) -> dict:
    """``modules`` of ``folder`` under ``simulator``: a fresh process, and another after
    the module of any test that ended the process."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "events.jsonl"
        env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
        if simulator == "numba":
            env["NUMBA_ENABLE_CUDASIM"] = "1"
        else:
            env.pop("NUMBA_ENABLE_CUDASIM", None)
        start = time.perf_counter()
        timed_out, remaining, ended = False, list(modules), ""
        while remaining and not timed_out:
            command = [sys.executable, "-c", _BOOT, simulator, str(log), folder, *remaining]
            left = timeout - (time.perf_counter() - start)
            try:
                done = subprocess.run(
                    command,
                    env=env,
                    cwd=tmp,
                    timeout=max(left, 1),
                    capture_output=True,
                    text=True,
                    check=False,
                )
                ended = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            except subprocess.TimeoutExpired:
                timed_out, ended = True, "timed out"
            _, started = _read_log(log)
            remaining = modules[modules.index(started[-1]) + 1 :] if started else []
        tests, _ = _read_log(log)
        for name, test in tests.items():
            if test["outcome"] == "started":  # it ended the process
                tests[name] = {"outcome": "failed", "message": f"ended the process: {ended}"[:200]}
        wall = time.perf_counter() - start
        return {"timed_out": timed_out, "wall": wall, "tests": tests}


def selected(folders: list[str], modules: list[str] | None) -> dict[str, list[str]]:
    """Each folder's modules to run: those named (``folder.module``, or ``module`` of
    cudapy), else every ``test_*.py`` the folder has."""
    chosen: dict[str, list[str]] = {}
    for folder in folders:
        present = sorted(p.stem for p in tests_folder(folder).glob("test_*.py"))
        if modules is None:
            names = present
        else:
            names = [
                m.split(".", 1)[-1]
                for m in modules
                if (m.split(".", 1)[0] if "." in m else "cudapy") == folder
            ]
            names = [m for m in names if m in present]
        if names:
            chosen[folder] = names
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folders", nargs="+", choices=FOLDERS, default=list(FOLDERS))
    parser.add_argument(
        "--modules", nargs="+", help="folder.module names (cudapy's without a folder)"
    )
    parser.add_argument("--quick", action="store_true", help="a quick subset of cudapy only")
    parser.add_argument("--json", type=Path, metavar="FILE")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per folder and run")
    args = parser.parse_args()
    modules = QUICK_MODULES if args.quick else args.modules
    plan = selected(args.folders, modules)
    results: dict[str, dict[str, dict]] = {}
    for folder, names in plan.items():
        results[folder] = {s: run(s, folder, names, args.timeout) for s in ("numba", "portkit")}
        print(f"ran {folder} ({len(names)} modules)", file=sys.stderr, flush=True)
    print("| folder | simulator | passed | failed | skipped | wall (s) |")
    print("|---|---|---:|---:|---:|---:|")
    counts: dict[str, dict[str, dict]] = {}
    differences: dict[str, dict] = {}
    for folder, by_simulator in results.items():
        counts[folder] = {}
        for simulator, result in by_simulator.items():
            outcomes = [t["outcome"] for t in result["tests"].values()]
            c = {o: outcomes.count(o) for o in ("passed", "failed", "skipped")}
            c.update(timed_out=result["timed_out"], wall=round(result["wall"], 1))
            counts[folder][simulator] = c
            late = " (timed out)" if c["timed_out"] else ""
            print(
                f"| {folder} | {simulator}{late} | {c['passed']} | {c['failed']} | "
                f"{c['skipped']} | {c['wall']:.0f} |"
            )
        numba_tests = by_simulator["numba"]["tests"]
        portkit_tests = by_simulator["portkit"]["tests"]
        for name in sorted(numba_tests):
            if numba_tests[name]["outcome"] != "passed":
                continue
            mine = portkit_tests.get(name, {"outcome": "missing", "message": ""})
            if mine["outcome"] != "passed":
                differences[name] = mine
    numba_passed = sum(c["numba"]["passed"] for c in counts.values())
    print(
        f"\npassing under numba's simulator: {numba_passed}; of those, under portkit's: "
        f"{numba_passed - len(differences)}"
    )
    for name, t in differences.items():
        print(f"- {name}: {t['outcome']}: {t['message']}")
    if args.json:
        tests = {f: {s: r["tests"] for s, r in by.items()} for f, by in results.items()}
        summary = {"counts": counts, "differences": differences, "tests": tests}
        args.json.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
