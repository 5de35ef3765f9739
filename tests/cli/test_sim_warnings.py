"""Simulator warnings in the commands (docs/simulator.md, "One rule for red"): `portkit
sim` prints each with kernel, thread, line and rule and counts them in its verdict;
`portkit check` counts them in its summary and --json, and passes; --strict and
[tool.portkit] strict = true make them errors; a buggy sibling fails without either."""

from __future__ import annotations

import json

from tests.conftest import ONE_CASE, unary_op

# Threads past n return before the barrier: in the last block of n = 129 (32-thread
# blocks) 31 threads returned. Every GPU since Volta lets the live thread through.
EARLY_RETURN = """
if i >= n:
    return
cuda.syncthreads()
out[i] = x[i] * 2.0
"""

# The sibling: after the barrier each thread reads the slot of the thread opposite,
# which in the last block returned without writing it: an uninitialised value stored.
READS_EXITED = """
t = cuda.threadIdx.x
s = cuda.shared.array(THREADS, numba.float32)
if i >= n:
    return
s[t] = x[i]
cuda.syncthreads()
out[i] = s[THREADS - 1 - t] * 0.0 + x[i] * 2.0
"""


def project(make_project, name: str, body: str, table: str = ""):
    py = "import numba\n" + unary_op(name, body, bound="True", cases=ONE_CASE)
    portkit_table = (
        'prototypes = "prototypes"\ncuda-src = "cuda_src"\ncache-dir = ".portkit-cache"\n' + table
    )
    root = make_project({name: (py, None)}, portkit_table=portkit_table)
    line = next(
        n
        for n, t in enumerate((root / "prototypes" / f"{name}.py").read_text().splitlines(), 1)
        if "cuda.syncthreads()" in t
    )
    return root, line


def test_sim_prints_the_warning_and_passes(make_project, cli):
    root, line = project(make_project, "sw_exit", EARLY_RETURN)
    result = cli(root, "sim", "sw_exit")
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "warning [barrier-after-exit] kernel sw_exit_fwd" in out
    assert "reached by 1 of the block's 32 threads; 31 exited without reaching it" in out
    assert "block (4, 0, 0), thread (0, 0, 0), " in out and f"sw_exit.py:{line}" in out
    assert "rule: threads that returned count as arrived at a block barrier" in out
    assert "PASS (1 simulator warning: not errors unless --strict)" in out


def test_sim_strict_fails_on_the_warning(make_project, cli):
    root, line = project(make_project, "sw_strict", EARLY_RETURN)
    result = cli(root, "sim", "sw_strict", "--strict")
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    assert "cuda.syncthreads is reached by 1 of the block's 32 threads" in out
    assert "FAIL" in out and "simulator warning" not in out


def test_check_counts_warnings_in_its_summary_and_json(make_project, cli):
    root, line = project(make_project, "sw_check", EARLY_RETURN)
    result = cli(root, "check", "sw_check", "--backend", "sim", "--no-compile")
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "warning sw_check / sim / forward / float32-n129: [barrier-after-exit]" in out
    assert "1 passed, 0 failed, 0 skipped, 1 warning" in out

    result = cli(root, "check", "sw_check", "--backend", "sim", "--no-compile", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index('{\n "results"') :])
    assert report["warnings"] == 1
    (row,) = [r for r in report["results"] if r["check"] == "forward"]
    assert row["status"] == "pass"
    (warning,) = row["warnings"]
    assert warning["kind"] == "barrier-after-exit" and warning["kernel"] == "sw_check_fwd"
    assert (warning["block"], warning["thread"], warning["line"]) == ([4, 0, 0], [0, 0, 0], line)
    assert warning["file"].endswith("sw_check.py") and warning["count"] == 1
    assert warning["rule"].startswith("threads that returned count as arrived")


def test_check_strict_flag_and_config_key_make_warnings_errors(make_project, cli):
    root, _ = project(make_project, "sw_flag", EARLY_RETURN)
    result = cli(root, "check", "sw_flag", "--backend", "sim", "--no-compile", "--strict")
    assert result.exit_code == 1, result.output
    assert "0 passed, 1 failed" in result.output

    root, _ = project(make_project, "sw_key", EARLY_RETURN, table="strict = true\n")
    result = cli(root, "check", "sw_key", "--backend", "sim", "--no-compile")
    assert result.exit_code == 1, result.output
    assert "barrier-divergence" in result.output or "reached by 1 of the block's" in result.output


def test_strict_key_must_be_a_boolean(make_project, cli):
    root, _ = project(make_project, "sw_bad", EARLY_RETURN, table='strict = "yes"\n')
    result = cli(root, "check", "sw_bad", "--backend", "sim", "--no-compile")
    assert result.exit_code == 2
    assert "[tool.portkit] strict must be true or false, got 'yes'" in result.output


def test_the_buggy_sibling_fails_without_strict(make_project, cli):
    root, _ = project(make_project, "sw_bug", READS_EXITED)
    result = cli(root, "check", "sw_bug", "--backend", "sim", "--no-compile")
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    assert "uninitialised value stored to global memory out[128]" in out
    assert "shared memory s[31]" in out
    assert "1 warning" in out  # the barrier, shown beside the error


def test_the_notebook_api_returns_the_warnings(make_project, monkeypatch):
    import portkit
    from portkit.api.sessions import forget

    root, line = project(make_project, "sw_api", EARLY_RETURN)
    monkeypatch.chdir(root)
    forget()
    try:
        report = portkit.sim("sw_api")
    finally:
        forget()
    assert report.passed
    (warning,) = report.warnings
    assert warning["kind"] == "barrier-after-exit" and warning["line"] == line
    assert "1 warning" in str(report) and "[barrier-after-exit]" in str(report)


def test_generated_pytest_items_emit_the_warnings(make_project, pytester):
    from tests.pytest_runs import pytest_runs
    from tests.test_plugin import plugin_args

    name = "sw_plug"
    py = "import numba\n" + unary_op(name, EARLY_RETURN, bound="True", cases=ONE_CASE)
    make_project({name: (py, None)}, at=pytester.path)
    args = [*plugin_args(), "prototypes", "-p", "no:cacheprovider", "-m", "sim", "-q"]
    # both runs in one fresh process (tests/pytest_runs.py): each its own session
    result, strict = pytest_runs(pytester, [*args, "-W", "always"], [*args, "--portkit-strict"])
    result.assert_outcomes(passed=1)
    text = result.stdout.str()
    assert "SimulatorWarning: [barrier-after-exit] kernel sw_plug_fwd" in text

    strict.assert_outcomes(failed=1)
    assert "reached by 1 of the block's 32 threads" in strict.stdout.str()
