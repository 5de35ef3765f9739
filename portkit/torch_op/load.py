"""``registered_callable(op, implementation, kernels, namespace)``: bind one implementation's
kernels to its registered op ``<namespace>::<op>_<implementation>`` and return the callable
``portkit.load`` hands to a model (the checker uses the same one)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from portkit.errors import OpDefinitionError
from portkit.launch.autograd import check_inputs
from portkit.torch_op.layout import op_layout
from portkit.torch_op.registration import Binding, OpCallable, register

if TYPE_CHECKING:
    from portkit.launch.kernel_set import KernelSet
    from portkit.project.discovery import Op


def qualified_name(namespace: str, op: str, implementation: str) -> str:
    """``portkit::sigmoid_twin``; characters an operator name cannot hold become ``_``."""
    return f"{namespace}::" + re.sub(r"\W", "_", f"{op}_{implementation}")


def registered_callable(op: Op, kernels: KernelSet, namespace: str) -> OpCallable:
    definition = op.definition

    def check(inputs: Sequence[Any]) -> None:
        check_inputs(op, inputs, kernels.device)

    binding = Binding(definition.forward, definition.backward, kernels, check, OpDefinitionError)
    qualname = qualified_name(namespace, op.name, kernels.implementation)
    registered = register(qualname, op_layout(op), list(op.kernels), binding)
    return OpCallable(registered, binding)
