"""A cross-entropy op written from README.md and docs/authoring.md alone, the way a new
user would: an int64 target beside float logits, one block per row with a shared-memory
reduction, a float64 scratch output, a backward that returns None for the target.

It must pass `portkit check` on whatever the machine has (simulator and CPU twin here;
numba and the twin on a GPU), and a twin that gets the target wrong must fail it.
"""

from __future__ import annotations

from tests.user_ops.op_files import sources

PROTOTYPE, TWIN = sources("cross_entropy")


def test_cross_entropy_with_an_int64_target_passes_check(check_op):
    result, rows = check_op("cross_entropy")
    failed = [r for r in rows if r["status"] == "fail"]
    assert result.exit_code == 0, failed
    ran = {(r["backend"], r["check"]) for r in rows if r["status"] == "pass"}
    # The backward and gradcheck ran on the prototype (and the reference's own gradcheck):
    # the int64 target carries no gradient and is not gradchecked.
    assert {("sim", "backward"), ("sim", "gradcheck"), ("torch", "gradcheck")} <= ran


def test_a_twin_that_reads_the_wrong_target_fails_check(check_op):
    wrong = TWIN.replace("logits[row * cols + target[row]]", "logits[row * cols]")
    assert wrong != TWIN
    result, rows = check_op("cross_entropy", wrong)
    assert result.exit_code == 1
    failed = {(r["backend"], r["check"]) for r in rows if r["status"] == "fail"}
    # Against the reference on whichever twin this machine runs (twin-cpu or twin).
    assert failed & {("twin-cpu", "forward"), ("twin", "forward")}, failed
