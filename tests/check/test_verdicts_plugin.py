"""The generated suite with the verdict store: an unchanged item that passed before is
served and reported as cached (its own category, not a pass), a failing one runs every
time, --portkit-no-cache runs all; the cpu and gpu phase markers split the suite."""

from __future__ import annotations

import re

import pytest
import torch  # noqa: F401  (before pytester: see tests/test_plugin.py)

from tests.pytest_runs import pytest_runs
from tests.test_plugin import plugin_args

GOOD, BAD = "vp_good", "vp_bad"


@pytest.fixture
def project(pytester, make_project, sources, monkeypatch):
    monkeypatch.setenv("PORTKIT_VERDICT_CACHE", "1")  # tests/conftest.py turns it off
    return make_project(
        {
            GOOD: (sources.unary_op(GOOD, cases=sources.ONE_CASE), sources.unary_twin(GOOD)),
            BAD: (
                sources.unary_op(BAD, "out[i] = x[i] * 3.0", cases=sources.ONE_CASE),
                sources.unary_twin(BAD, "out[i] = x[i] * T(3);"),
            ),
        },
        at=pytester.path,
    )


def run(pytester, *args: str):
    return pytester.runpytest_subprocess(
        *plugin_args(), "prototypes", "-p", "no:cacheprovider", "--strict-markers", "-v", *args
    )


def statuses(result) -> dict[str, str]:
    found = {}
    for line in result.outlines:
        m = re.match(r"^prototypes/(\w+\.py::\S+) (PASSED|FAILED|SKIPPED|CACHED)", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


def test_unchanged_passes_are_reported_cached_and_failures_run_again(pytester, project):
    # three sessions one after another in one fresh process (tests/pytest_runs.py): the
    # verdict store is a file, read by each session as it starts
    args = [*plugin_args(), "prototypes", "-p", "no:cacheprovider", "--strict-markers", "-v"]
    sim = [*args, "-m", "sim"]
    first, second, forced = pytest_runs(pytester, sim, sim, [*sim, "--portkit-no-cache"])
    first = statuses(first)
    assert first[f"{GOOD}.py::sim[float32-n129]"] == "PASSED"
    assert first[f"{BAD}.py::sim[float32-n129]"] == "FAILED"
    found = statuses(second)
    assert found[f"{GOOD}.py::sim[float32-n129]"] == "CACHED"
    assert found[f"{BAD}.py::sim[float32-n129]"] == "FAILED"  # never served
    assert second.ret == 1
    summary = second.outlines[-1]
    assert "1 failed" in summary and "1 cached" in summary and "passed" not in summary
    assert any("1 item(s) passed before and are unchanged" in line for line in second.outlines)
    assert statuses(forced)[f"{GOOD}.py::sim[float32-n129]"] == "PASSED"


def test_an_edit_runs_the_item_again(pytester, project):
    run(pytester, "-m", "sim")
    prototype = project / "prototypes" / f"{GOOD}.py"
    prototype.write_text(prototype.read_text() + "\n# edited\n")
    found = statuses(run(pytester, "-m", "sim"))
    assert found[f"{GOOD}.py::sim[float32-n129]"] == "PASSED"


def collected(pytester, *markers: str) -> list[set[str]]:
    """The items each marker expression selects, collected in one fresh process."""
    args = [*plugin_args(), "prototypes", "-p", "no:cacheprovider", "--collect-only", "-q"]
    results = pytest_runs(pytester, *([*args, "-m", m] for m in markers))
    return [
        {line.split("prototypes/", 1)[1] for line in result.outlines if "::" in line}
        for result in results
    ]


def test_phase_markers_split_the_suite(pytester, project):
    cpu, gpu = collected(pytester, "cpu", "gpu")
    assert cpu and gpu and not cpu & gpu
    assert f"{GOOD}.py::compile[twin]" in cpu and f"{GOOD}.py::lint" in cpu
    assert f"{GOOD}.py::twin-cpu[float32-n129]" in cpu and f"{GOOD}.py::sim[float32-n129]" in cpu
    assert f"{GOOD}.py::numba~twin[float32-n129]" in gpu and f"{GOOD}.py::twin[float32-n129]" in gpu
    items = ["compile[numba]", "compile[twin]", "lint"]
    items += [f"{n}[float32-n129]" for n in ("sim", "numba", "twin", "twin-cpu")]
    items += ["numba~twin[float32-n129]", "sim~twin-cpu[float32-n129]"]
    ours = {i for i in cpu | gpu if i.startswith(GOOD)}
    assert ours == {f"{GOOD}.py::{i}" for i in items}  # every item but bench in one phase
