"""A cross-entropy op written from README.md and docs/authoring.md alone, the way a new
user would: an int64 target beside float logits, one block per row with a shared-memory
reduction, a float64 scratch output, a backward that returns None for the target.

It must pass `portkit check` on whatever the machine has (simulator and CPU twin here;
numba and the twin on a GPU), and a twin that gets the target wrong must fail it.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent
PROTOTYPE = (HERE / "cross_entropy_prototype.py").read_text()
TWIN = (HERE / "cross_entropy_twin.cu").read_text()


def check(make_project, cli, twin: str):
    root = make_project({"cross_entropy": (PROTOTYPE, twin)})
    result = cli(root, "check", "cross_entropy", "--json")
    return result, json.loads(result.output[result.output.index("{") :])["results"]


def test_cross_entropy_with_an_int64_target_passes_check(make_project, cli):
    result, rows = check(make_project, cli, TWIN)
    failed = [r for r in rows if r["status"] == "fail"]
    assert result.exit_code == 0, failed
    ran = {(r["backend"], r["check"]) for r in rows if r["status"] == "pass"}
    # The backward and gradcheck ran on the prototype (and the reference's own gradcheck):
    # the int64 target carries no gradient and is not gradchecked.
    assert {("sim", "backward"), ("sim", "gradcheck"), ("torch", "gradcheck")} <= ran


def test_a_twin_that_reads_the_wrong_target_fails_check(make_project, cli):
    wrong = TWIN.replace("logits[row * cols + target[row]]", "logits[row * cols]")
    assert wrong != TWIN
    result, rows = check(make_project, cli, wrong)
    assert result.exit_code == 1
    failed = {(r["backend"], r["check"]) for r in rows if r["status"] == "fail"}
    # Against the reference on whichever twin this machine runs (twin-cpu or twin).
    assert failed & {("twin-cpu", "forward"), ("twin", "forward")}, failed
