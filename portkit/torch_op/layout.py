"""Find an op's ``OpLayout`` by running its launchers once on meta tensors.

The schema of the registered op (how many inputs of which type, how many outputs, which
saved tensors are inputs, outputs or intermediates, which inputs get a gradient) is read
from the launchers themselves on the op's first case, so an author writes no schema and
no shape function. Kernels do not launch; ``k.empty*`` allocate meta tensors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from portkit.errors import BackwardContractError, OpDefinitionError
from portkit.launch.trace import launched
from portkit.project.cases import make_grad_outputs, make_inputs
from portkit.project.op_content import by_op_content
from portkit.project.tuning_table import declared_choice
from portkit.runtime.autograd_function import OpLayout, as_tuple, forward_pair
from portkit.runtime.registration import FakeKernels

if TYPE_CHECKING:
    from portkit.project.discovery import Op

SCALAR_SCHEMA_TYPES = ((bool, "bool"), (int, "int"), (float, "float"))


def schema_type(value: Any, op: str, position: int) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        return "Tensor"
    for python_type, name in SCALAR_SCHEMA_TYPES:  # bool first: it is an int too
        if isinstance(value, python_type):
            return name
    raise OpDefinitionError(
        f"op {op}: input {position} is a {type(value).__name__}; a registered op takes "
        f"tensors, bools, ints and floats"
    )


@by_op_content()  # bounded, keyed by content: an edited op is not kept alive
def op_layout(op: Op) -> OpLayout:
    import torch

    cases = op.definition.cases
    case = next((c for c in cases if c.numel), cases[0])
    inputs = [t.to("meta") for t in make_inputs(case, "cpu")] + list(case.extra)
    input_types = tuple(schema_type(v, op.name, i) for i, v in enumerate(inputs))
    k = FakeKernels(op.name, torch.device("meta"), list(op.kernels))
    k.knob_choice = declared_choice(op)  # the defaults: launches do nothing, shapes count
    result = launched(op, case, "forward", lambda: op.definition.forward(k, *inputs))
    outputs, saved = (as_tuple(part) for part in forward_pair(op.name, result, OpDefinitionError))
    if not outputs or not all(isinstance(o, torch.Tensor) for o in outputs):
        raise OpDefinitionError(f"op {op.name}: forward's outputs must be tensors")
    layout_saved = []
    extras = 0
    for position, value in enumerate(saved):
        if not isinstance(value, torch.Tensor):
            raise OpDefinitionError(
                f"op {op.name}: forward saves a {type(value).__name__} (saved item {position}); "
                f"a registered op saves tensors only: save a tensor or recompute it in backward"
            )
        if any(value is i for i in inputs):
            layout_saved.append(("input", next(n for n, i in enumerate(inputs) if i is value)))
        elif any(value is o for o in outputs):
            layout_saved.append(("output", next(n for n, o in enumerate(outputs) if o is value)))
        else:
            layout_saved.append(("extra", extras))
            extras += 1
    grads: tuple[bool, ...] = (False,) * len(inputs)
    backward = op.definition.backward
    if backward is not None:
        grad_outputs = make_grad_outputs(case, outputs)  # created on the CPU, moved to meta
        returned = as_tuple(
            launched(op, case, "backward", lambda: backward(k, tuple(saved), *grad_outputs))
        )
        if len(returned) != len(inputs):
            raise BackwardContractError.gradient_count(op.name, len(returned), len(inputs))
        frozen = op.definition.no_grad_positions
        grads = tuple(
            isinstance(g, torch.Tensor) and isinstance(i, torch.Tensor) and n not in frozen
            for n, (g, i) in enumerate(zip(returned, inputs))
        )
    return OpLayout(input_types, len(outputs), tuple(layout_saved), grads, backward is not None)


def no_gradient_inputs(op: Op) -> dict[int, str]:
    """Tensor inputs of an op with a backward that get no gradient, position -> why:
    declared with ``no_grad=``, or the backward returns None for them. A layout that
    cannot be found leaves the declared ones (the implementation's run reports why)."""
    found = {i: "declared no_grad" for i in op.definition.no_grad_positions}
    try:
        layout = op_layout(op)
    except Exception:  # noqa: BLE001 (reported where the op is registered)
        return found
    for i, (kind, wanted) in enumerate(zip(layout.input_types, layout.grads)):
        if kind == "Tensor" and not wanted:
            found.setdefault(i, "its backward returns None")
    return found
