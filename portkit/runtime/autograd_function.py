"""The one ``torch.autograd.Function`` built from an op's launchers.

``portkit check``, ``portkit diff``, the counting and reversed-schedule runs and
``portkit.load`` all differentiate an implementation through ``eager_function``: it
runs ``forward(k, ...)``, keeps what it saved and, on ``.backward()``, runs
``backward(k, saved, ...)``. One rule for what ``forward`` saves holds everywhere:
tensors only, as the registered op needs; ``split_forward`` refuses anything else on
every call, so no path can accept an op that another refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from .kernels_protocol import Kernels


def as_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


@dataclass(frozen=True)
class OpLayout:
    """What the launchers take and give, found once by running them on meta tensors."""

    input_types: tuple[str, ...]  # schema type per input: Tensor, float, int, bool
    outputs: int
    saved: tuple[tuple[str, int], ...]  # per saved item: (kind, index in inputs/outputs/extras)
    grads: tuple[bool, ...]  # per input: does backward return a tensor there
    has_backward: bool

    @property
    def extras(self) -> int:
        return sum(1 for kind, _ in self.saved if kind == "extra")

    def forward_schema(self) -> str:
        params = ", ".join(f"{t} a{i}" for i, t in enumerate(self.input_types))
        return f"({params}) -> {_returns(self.outputs + self.extras)}"

    def backward_schema(self) -> str:
        saved = [f"Tensor s{i}" for i in range(len(self.saved))]
        grads = [f"Tensor g{i}" for i in range(self.outputs)]
        return f"({', '.join(saved + grads)}) -> {_returns(sum(self.grads))}"


def _returns(count: int) -> str:
    return "Tensor" if count == 1 else "(" + ", ".join(["Tensor"] * count) + ")"


@dataclass
class Binding:
    """The launchers and kernels the registered op runs (rebound when an op is loaded again
    in the same process, e.g. by the checker with poisoned outputs)."""

    forward: Callable
    backward: Callable | None
    kernels: Kernels  # the k the launchers run on (declared: kernels_protocol.py)
    check: Callable[[Sequence[Any]], None]
    error: type[Exception]


def forward_pair(name: str, result: Any, error: type[Exception]) -> tuple[Any, Any]:
    """A forward launcher's ``(outputs, saved)``, or ``error`` saying the contract."""
    if not (isinstance(result, tuple) and len(result) == 2):
        raise error(f"op {name}: forward must return (outputs, saved_for_backward)")
    return result[0], result[1]


def split_forward(
    name: str, layout: OpLayout, inputs: Sequence[Any], result: Any, error: type[Exception]
) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """(outputs, extras) of a forward launcher's ``(outputs, saved)``, checked against the
    layout found at registration (a launcher that saves different things per call cannot
    be a registered op)."""
    outputs, saved = (as_tuple(part) for part in forward_pair(name, result, error))
    if len(outputs) != layout.outputs or len(saved) != len(layout.saved):
        raise error(
            f"op {name}: forward returned {len(outputs)} outputs and {len(saved)} saved values; "
            f"at registration it returned {layout.outputs} and {len(layout.saved)}"
        )
    extras = []
    for position, ((kind, index), value) in enumerate(zip(layout.saved, saved)):
        if kind == "input":
            same = value is inputs[index]
        elif kind == "output":
            same = value is outputs[index]
        else:
            same = isinstance(value, torch.Tensor)
            extras.append(value)
        if not same:
            raise error(
                f"op {name}: saved value {position} is not the {kind} it was at registration"
            )
    return outputs, tuple(extras)


def check_gradients(name: str, layout: OpLayout, result: tuple, error: type[Exception]) -> None:
    if len(result) != len(layout.grads):
        raise error(
            f"op {name}: backward returned {len(result)} gradient(s), expected "
            f"{len(layout.grads)} (one per input of the forward)"
        )


def eager_function(name: str, layout: OpLayout, binding: Binding) -> type[torch.autograd.Function]:
    """The op as a ``torch.autograd.Function`` running ``binding``'s launchers on its
    kernels: the inputs checked, the saved tensors checked against ``layout``, and a
    gradient only where ``layout.grads`` says backward gives one."""

    class EagerFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *inputs: Any) -> Any:
            binding.check(inputs)
            result = binding.forward(binding.kernels, *inputs)
            outputs, _ = split_forward(name, layout, inputs, result, binding.error)
            ctx.save_for_backward(*as_tuple(result[1]))  # tensors (split_forward checked)
            if not layout.has_backward:  # as the registered op: outputs need no grad
                ctx.mark_non_differentiable(*outputs)
            return outputs if len(outputs) > 1 else outputs[0]

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx: Any, *grads: Any) -> Any:
            return backward_gradients(ctx.saved_tensors, *grads)

    backward_gradients = eager_backward(name, layout, binding)
    return EagerFunction


def eager_backward(name: str, layout: OpLayout, binding: Binding) -> Callable[..., tuple]:
    """``f(saved, *grads)``: the gradient per input (None where ``layout.grads`` says
    backward gives none) from ``binding``'s backward launcher; ``EagerFunction``'s
    backward, and the compiled replayer's where it cannot replay (eager_replay.py)."""

    def backward(saved: tuple, *grads: Any) -> tuple:
        if binding.backward is None:
            raise binding.error(f"op {name} has no backward")
        # Autograd materialises a missing gradient as zeros (set_materialize_grads is
        # on by default), so every g is a tensor; kernels want C order.
        grads = tuple(g.contiguous() for g in grads)
        result = as_tuple(binding.backward(binding.kernels, saved, *grads))
        check_gradients(name, layout, result, binding.error)
        return tuple(r if wanted else None for r, wanted in zip(result, layout.grads))

    return backward
