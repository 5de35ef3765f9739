"""The checker draws a case's inputs once and hands every implementation its own copy."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from portkit.checking.harness import CaseRunner
from portkit.project.cases import Case, make_inputs


def test_each_implementation_gets_an_equal_fresh_copy() -> None:
    case = Case("float32-n129", ((129,), (129,)), "float32", seed=3)
    runner = CaseRunner(SimpleNamespace(name="add"), case)
    first = runner.inputs("cpu")
    for got, want in zip(first, make_inputs(case, "cpu")):
        assert torch.equal(got, want)
    first[0].fill_(0)  # an implementation that writes its input
    second = runner.inputs("cpu")
    assert torch.equal(second[0], make_inputs(case, "cpu")[0])
    assert second[0].data_ptr() != first[0].data_ptr()
