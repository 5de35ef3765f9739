"""numba-cuda's own tests (``numba/cuda/tests/cudapy``) under numba's simulator and under
portkit's, side by side.

    python scripts/run_numba_suite.py [--modules test_atomics test_intrinsics ...]
                                      [--json FILE] [--timeout 240]

Two unittest runs of the same test modules from the installed numba-cuda package, each
in a fresh process:

- ``numba``: ``NUMBA_ENABLE_CUDASIM=1``, numba's simulator, as numba-cuda's CI runs them;
- ``portkit``: ``portkit.simt.simulated_cuda()`` on (what ``pytest --portkit-simt``
  turns on): ``cuda.jit`` kernels launch in portkit's simulator, host arrays are
  numba's simulator's. (unittest, not pytest: pytest cannot import numba-cuda's test
  modules by path from its site-packages layout.) numba's
  ``config.ENABLE_CUDASIM`` is set too, so the tests that numba marks
  ``skip_on_cudasim`` (PTX, LLVM, driver internals) skip in both runs alike.

Prints per-module pass/fail/skip counts for both, and the tests that pass under
numba's simulator but not under portkit's, with the first line of each failure, so
each difference can be given its reason (docs/simulator.md). Needs ``filecheck``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Modules about kernels (not about the driver, PTX, caching, or bindings): bounded to a
# few minutes on 2 cores.
DEFAULT_MODULES = [
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

_BOOT = """
import json, sys, unittest
import numba.cuda
if sys.argv[1] == "portkit":
    from numba.cuda.core import config
    config.ENABLE_CUDASIM = True  # skip what numba skips under its simulator
    import portkit.simt
    switch = portkit.simt.simulated_cuda()
    switch.__enter__()
outcomes = {}

class Result(unittest.TextTestResult):
    def _put(self, test, outcome, message=""):
        outcomes[test.id()] = {"outcome": outcome, "message": message}
    def _last_line(self, test, err):
        return self._exc_info_to_string(err, test).strip().splitlines()[-1][:200]
    def addFailure(self, test, err):
        self._put(test, "failed", self._last_line(test, err))
    def addError(self, test, err):
        self._put(test, "failed", self._last_line(test, err))
    def addSubTest(self, test, subtest, err):
        if err is not None:  # a failed subtest fails its test (it is not reported otherwise)
            self._put(test, "failed", f"{subtest.id()}: {self._last_line(test, err)}")
    def addSuccess(self, test):
        if outcomes.get(test.id(), {}).get("outcome") != "failed":
            self._put(test, "passed")
    def addSkip(self, test, reason):
        self._put(test, "skipped", reason)
    def addExpectedFailure(self, test, err):
        self._put(test, "skipped", "expected failure")
    def addUnexpectedSuccess(self, test):
        self._put(test, "passed")

loader = unittest.TestLoader()
for module in sys.argv[3:]:
    try:
        suite = loader.loadTestsFromName("numba.cuda.tests.cudapy." + module)
    except Exception as exc:
        outcomes[module] = {"outcome": "failed", "message": f"import: {exc}"[:200]}
        continue
    runner = unittest.TextTestRunner(resultclass=Result, verbosity=0, stream=open("/dev/null", "w"))
    runner.run(suite)
json.dump(outcomes, open(sys.argv[2], "w"))
"""


def tests_folder() -> Path:
    import numba.cuda.tests.cudapy as cudapy

    return Path(cudapy.__file__).parent


def run(simulator: str, modules: list[str], timeout: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "outcomes.json"
        env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
        if simulator == "numba":
            env["NUMBA_ENABLE_CUDASIM"] = "1"
        else:
            env.pop("NUMBA_ENABLE_CUDASIM", None)
        command = [sys.executable, "-c", _BOOT, simulator, str(report), *modules]
        try:
            subprocess.run(
                command, env=env, cwd=tmp, timeout=timeout, capture_output=True, check=False
            )
        except subprocess.TimeoutExpired:
            return {"timed_out": True, "tests": {}}
        if not report.exists():
            return {"timed_out": False, "tests": {}}
        return {"timed_out": False, "tests": json.loads(report.read_text())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", nargs="+", default=DEFAULT_MODULES)
    parser.add_argument("--json", type=Path, metavar="FILE")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per run")
    args = parser.parse_args()
    folder = tests_folder()
    modules = [m for m in args.modules if (folder / f"{m}.py").exists()]
    results = {s: run(s, modules, args.timeout) for s in ("numba", "portkit")}
    counts = {}
    for simulator, result in results.items():
        outcomes = [t["outcome"] for t in result["tests"].values()]
        counts[simulator] = {o: outcomes.count(o) for o in ("passed", "failed", "skipped")}
        counts[simulator]["timed_out"] = result["timed_out"]
    numba_passed = {n for n, t in results["numba"]["tests"].items() if t["outcome"] == "passed"}
    portkit_tests = results["portkit"]["tests"]
    differences = {
        name: portkit_tests.get(name, {"outcome": "missing", "message": ""})
        for name in sorted(numba_passed)
        if portkit_tests.get(name, {}).get("outcome") != "passed"
    }
    both = len(numba_passed) - len(differences)
    print(f"modules: {len(modules)} ({', '.join(args.modules)})")
    print("| simulator | passed | failed | skipped |")
    print("|---|---:|---:|---:|")
    for simulator, c in counts.items():
        late = " (timed out)" if c["timed_out"] else ""
        print(f"| {simulator}{late} | {c['passed']} | {c['failed']} | {c['skipped']} |")
    print(
        f"\npassing under numba's simulator: {len(numba_passed)}; of those, under portkit's: {both}"
    )
    for name, t in differences.items():
        print(f"- {name}: {t['outcome']}: {t['message']}")
    if args.json:
        args.json.write_text(json.dumps({"counts": counts, "differences": differences}, indent=2))


if __name__ == "__main__":
    main()
