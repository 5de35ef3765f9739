"""``registered_callable(op, implementation, kernels, namespace)``: bind one implementation's
kernels to its registered op ``<namespace>::<op>_<implementation>`` and return the callable
``portkit.load`` hands to a model (the checker uses the same one)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from portkit.errors import OpDefinitionError
from portkit.launch.op_inputs import input_rule
from portkit.runtime.autograd_function import Binding
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
    recorded launcher calls where the kernels can (``launch/replay``); the checker, whose
    kernels are guarded, has no use for it."""
    definition = op.definition
    forward, backward = definition.forward, definition.backward
    check = input_check(op, kernels.device)
    layout = op_layout(op)
    run_eager = None  # the compiled replayer's whole eager call, where the forward has one
    if replay != "off":
        from portkit.launch.replay.launcher import ReplayingLauncher, replaying

        # Without the author's check_inputs the input check reads metadata only, which a
        # replay's key holds: the replaying forward runs it on the calls it does not replay.
        moved = check if definition.check_inputs is None else None
        forward = replaying(
            forward,
            kernels,
            flat=True,
            check=moved,
            outputs=layout.outputs,
            mode=replay,
            saved=layout.saved,
        )
        backward = replaying(backward, kernels, flat=False, mode=replay)
        if moved is not None and isinstance(forward, ReplayingLauncher):
            check = _checked_by_the_forward
            run_eager = forward.run_eager
    binding = Binding(forward, backward, kernels, check, OpDefinitionError)
    qualname = qualified_name(namespace, op.name, kernels.implementation)
    registered = register(qualname, layout, list(op.kernels), binding, define_now)
    if run_eager is not None:
        from portkit.runtime.eager_replay import ReplayedOpCallable

        return ReplayedOpCallable(registered, binding, run_eager)
    return OpCallable(registered, binding)


def input_check(op: Op, device: str) -> Callable[[Sequence[Any]], None]:
    """The runtime's op-level input check (``runtime/op_inputs.py``, an exported package's
    too) for ``op`` on ``device``, the author's ``check_inputs`` after it."""
    from portkit.runtime.op_inputs import input_check as runtime_input_check

    return runtime_input_check(input_rule(op, device), op.definition.check_inputs)


def _checked_by_the_forward(inputs: Sequence[Any]) -> None:
    """The binding's check where the replaying forward runs the real one itself."""
