"""A backward may return one tensor as the gradient of two inputs (add_rmsnorm's d/dx and
d/dresidual, as torch's own add backward does): each input still gets a gradient of its
own, through the eager path and through the registered op."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import portkit
from portkit.project.session import Session

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def add_rmsnorm(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(REPO)
    return portkit.load("add_rmsnorm", "sim")


def _inputs(seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g).requires_grad_() for shape in ((3, 40), (3, 40), (40,))]


def test_the_launcher_returns_one_tensor_for_both_inputs() -> None:
    from portkit.project.tuning_table import declared_choice
    from portkit.runtime.registration import FakeKernels

    op = Session.from_environment(REPO).op("add_rmsnorm")
    x, residual, w = (t.detach() for t in _inputs())
    k = FakeKernels("add_rmsnorm", torch.device("cpu"), list(op.kernels), declared_choice(op))
    _, saved = op.definition.forward(k, x, residual, w)
    dx, dres, _ = op.definition.backward(k, saved, torch.ones_like(x), torch.ones_like(x))
    assert dx is dres


def _grads_are_distinct(x: torch.Tensor, residual: torch.Tensor) -> None:
    assert x.grad is not None and residual.grad is not None
    torch.testing.assert_close(x.grad, residual.grad, rtol=0, atol=0)
    assert x.grad.data_ptr() != residual.grad.data_ptr()
    before = residual.grad.clone()
    x.grad.add_(1.0)
    torch.testing.assert_close(residual.grad, before, rtol=0, atol=0)


def test_eager_path_gives_each_input_its_own_gradient(add_rmsnorm) -> None:
    x, residual, w = _inputs()
    y, h = add_rmsnorm(x, residual, w)
    (y.sum() + 2 * h.sum()).backward()
    _grads_are_distinct(x, residual)


def test_registered_op_gives_each_input_its_own_gradient(add_rmsnorm) -> None:
    x, residual, w = _inputs(1)
    y, h, *_ = add_rmsnorm.op(x, residual, w)
    (y.sum() + 2 * h.sum()).backward()
    eager = _inputs(1)
    y, h = add_rmsnorm(*eager)
    (y.sum() + 2 * h.sum()).backward()
    torch.testing.assert_close(x.grad, eager[0].grad)
    _grads_are_distinct(x, residual)


def test_opcheck_accepts_the_shared_gradient(add_rmsnorm) -> None:
    result = torch.library.opcheck(add_rmsnorm.op, _inputs(2))
    assert set(result.values()) == {"SUCCESS"}, result
