"""Try the newest numba-cuda release against portkit's adapter to its internals, without
touching this environment.

    python scripts/check_numba_release.py [--version 0.31.0] [--json] [--keep]

pyproject.toml pins numba-cuda (and cuda-core) to the minor versions that
portkit/numba_internals.py, the one module using their private names, is tested with.
This script says whether the pin can move:

1. asks the package index for the newest numba-cuda (``pip index versions``), or takes
   ``--version``;
2. installs it with ``pip install --target`` into a temporary folder, without its
   dependencies; any requirement of it that this environment does not meet (a newer
   cuda-core, say) goes into the same folder, the rest is used as installed;
3. with that folder first on ``PYTHONPATH`` (numba-cuda's redirector then serves
   ``numba.cuda`` from it), reports which of the adapter's private names
   (``numba_internals.PRIVATE_NAMES``) moved, and runs a fast, named subset of the
   tests that exercise the adapter (``ADAPTER_TESTS``).

It downloads, so it is not part of CI's test run. Exit 0: nothing moved or broke;
1: something did; 2: the check could not run (index unreachable, install failed).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "numba-cuda"
EXTRA = "cu13"  # the extra pyproject.toml installs numba-cuda with

# The tests that go through portkit/numba_internals.py, each quick without a GPU: the
# adapter's own, the prototype cache, lint's typed IR and resources (half-precision
# shims, compute-capability patch), the numba backend's CPU side, and the simulator on
# two example ops and on numba-cuda's bfloat16 functions.
ADAPTER_TESTS = (
    "tests/test_numba_internals.py",
    "tests/backends/test_prototype_cache.py",
    "tests/lint/test_numba_ir.py",
    "tests/lint/test_resources.py",
    "tests/backends/test_numba_lineinfo.py",
    "tests/backends/test_registry.py",
    "tests/simt/test_half_precision.py",
    "tests/cli/test_sim.py::test_sim_sigmoid_passes",
    "tests/cli/test_sim.py::test_sim_softmax_shape",
)

PROBE = """
import json, numba.cuda, numba_cuda
from portkit import numba_internals
print(json.dumps({"version": numba_cuda.__version__, "file": numba.cuda.__file__,
                  "moved": numba_internals.missing_private_names()}))
"""


class CheckError(Exception):
    """The check could not run (exit 2)."""


def newest_version(pip_index_output: str) -> str:
    """The newest version in ``pip index versions`` output ("numba-cuda (0.31.0)")."""
    match = re.search(rf"^{re.escape(PACKAGE)} \(([^)]+)\)", pip_index_output, re.M)
    if not match:
        raise CheckError(f"pip index versions {PACKAGE} named no version:\n{pip_index_output}")
    return match.group(1)


def unmet_requirements(
    requirements: Iterable[str], installed: Callable[[str], str | None], extra: str = EXTRA
) -> list[str]:
    """The requirement strings (of the candidate's metadata) this environment does not
    meet, for the platform here and the ``extra`` portkit installs."""
    from packaging.requirements import Requirement

    unmet = []
    for text in requirements:
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is not None and not marker.evaluate({"extra": extra}):
            continue
        version = installed(requirement.name)
        if version is None or not requirement.specifier.contains(version, prereleases=True):
            unmet.append(f"{requirement.name}{requirement.specifier}")
    return unmet


def junit_summary(xml_text: str) -> dict:
    """Counts and the ids of failed or erroring tests from pytest's ``--junitxml``."""
    root = ET.fromstring(xml_text)
    summary = {"passed": 0, "failed": 0, "skipped": 0, "broken": []}
    for case in root.iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        if case.find("failure") is not None or case.find("error") is not None:
            summary["failed"] += 1
            summary["broken"].append(test_id)
        elif case.find("skipped") is not None:
            summary["skipped"] += 1
        else:
            summary["passed"] += 1
    return summary


def render(report: dict) -> str:
    """The short human report."""
    lines = [
        f"{PACKAGE} {report['candidate']} (pinned here: {report['installed']}), "
        f"checked {report['date']}",
    ]
    if report.get("also_installed"):
        lines.append(f"  also in the temporary folder: {', '.join(report['also_installed'])}")
    moved = report.get("moved", [])
    lines.append(f"  private names moved: {', '.join(moved) if moved else 'none'}")
    tests = report.get("tests")
    if tests:
        lines.append(
            f"  adapter tests: {tests['passed']} passed, {tests['failed']} failed, "
            f"{tests['skipped']} skipped"
        )
        lines.extend(f"    broke: {test_id}" for test_id in tests["broken"])
    lines.append("  verdict: " + ("the pin can move" if report["ok"] else "keep the pin"))
    return "\n".join(lines)


# --------------------------------------------------------------------------- running


def _pip(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=900)


def _installed_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _candidate_requirements(target: Path) -> list[str]:
    from importlib import metadata

    dists = [d for d in metadata.distributions(path=[str(target)]) if d.metadata]
    for dist in dists:
        if dist.metadata["Name"].lower().replace("_", "-") == PACKAGE:
            return list(dist.requires or [])
    raise CheckError(f"{PACKAGE} is not in {target} after pip install")


def _install(target: Path, spec: str) -> None:
    run = _pip("install", "--quiet", "--no-deps", "--target", str(target), spec)
    if run.returncode != 0:
        raise CheckError(f"pip install {spec} failed:\n{run.stderr.strip()}")


def _environment(target: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(target), str(ROOT)])
    env["PYTHONNOUSERSITE"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def check(version: str | None, workdir: Path) -> dict:
    if version is None:
        index = _pip("index", "versions", PACKAGE)
        if index.returncode != 0:
            raise CheckError(f"the package index did not answer:\n{index.stderr.strip()}")
        version = newest_version(index.stdout)
    target = workdir / "site"
    _install(target, f"{PACKAGE}=={version}")
    also = unmet_requirements(_candidate_requirements(target), _installed_version)
    for spec in also:
        _install(target, spec)
    env = _environment(target)
    probe = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=ROOT
    )
    if probe.returncode != 0:
        raise CheckError(f"importing numba.cuda {version} failed:\n{probe.stderr.strip()}")
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    if not found["file"].startswith(str(target)):
        raise CheckError(f"numba.cuda came from {found['file']}, not from {target}")
    junit = workdir / "junit.xml"
    pytest = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider"]
    pytest += ["-q", "-m", "not large", f"--junitxml={junit}", *ADAPTER_TESTS]
    run = subprocess.run(pytest, capture_output=True, text=True, env=env, cwd=ROOT)
    if not junit.exists():
        raise CheckError(f"pytest wrote no report:\n{(run.stdout + run.stderr)[-2000:]}")
    tests = junit_summary(junit.read_text())
    return {
        "date": datetime.date.today().isoformat(),
        "candidate": found["version"],
        "installed": _installed_version(PACKAGE),
        "also_installed": also,
        "moved": found["moved"],
        "tests": tests,
        "ok": not found["moved"] and not tests["failed"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", help=f"the {PACKAGE} version to try (default: newest)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="portkit-numba-release-"))
    try:
        report = check(args.version, workdir)
    except CheckError as exc:
        report = {"ok": False, "error": str(exc)}
        print(json.dumps(report, indent=1) if args.json else f"cannot check: {exc}")
        return 2
    finally:
        if args.keep:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(report, indent=1) if args.json else render(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
