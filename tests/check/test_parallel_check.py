"""``portkit check --all -j N``: the ops in worker processes, the same rows and exit code
as one process, a crashed worker a red row for its op, GPUs handed out round robin."""

from __future__ import annotations

import json

import pytest
import torch

from portkit.checking.parallel.gpus import worker_environment
from portkit.checking.parallel.handoff import OpRun, crashed, read_run, suite_order, write_run
from portkit.checking.parallel.pool import exit_status
from portkit.results import CheckResult, Outcome
from tests.conftest import run_portkit

KILL = "lambda x: __import__('os').kill(__import__('os').getpid(), 9)"


def rows(completed) -> list[tuple]:
    report = json.loads(completed.stdout)
    return [(r["op"], r["backend"], r["check"], r["case"], r["status"]) for r in report["results"]]


@pytest.fixture
def project(make_project, sources):
    twice = sources.unary_op("par_twice", cases=sources.SMALL_CASES)
    wrong = sources.unary_op("par_wrong", "out[i] = x[i] * 3.0", cases=sources.ONE_CASE)
    return make_project(
        {
            "par_twice": (twice, sources.unary_twin("par_twice")),
            "par_wrong": (wrong, sources.unary_twin("par_wrong", "out[i] = x[i] * T(3);")),
            "par_alone": (sources.unary_op("par_alone", cases=sources.ONE_CASE), None),
        }
    )


def test_two_jobs_give_the_rows_and_exit_code_of_one(project):
    one = run_portkit(project, "check", "--all", "--json", timeout=600)
    two = run_portkit(project, "check", "--all", "--json", "-j", "2", timeout=600)
    assert one.returncode == two.returncode == 1, two.stderr  # par_wrong fails
    assert rows(one) == rows(two)
    failed = {(op, backend) for op, backend, _, _, status in rows(two) if status == "fail"}
    wrong = {"sim", "twin-cpu"} | ({"numba", "twin"} if torch.cuda.is_available() else set())
    assert failed == {("par_wrong", backend) for backend in wrong}
    assert "checking (2 jobs)" in two.stderr  # the progress lines, one per unit of work
    assert two.stderr.count("checking (2 jobs) ") == one.stderr.count("checking ")


def test_a_requested_backend_that_cannot_run_still_exits_3(project):
    # par_alone has no twin: twin-cpu checks nothing, which the worker's account shows
    args = ("check", "par_alone", "--backend", "sim,twin-cpu", "--no-compile")
    one, two = run_portkit(project, *args), run_portkit(project, *args, "-j", "2")
    for done in (one, two):
        assert done.returncode == 3, done.stdout + done.stderr
        assert "not run: twin-cpu (" in done.stdout


def test_a_worker_that_dies_is_a_red_row_for_its_op_and_the_run_goes_on(make_project, sources):
    root = make_project(
        {
            "par_fine": (sources.unary_op("par_fine", cases=sources.ONE_CASE), None),
            "par_boom": (
                sources.unary_op("par_boom", reference=KILL, cases=sources.ONE_CASE),
                None,
            ),
            "par_late": (sources.unary_op("par_late", cases=sources.ONE_CASE), None),
        }
    )
    args = ("check", "--all", "--no-compile", "--json", "-v", "-j", "2")
    done = run_portkit(root, *args, timeout=600)
    assert done.returncode == 1, done.stderr
    got = rows(done)
    assert ("par_boom", "portkit", "worker", "all", "fail") in got
    for op in ("par_fine", "par_late"):  # checked, by the worker that replaced the dead one
        assert (op, "sim", "forward", "float32-n129", "pass") in got
    (row,) = [r for r in json.loads(done.stdout)["results"] if r["check"] == "worker"]
    assert "died (killed by SIGKILL)" in row["detail"]
    assert "Traceback" not in done.stderr
    # -v: each op's own engine counts, from the backends of its own worker run
    assert "par_late: sim: lockstep fallbacks: 0 of 1 launch(es)" in done.stderr


@pytest.mark.parametrize("jobs", ["0", "-1", "two"])
def test_jobs_below_one_is_a_usage_error(project, cli, jobs):
    result = cli(project, "check", "--all", "-j", jobs)
    assert result.exit_code == 2
    assert "Invalid value for '-j' / '--jobs'" in result.output


def test_two_jobs_with_seeds_give_the_rows_and_worst_margins_of_one(project):
    args = ("check", "par_twice", "par_alone", "--backend", "sim", "--no-compile", "--seeds", "3")
    one = run_portkit(project, *args, "--json", timeout=600)
    two = run_portkit(project, *args, "--json", "-j", "2", timeout=600)
    assert one.returncode == two.returncode == 0, two.stderr
    # One process runs the seeds round by round over the ops, the workers op by op.
    assert sorted(rows(one)) == sorted(rows(two)) and len(rows(two)) > 6
    worst = [json.loads(done.stdout)["worst_margins"] for done in (one, two)]
    assert worst[0] == worst[1]
    assert {(w["op"], w["check"]) for w in worst[1]} >= {("par_alone", "forward")}
    assert "worst margin per check over 3 seeds" in two.stderr


def test_jobs_with_sanitize_is_a_usage_error(project, cli):
    sanitize = cli(project, "check", "--all", "-j", "2", "--sanitize", "memcheck")
    assert sanitize.exit_code == 2 and "drop it with --sanitize" in sanitize.output


def test_workers_take_the_gpus_round_robin_and_share_the_cores():
    gpus = ["0", "1", "2", "3"]
    got = [worker_environment(k, 6, gpus, {})["CUDA_VISIBLE_DEVICES"] for k in range(6)]
    assert got == ["0", "1", "2", "3", "0", "1"]
    assert worker_environment(1, 2, ["5", "7"], {})["CUDA_VISIBLE_DEVICES"] == "7"
    cpu = worker_environment(0, 4, [], {"PATH": "/bin"}, cores=16)
    assert "CUDA_VISIBLE_DEVICES" not in cpu and cpu["PATH"] == "/bin"
    assert cpu["OMP_NUM_THREADS"] == "4"
    assert (
        worker_environment(0, 4, [], {"OMP_NUM_THREADS": "2"}, cores=16)["OMP_NUM_THREADS"] == "2"
    )
    assert worker_environment(0, 8, [], {}, cores=2)["OMP_NUM_THREADS"] == "1"


def row(op: str, case: str, backend: str = "sim", check: str = "forward") -> CheckResult:
    return CheckResult(op, case, backend, check, Outcome.PASS, "", 0.5, ({"kernel": "k"},), 0.25)


def test_rows_merge_in_the_order_of_one_process_and_survive_the_file(tmp_path):
    a = OpRun(
        "a",
        [
            row("a", "all", "numba", "compile sm_90"),
            row("a", "all", "torch", "gradcheck"),
            row("a", "n1"),
        ],
    )
    b = OpRun("b", [row("b", "all", "numba", "compile sm_90"), row("b", "n1"), row("b", "n2")])
    merged = suite_order([a, b])
    assert [(r.op, r.case, r.check) for r in merged] == [
        ("a", "all", "compile sm_90"),
        ("b", "all", "compile sm_90"),
        ("a", "all", "gradcheck"),
        ("a", "n1", "forward"),
        ("b", "n1", "forward"),
        ("b", "n2", "forward"),
    ]
    write_run(tmp_path / "a.json", a)
    assert read_run(tmp_path / "a.json") == a
    assert crashed("a", "why").failed


def test_exit_status_names_the_signal():
    assert exit_status(-9) == "killed by SIGKILL"
    assert exit_status(3) == "exit code 3"


def test_workers_share_one_verdict_store_with_phases(project, tmp_path, monkeypatch):
    monkeypatch.setenv("PORTKIT_VERDICT_CACHE", "1")  # tests/conftest.py turns it off
    # the CPU phase in two workers stores its verdicts; a rerun serves them all as cached
    store = tmp_path / "verdicts.json"
    args = ("check", "par_twice", "par_alone", "--json", "--phase", "cpu", "-j", "2")
    first = run_portkit(project, *args, "--verdicts", str(store), timeout=600)
    assert first.returncode == 0, first.stdout + first.stderr
    passed = [r for r in json.loads(first.stdout)["results"] if r["status"] == "pass"]
    assert passed and not any(r["cached"] for r in passed)
    kept = json.loads(store.read_text())["verdicts"]
    assert {entry["unit"].split(" / ")[0] for entry in kept.values()} == {"par_twice", "par_alone"}
    again = run_portkit(project, *args, "--verdicts", str(store), timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    served = [r for r in json.loads(again.stdout)["results"] if r["status"] == "pass"]
    assert len(served) == len(passed) and all(r["cached"] for r in served)
    assert [row[:4] for row in rows(again)] == [row[:4] for row in rows(first)]
    # no GPU backend ran in the CPU phase, in any worker (their rows: compiles and lint)
    gpu_rows = {check for _, backend, check, *_ in rows(first) if backend in ("numba", "twin")}
    assert gpu_rows and all(c.startswith(("compile", "signature", "lint")) for c in gpu_rows)


def test_a_verdicts_file_in_a_missing_folder_is_refused_before_workers_start(project, tmp_path):
    missing = tmp_path / "nope" / "verdicts.json"
    done = run_portkit(project, "check", "--all", "-j", "2", "--verdicts", str(missing))
    assert done.returncode == 2
    assert "does not exist" in done.stderr and "Traceback" not in done.stderr
