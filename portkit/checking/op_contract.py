"""What an op declares about its comparisons, for one case: which inputs carry a
gradient, how each output and gradient is named, and which tolerance applies (the op's
declared ``tolerances``, else the dtype table). ``portkit check`` and ``portkit diff``
both read it, so they label and bound the same comparison the same way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from portkit.checking.compare import (
    REFERENCE_TOLERANCE,
    TWIN_TOLERANCE,
    Tolerance,
    identical,
    tolerance_for,
)
from portkit.errors import DtypeError
from portkit.project.dtypes import is_float
from portkit.project.tolerances import pick_tolerance
from portkit.torch_op.layout import no_gradient_inputs

if TYPE_CHECKING:
    import torch

    from portkit.project.cases import Case
    from portkit.project.discovery import Op


def no_gradient(op: Op, case: Case) -> dict[int, str]:
    """Float inputs without a gradient: position -> why."""
    if not op.definition.has_backward:
        return {}
    dtypes = case.dtypes
    found = no_gradient_inputs(op)
    return {i: why for i, why in found.items() if i < len(dtypes) and is_float(dtypes[i])}


def gradient_positions(op: Op, case: Case) -> list[int]:
    """The input position of each gradient compared, in order."""
    frozen = no_gradient(op, case)
    return [i for i, d in enumerate(case.dtypes) if is_float(d) and i not in frozen]


def differentiable(op: Op, case: Case, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Float inputs require grad, except those the op says carry none."""
    wanted = set(gradient_positions(op, case))
    return [t.detach().requires_grad_(i in wanted) for i, t in enumerate(inputs)]


def label(op: Op, grad: bool, position: int) -> str:
    """``output 0``, ``grad of input 2 (src)``."""
    return f"grad of {op.definition.input_label(position)}" if grad else f"output {position}"


def tolerance(
    op: Op, case: Case, grad: bool, position: int, against: str, dtype: torch.dtype
) -> Tolerance:
    """The op's declared tolerance for this comparison, else the dtype table's.
    ``against``: "reference", or any other name for a twin."""
    side = "reference" if against == "reference" else "twin"
    definition = op.definition
    names = definition.input_names
    declared = pick_tolerance(
        definition.tolerances,
        case=case.name,
        against=side,
        grad=grad,
        position=position,
        name=names[position] if grad and position < len(names) else None,
        dtype=str(dtype).removeprefix("torch."),
    )
    if declared is not None:
        return Tolerance(declared.rtol, declared.atol, declared.reason)
    return tolerance_for(REFERENCE_TOLERANCE if side == "reference" else TWIN_TOLERANCE, dtype)


def no_gradient_notes(op: Op, case: Case) -> list[str]:
    """Which float inputs have no gradient compared, and why."""
    return [
        f"{op.definition.input_label(i)}: no gradient ({why})"
        for i, why in sorted(no_gradient(op, case).items())
    ]


def require_reference_dtypes(
    op: Op, case: Case, name: str, outputs: Sequence, expected: Sequence
) -> None:
    """A reference and an implementation that return different dtypes break the
    contract (no tolerance can compare them): an OpDefinitionError, not a failed row."""
    for index, (a, e) in enumerate(zip(outputs, expected)):
        if a.dtype != e.dtype:
            raise DtypeError(
                f"op {op.name}, case {case.name}: output {index} of the {name} "
                f"implementation is {str(a.dtype)[6:]} but the reference returns "
                f"{str(e.dtype)[6:]}; cast in the reference or the launcher so they agree"
            )


def modified_inputs(
    inputs: Sequence[torch.Tensor], originals: Sequence[torch.Tensor], stage: str
) -> list[str]:
    """Inputs a kernel wrote (kernels must not write their inputs)."""
    return [
        f"input {i} was modified by the {stage} (kernels must not write their inputs)"
        for i, (t, o) in enumerate(zip(inputs, originals))
        if not identical(t.detach(), o)
    ]


def parameter_names(op: Op) -> dict[str, list[str]]:
    """Each kernel's parameter names, from its prototype (the twin has the same ones), so
    a guard violation can name the tensor."""
    import inspect

    names = {}
    for kernel, dispatcher in op.kernels.items():
        function = getattr(dispatcher, "py_func", None)
        if function is not None:
            names[kernel] = list(inspect.signature(function).parameters)
    return names
