"""``registered_callable(op, implementation, kernels, namespace)``: bind one implementation's
kernels to its registered op ``<namespace>::<op>_<implementation>`` and return the callable
``portkit.load`` hands to a model (the checker uses the same one)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from portkit.errors import OpDefinitionError
from portkit.launch.op_inputs import input_rule
from portkit.runtime.autograd_function import Binding
from portkit.runtime.op_inputs import input_check
from portkit.runtime.registration import OpCallable, register
from portkit.torch_op.layout import op_layout

if TYPE_CHECKING:
    from portkit.launch.kernel_set import KernelSet
    from portkit.project.discovery import Op


def qualified_name(namespace: str, op: str, implementation: str) -> str:
    """``portkit::sigmoid_twin``; characters an operator name cannot hold become ``_``."""
    return f"{namespace}::" + re.sub(r"\W", "_", f"{op}_{implementation}")


def registered_callable(
    op: Op, kernels: KernelSet, namespace: str, define_now: bool = True, replay: str = "off"
) -> OpCallable:
    """``define_now=False`` leaves the torch.library definition to the first call that
    needs it (the checker runs eagerly and registers a dozen implementations).
    ``replay`` "auto" or "python" (``portkit.load``, from the session's settings) replays
    recorded launcher calls where the kernels can (``runtime/replaying.py``); the
    checker, whose kernels are guarded, has no use for it."""
    definition = op.definition
    forward, backward = definition.forward, definition.backward
    # the runtime's op-level input check (an exported package's too), check_inputs after it
    check = input_check(input_rule(op, kernels.device), definition.check_inputs)
    layout = op_layout(op)
    if replay != "off" and replays_launches(kernels):
        from portkit.runtime.replaying import replayed

        custom = definition.check_inputs is not None
        forward, backward, check = replayed(
            forward, backward, kernels, check, custom, layout, replay, "portkit"
        )
    binding = Binding(forward, backward, kernels, check, OpDefinitionError)
    qualname = qualified_name(namespace, op.name, kernels.implementation)
    registered = register(qualname, layout, list(op.kernels), binding, define_now)
    if replay == "off":
        return OpCallable(registered, binding)
    from portkit.runtime.eager_replay import op_callable

    return op_callable(registered, binding)


def replays_launches(kernels: KernelSet) -> bool:
    """Whether every target of ``kernels`` can repeat its launches (the twin's can)."""
    return all(t.has_plain_launch and t.has_replay_step for t in kernels.targets.values())
