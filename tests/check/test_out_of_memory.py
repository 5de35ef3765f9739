"""A case that runs its machine out of memory is a failed row naming that, and the other
backends of the case still run: no traceback (the 2^31-element case did this on an H100
before its figures were computed in slices)."""

from __future__ import annotations

import pytest
import torch

from portkit.backends import create
from portkit.checking.case_runner import CaseRunner
from portkit.checking.harness import run_case
from portkit.results import Outcome

CASE = '[portkit.cases.custom("float32-n129", [(129,)], seed=7)]'


@pytest.mark.parametrize("error", [torch.OutOfMemoryError, MemoryError])
def test_out_of_memory_is_a_failed_row_and_the_case_goes_on(
    make_project, sources, load_op, monkeypatch, error
) -> None:
    name = f"oom_{error.__name__.lower()}"
    root = make_project({name: (sources.unary_op(name, "out[i] = x[i] * 2.0", cases=CASE), None)})
    config, op = load_op(root, name)
    (case,) = op.definition.cases
    real = CaseRunner.compare_all
    calls = []

    def compare_all(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:  # the first implementation's comparison runs out
            raise error("CUDA out of memory. Tried to allocate 16.00 GiB.\nmore text")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(CaseRunner, "compare_all", compare_all)
    backends = [create(n, config) for n in ("torch", "sim", "numba-sim")]
    results = run_case(op, case, backends)
    rows = {(r.backend, r.check): r for r in results}
    failed = rows[("sim", "forward")]
    assert failed.status is Outcome.FAIL
    assert failed.detail.startswith(
        "ran out of memory: CUDA out of memory. Tried to allocate 16.00 GiB."
    ), failed.detail
    assert "--case" in failed.detail and "more text" not in failed.detail
    assert rows[("numba-sim", "forward")].status is Outcome.PASS, results  # the case went on
