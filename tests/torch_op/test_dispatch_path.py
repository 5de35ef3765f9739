"""A call through ``torch.ops`` reaches the op's own Autograd kernel: in plain eager it
runs the op at once (through ``eager_forward``, the compiled replayer's call, where there
is one), with no ``custom_op`` layers; a gradient, a mode or a subclass gets the
redispatching path, whose results autograd and FakeTensorMode see as before."""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from portkit.runtime.registration import Binding, FakeKernels, OpLayout, register

LAYOUT = OpLayout(("Tensor",), 1, (("input", 0),), (True,), True)


def _forward(k, x):
    return x * 2, (x,)


def _no_check(inputs) -> None:
    return None


def _backward(k, saved, g):
    return (g * 2,)


def test_plain_eager_through_torch_ops_takes_the_eager_forward_only_when_unwatched() -> None:
    op = register(
        "pkdispatch::double",
        LAYOUT,
        ["k"],
        Binding(_forward, _backward, FakeKernels("double", "cpu", ["k"]), _no_check, RuntimeError),
    )
    assert "pkdispatch::double" not in torch._library.custom_ops.OPDEFS  # not a custom_op
    seen = []
    op.eager_forward = lambda inputs: seen.append(inputs) or inputs[0] * 5
    x = torch.arange(3.0)
    assert torch.equal(torch.ops.pkdispatch.double(x), x * 5) and len(seen) == 1
    op.eager_forward = lambda inputs: None  # a miss: the op's own kernel runs
    assert torch.equal(torch.ops.pkdispatch.double(x), x * 2)
    op.eager_forward = lambda inputs: inputs[0]  # an alias of the input is cloned
    out = torch.ops.pkdispatch.double(x)
    assert torch.equal(out, x) and out.data_ptr() != x.data_ptr()
    # Asked with a gradient wanted too (the compiled replayer's node serves it there);
    # a None then takes the autograd Function.
    op.eager_forward = lambda inputs: (
        None
        if inputs[0].requires_grad and torch.is_grad_enabled()
        else seen.append(inputs) or inputs[0] * 5
    )
    xg = x.clone().requires_grad_()
    y = torch.ops.pkdispatch.double(xg)  # a gradient, declined: the autograd Function
    y.sum().backward()
    assert torch.equal(y.detach(), x * 2) and torch.equal(xg.grad, torch.full((3,), 2.0))
    with FakeTensorMode() as mode:  # watched: the fake kernel, nothing launched
        fake = torch.ops.pkdispatch.double(mode.from_tensor(x))
    assert fake.shape == (3,)
    with torch.no_grad():
        assert torch.equal(torch.ops.pkdispatch.double(xg), x * 5)
    assert len(seen) == 2
