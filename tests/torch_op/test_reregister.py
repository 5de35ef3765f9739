"""An op loaded again in one process (a resident session after an edit) is registered
again: rebound when its layout is the same, defined anew when it changed."""

from __future__ import annotations

import torch

from portkit.runtime.registration import Binding, FakeKernels, OpLayout, register


def _binding(forward) -> Binding:
    k = FakeKernels("f", "cpu", ["k"])  # launches nothing: the launchers here compute
    return Binding(forward, None, k, lambda args: None, RuntimeError)


def test_an_edited_op_with_another_schema_is_defined_anew() -> None:
    one = OpLayout(("Tensor",), 1, (), (False,), False)
    register("pkreload::f", one, ["k"], _binding(lambda k, x: ((x * 2,), ())))
    x, y = torch.arange(3.0), torch.full((3,), 5.0)
    assert torch.equal(torch.ops.pkreload.f(x), x * 2)
    register("pkreload::f", one, ["k"], _binding(lambda k, x: ((x * 3,), ())))
    assert torch.equal(torch.ops.pkreload.f(x), x * 3)  # rebound: the new launcher runs
    two = OpLayout(("Tensor", "Tensor"), 1, (), (False, False), False)
    again = register("pkreload::f", two, ["k"], _binding(lambda k, x, y: ((x * y,), ())))
    assert again.layout == two
    assert torch.equal(torch.ops.pkreload.f(x, y), x * y)


def test_an_op_not_defined_yet_is_replaced_without_defining_it() -> None:
    one = OpLayout(("Tensor",), 1, (), (False,), False)
    first = register("pkreload::lazy", one, ["k"], _binding(None), define_now=False)
    two = OpLayout(("Tensor", "float"), 1, (), (False, False), False)
    second = register("pkreload::lazy", two, ["k"], _binding(None), define_now=False)
    assert second is not first and not second.defined
