"""The pytest plugin turns every prototype file into op x implementation x case tests."""

from __future__ import annotations

import os
import re
from importlib.metadata import entry_points
from pathlib import Path

import pytest

# torch before any pytester run: an in-process run forgets the modules it imported, and
# importing torch a second time in one process fails ("bad call flags"), which made this
# file fail when run alone
import torch  # noqa: F401

from portkit.backends import create, create_all
from portkit.backends.twin_cpu.build import compiler_unavailable_reason
from portkit.checking.harness import gpu_implementations
from portkit.project.config import load_config
from portkit.project.discovery import discover
from tests.conftest import ONE_CASE, make_project_at, unary_op, unary_twin
from tests.pytest_runs import pytest_runs_in

GOOD = "plug_good"
BAD = "plug_bad"
BROKEN = "plug_broken"
GOOD_CASES = ["float32-n1", "float32-n129", "float64-gradcheck"]


def plugin_args() -> list[str]:
    """Load the plugin explicitly where its entry point is not installed."""
    installed = any(ep.name == "portkit" for ep in entry_points(group="pytest11"))
    autoload = not os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    return [] if installed and autoload else ["-p", "portkit.pytest_plugin"]


def three_ops() -> dict[str, tuple[str | None, str | None]]:
    """A good op, a wrong one (3x where the reference doubles) and one that fails to import."""
    return {
        GOOD: (
            unary_op(GOOD, backward="dx[i] = dy[i] * 2.0"),
            unary_twin(GOOD, backward="dx[i] = dy[i] * T(2);"),
        ),
        BAD: (
            unary_op(BAD, "out[i] = x[i] * 3.0", cases=ONE_CASE),
            unary_twin(BAD, "out[i] = x[i] * T(3);"),
        ),
        BROKEN: ("import portkit_no_such_module_xyz\n", None),
    }


@pytest.fixture
def project(pytester, make_project):
    return make_project(three_ops(), at=pytester.path)


# The runs of the generated suite the tests below read, by name: pytest's arguments.
RUNS = {
    "all": ["-v", "-rs"],
    "sim": ["-v", "-m", "sim"],
    "twin_cpu": ["-v", "-m", "twin_cpu"],
    "compile": ["-q", "-m", "compile"],
    "bench": ["-v", "-rs", "-m", "bench", "--portkit-bench-baseline", "baseline.json"],
    "gpu": ["-v", "-rs", "-m", "gpu and not bench"],
    "seeds": ["-m", "sim", "--portkit-seeds", "3", "-k", GOOD],
}


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> tuple[Path, dict[str, pytest.RunResult]]:
    """The three ops' project, made once, and each of ``RUNS`` of its generated suite,
    run one after another in one fresh process (tests/pytest_runs.py): a process's
    start-up (torch, numba, the prototypes) would be most of each run's seconds."""
    root = make_project_at(tmp_path_factory.mktemp("plugin") / "project", three_ops())
    (root / "baseline.json").write_text("{}")
    # what a test below skips is not run: the gpu items where a GPU runs them, the CPU
    # twin's without a compiler
    no_gpu = all(gpu_reasons(root).values())
    skipped = {"gpu"} if not no_gpu else set()
    skipped |= {"twin_cpu"} if compiler_unavailable_reason() else set()
    names = [name for name in RUNS if name not in skipped]
    common = [*plugin_args(), "prototypes", "-p", "no:cacheprovider", "--strict-markers"]
    results = pytest_runs_in(root, *([*common, *RUNS[name]] for name in names))
    return root, dict(zip(names, results))


def run(pytester, *args: str):
    return pytester.runpytest_subprocess(
        *plugin_args(), "prototypes", "-p", "no:cacheprovider", "--strict-markers", *args
    )


def outcomes(result) -> dict[str, str]:
    """test id -> PASSED/FAILED/SKIPPED from ``-v`` output."""
    found = {}
    for line in result.outlines:
        m = re.match(r"^prototypes/(\w+\.py::\S+) (PASSED|FAILED|SKIPPED|ERROR)", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


def gpu_reasons(root) -> dict[str, str | None]:
    config = load_config(root)
    return {name: create(name, config).unavailable_reason for name in ("numba", "twin")}


def test_generated_items(suite):
    project, runs = suite
    result = runs["all"]
    text = result.stdout.str()
    got = outcomes(result)

    good = {k.split("::", 1)[1]: v for k, v in got.items() if k.startswith(f"{GOOD}.py::")}
    expected_ids = {"compile[numba]", "compile[twin]", "lint", "torch[float64-gradcheck]", "bench"}
    for case in GOOD_CASES:
        expected_ids |= {f"sim[{case}]", f"numba[{case}]", f"twin[{case}]", f"numba~twin[{case}]"}
        expected_ids |= {f"twin-cpu[{case}]", f"sim~twin-cpu[{case}]"}
    assert set(good) == expected_ids

    # what runs on a CPU passes
    for test_id in ("compile[numba]", "compile[twin]", "torch[float64-gradcheck]"):
        assert good[test_id] == "PASSED", test_id
    for case in GOOD_CASES:
        assert good[f"sim[{case}]"] == "PASSED", case

    # GPU items skip with the backend's reason, or run where there is a GPU
    reasons = gpu_reasons(project)
    for case in GOOD_CASES:
        for name in ("numba", "twin", "numba~twin"):
            backends = name.split("~")
            missing = [reasons[b] for b in backends if reasons[b]]
            assert good[f"{name}[{case}]"] == ("SKIPPED" if missing else "PASSED"), name
    # the CPU twin runs wherever there is a C++ compiler
    cpu_reason = compiler_unavailable_reason()
    for case in GOOD_CASES:
        for name in ("twin-cpu", "sim~twin-cpu"):
            assert good[f"{name}[{case}]"] == ("SKIPPED" if cpu_reason else "PASSED"), name
    if reasons["twin"]:
        assert "no CUDA GPU visible" in reasons["twin"]
        assert re.search(rf"SKIPPED \[\d+\] prototypes/{GOOD}\.py: no CUDA GPU visible", text)

    # timing never runs in the normal suite: only with --portkit-bench-baseline
    assert good["bench"] == "SKIPPED"
    assert "timing runs only with --portkit-bench-baseline FILE" in text

    # the lint tier: numba types `x[i] * 2.0` float64, but LLVM folds it to a float32
    # multiply (exact: 2.0 is a float32), so the PTX has no float64 and there is no finding
    assert good["lint"] == "PASSED"

    # the wrong op fails with the harness's report, not a traceback
    assert got[f"{BAD}.py::sim[float32-n129]"] == "FAILED"
    assert got[f"{BAD}.py::compile[twin]"] == "PASSED"
    assert "sim forward: output 0: 129 of 129 elements differ" in text
    assert "reproduce: portkit check plug_bad --case float32-n129" in text
    assert "Traceback" not in text
    assert "raise CheckFailed" not in text and "pytest_plugin" not in text

    # a prototype that does not import is one failing item naming the file
    assert got[f"{BROKEN}.py::load"] == "FAILED"
    assert f"prototypes/{BROKEN}.py failed to import: ModuleNotFoundError" in text

    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_marker_selects_sim_only(suite):
    result = suite[1]["sim"]
    got = outcomes(result)
    assert sorted(got) == sorted(
        [f"{GOOD}.py::sim[{c}]" for c in GOOD_CASES] + [f"{BAD}.py::sim[float32-n129]"]
    )
    assert got[f"{BAD}.py::sim[float32-n129]"] == "FAILED"
    parsed = result.parseoutcomes()
    assert parsed["passed"] == 3 and parsed["failed"] == 1
    assert parsed["deselected"] > 0
    assert "skipped" not in parsed


def test_marker_selects_the_cpu_twin(suite):
    if compiler_unavailable_reason():
        pytest.skip("no C++ compiler for the CPU twin")
    result = suite[1]["twin_cpu"]
    got = outcomes(result)
    expected = [f"{GOOD}.py::{b}[{c}]" for c in GOOD_CASES for b in ("twin-cpu", "sim~twin-cpu")]
    expected += [f"{BAD}.py::twin-cpu[float32-n129]", f"{BAD}.py::sim~twin-cpu[float32-n129]"]
    assert sorted(got) == sorted(expected)
    # The bad twin is wrong against the reference but agrees with its (equally bad) prototype.
    assert got[f"{BAD}.py::twin-cpu[float32-n129]"] == "FAILED"
    assert got[f"{BAD}.py::sim~twin-cpu[float32-n129]"] == "PASSED"
    assert "twin-cpu forward: output 0: 129 of 129 elements differ" in result.stdout.str()


def test_marker_selects_compile_only(suite):
    result = suite[1]["compile"]
    # compile[numba], compile[twin] and lint of both ops pass: their Python float literals
    # (`* 2.0`, `* 3.0`) fold into float32 constants, so the PTX has no float64 instruction
    # and lint has no finding (a float64 accumulator fails it: tests/lint/test_severity.py)
    result.assert_outcomes(passed=6, failed=0)
    assert result.ret == pytest.ExitCode.OK


def test_markers_are_registered(pytester, project):
    result = pytester.runpytest_subprocess(*plugin_args(), "--markers")
    text = result.stdout.str()
    for marker in ("sim", "gpu", "compile", "reference", "bench", "twin_cpu", "large"):
        assert f"@pytest.mark.{marker}:" in text


def test_large_cases_run_in_sim_only_and_are_marked(pytester, make_project, sources):
    cases = (
        '[portkit.cases.custom("float32-n1", [(1,)]),'
        ' portkit.cases.custom("big", [(300,)], large=True)]'
    )
    name = "plug_large"
    twin = sources.unary_twin(name, backward="dx[i] = dy[i] * T(2);")
    op = sources.unary_op(name, backward="dx[i] = dy[i] * 2.0", cases=cases)
    make_project({name: (op, twin)}, at=pytester.path)
    result = run(pytester, "-v", "-rs", "-m", "large and not compile")
    got = {k.split("::", 1)[1]: v for k, v in outcomes(result).items()}
    assert set(got) == {
        f"{b}[big]" for b in ("sim", "numba", "twin", "numba~twin", "twin-cpu", "sim~twin-cpu")
    }
    text = result.stdout.str()
    # What the plugin asks: a GPU implementation on this machine makes the simulator's
    # run of a large case redundant; without one the simulator is what checks it.
    config = load_config(pytester.path)
    on_gpu = gpu_implementations(discover(config).get(name), create_all(config))
    if on_gpu:  # the GPU checks it; every CPU backend, the simulator too, skips it
        assert all(got[f"{b}[big]"] == "PASSED" for b in on_gpu), got
        assert got["sim[big]"] == got["twin-cpu[big]"] == got["sim~twin-cpu[big]"] == "SKIPPED"
        assert "large case: checked on this machine's GPU" in text
    else:
        assert got["sim[big]"] == "PASSED"
        if not compiler_unavailable_reason():
            assert got["twin-cpu[big]"] == got["sim~twin-cpu[big]"] == "SKIPPED"
            assert "large case: on a CPU only portkit's simulator (`sim`) runs it" in text


def test_bench_items_need_a_gpu_even_with_a_baseline(suite):
    project, runs = suite
    result = runs["bench"]  # --portkit-bench-baseline baseline.json, a file of {}
    got = outcomes(result)
    assert got[f"{GOOD}.py::bench"] in ("SKIPPED" if gpu_reasons(project)["twin"] else "FAILED",)
    if gpu_reasons(project)["twin"]:
        assert "portkit bench needs an NVIDIA GPU" in result.stdout.str()


def test_gpu_items_without_a_gpu_are_skipped_with_their_reason(suite):
    project, runs = suite
    reasons = gpu_reasons(project)
    if not (reasons["numba"] and reasons["twin"]):
        pytest.skip("this machine has a GPU: the gpu items run")
    result = runs["gpu"]
    got = outcomes(result)
    assert got and set(got.values()) == {"SKIPPED"}
    summary = [line for line in result.outlines if line.startswith("SKIPPED [")]
    assert summary
    for line in summary:  # "SKIPPED [n] prototypes/op.py: <reason>"
        reason = line.split(": ", 1)[1]
        assert reason in (reasons["numba"], reasons["twin"]) or "GPU" in reason, line


def test_portkit_seeds_runs_every_case_with_n_seeds_and_lists_the_worst_margins(suite):
    result = suite[1]["seeds"]
    assert result.parseoutcomes()["passed"] == 3
    text = "\n".join(result.outlines)
    assert "portkit: worst margin over 3 seeds (1 = the bound)" in text
    margins = re.findall(rf"^([\d.e+-]+)  prototypes/{GOOD}\.py::sim\[", text, re.M)
    assert len(margins) == 3 and all(0 <= float(m) < 1 for m in margins), text
