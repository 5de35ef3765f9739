"""``portkit diff`` and ``portkit check`` differentiate an implementation through one
path (``runtime/autograd_function.py``), so they cannot disagree about an op.

Before, diff ran ``launch/autograd.op_function``, which kept a non-tensor saved value
(an ``int`` here) aside and ran the op, while check's registered callable refused it
("a registered op saves tensors only"): diff reported "no difference" with values and
gradients for an op that check failed. Now both refuse it with the same message, and an
op that saves what its backward needs as a tensor gets the same values and gradients
from both.
"""

from __future__ import annotations

import pytest
import torch

from portkit.backends import create
from portkit.checking.case_runner import CaseRunner
from portkit.diffing.case_diff import run_side

PROTOTYPE = """\
import torch
from numba import cuda

import portkit

THREADS = 32


@cuda.jit
def {name}_fwd(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] * 2.0


@cuda.jit
def {name}_bwd(dy, dx, n):
    i = cuda.grid(1)
    if i < n:
        dx[i] = dy[i] * 2.0


@portkit.op(
    reference=lambda x: x * 2,
    cases=[portkit.cases.custom("float64-n33", [(33,)], dtype="float64")],
)
class Op:
    def forward(k, x):
        out = k.empty_like(x)
        n = x.numel()
        if n:
            k.{name}_fwd[portkit.cdiv(n, THREADS), THREADS](x, out, n)
        return out, ({saved},)

    def backward(k, saved, dy):
        (kept,) = saved
        n = {count}
        dx = k.empty_like(dy)
        if n:
            k.{name}_bwd[portkit.cdiv(n, THREADS), THREADS](dy, dx, n)
        return (dx,)
"""

REFUSED = "forward saves a int (saved item 0); a registered op saves tensors only"


@pytest.fixture
def saving(make_project, load_op):
    """``saving(name, saved, count)`` -> (op, case, the sim backend) for an op whose
    forward saves ``saved`` and whose backward finds the element count as ``count``."""

    def make(name: str, saved: str, count: str):
        source = PROTOTYPE.format(name=name, saved=saved, count=count)
        config, op = load_op(make_project({name: (source, None)}), name)
        return op, op.definition.cases[0], create("sim", config)

    return make


def test_a_saved_int_is_refused_by_diff_as_by_check(saving):
    op, case, sim = saving("ag_saves_int", saved="n", count="kept")

    runner = CaseRunner(op, case)
    assert runner.run_implementation(sim) is None
    (forward,) = [r for r in runner.results if r.check == "forward"]
    assert forward.failed and REFUSED in forward.detail

    side = run_side(op, case, sim)
    assert REFUSED in side.error  # before: no error, and the op's values
    assert side.error.splitlines()[0] in forward.detail  # the same message, word for word
    assert side.outputs == () and side.grads == ()


def test_a_saved_tensor_gives_diff_and_check_the_same_values_and_gradients(saving):
    op, case, sim = saving("ag_saves_tensor", saved="x", count="kept.numel()")

    run = CaseRunner(op, case).run_implementation(sim)
    side = run_side(op, case, sim)

    assert run is not None and not side.error
    assert len(side.outputs) == len(run.outputs) == 1
    assert len(side.grads) == len(run.grads) == 1
    for diffed, checked in zip(side.outputs + side.grads, run.outputs + run.grads):
        assert torch.equal(diffed, checked)
