"""An op's input rule as the runtime checks it (``runtime/op_inputs.py``), and ``as_tuple``.

The implementation itself, differentiable, is ``portkit.torch_op.load.registered_callable``
(one autograd path, ``runtime/autograd_function.py``, for check, diff and
``portkit.load``); ``check_inputs`` here is the slow path that explains a refused input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from portkit.project.discovery import Op
    from portkit.runtime.op_inputs import InputRule


def as_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def input_rule(op: Op, device: str) -> InputRule:
    """What ``op`` declares about its tensor inputs, for an implementation on ``device``."""
    from portkit.runtime.op_inputs import InputRule

    definition = op.definition
    return InputRule(
        op.name,
        tuple(definition.dtypes),
        tuple(definition.input_dtypes),
        definition.same_shape,
        device,
    )


def check_inputs(op: Op, inputs: Sequence[Any], device: str) -> None:
    """The op-level checks: device, dtype, contiguity, shapes, then the op's own rule."""
    from portkit.runtime.op_inputs import refuse_inputs

    refuse_inputs(input_rule(op, device), inputs)
    if op.definition.check_inputs is not None:
        op.definition.check_inputs(*inputs)
