"""What an op's PyTorch reference says for one case: outputs and input gradients.

For float16 and bfloat16 inputs the reference runs on float32 copies (on float64 ones for
an op declaring ``reference_in="float64"``) and its outputs and gradients are rounded once
to the native dtypes. That is what a kernel that computes in
float32 (or float64) and stores in half precision returns; torch's own half-precision
kernels round some intermediates (a layernorm weight gradient summed over rows in
bfloat16 is off by several ULPs on the CPU), so they are not the bound to hold a kernel
to. A native run still decides the output dtypes and the seeded upstream gradients.
``portkit check`` and ``portkit diff`` both use it, so they agree on what is right.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from portkit.checking.control import low_precision
from portkit.errors import ReferenceFailure, raised
from portkit.launch.op_inputs import as_tuple
from portkit.project.cases import make_grad_outputs

if TYPE_CHECKING:
    import torch

    from portkit.project.cases import Case
    from portkit.project.discovery import Op


def _widened(dtype: torch.dtype, reference_in: str | None) -> torch.dtype:
    """The dtype the reference computes an input of ``dtype`` in."""
    import torch

    if not dtype.is_floating_point:
        return dtype
    if reference_in is not None:
        wide = getattr(torch, reference_in)
        return wide if dtype.itemsize < wide.itemsize else dtype
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def reference_run(
    op: Op, case: Case, inputs: Sequence[torch.Tensor], backward: bool
) -> tuple[tuple[torch.Tensor, ...], tuple]:
    """Reference outputs (detached) and, if ``backward``, the gradients of the inputs
    that require them. ``inputs`` are the case's tensors, floats requiring grad.
    Raises ``ReferenceFailure`` when the reference (or its autograd) raises: the
    reference's bug, never an implementation's."""
    stage = ["forward"]
    try:
        return _run(op, case, inputs, backward, stage)
    except Exception as exc:
        raise _failure(op, exc, stage[0]) from exc


def _failure(op: Op, exc: Exception, stage: str) -> ReferenceFailure:
    """One line: what the reference raised and where, at the deepest frame in the op's
    prototype file (a torch function's internals are not where the mistake is)."""
    text, site = raised(exc, op.prototype_path)
    what = "the reference" if stage == "forward" else "the reference's autograd"
    return ReferenceFailure(f"op {op.name}: {what} raised {text}", stage, site)


def _run(
    op: Op, case: Case, inputs: Sequence[torch.Tensor], backward: bool, stage: list[str]
) -> tuple[tuple[torch.Tensor, ...], tuple]:
    definition = op.definition
    native = as_tuple(definition.reference(*inputs, *case.extra))
    widen = [_widened(t.dtype, definition.reference_in) for t in inputs]
    if all(w == t.dtype for w, t in zip(widen, inputs)):
        grads: tuple = ()
        if backward:
            stage[0] = "backward"
            grads = _grads(case, native, native, inputs)
        return tuple(o.detach() for o in native), grads
    wide = [
        t.detach().to(w).requires_grad_(t.requires_grad) if w != t.dtype else t
        for t, w in zip(inputs, widen)
    ]
    outputs = as_tuple(definition.reference(*wide, *case.extra))
    rounded = tuple(o.detach().to(n.dtype) for o, n in zip(outputs, native))
    if not backward:
        return rounded, ()
    stage[0] = "backward"
    grads = _grads(case, native, outputs, wide)
    return rounded, tuple(
        g.to(t.dtype) if g is not None else None
        for g, t in zip(grads, [t for t in inputs if t.requires_grad])
    )


def _grads(case: Case, native: Sequence, outputs: Sequence, inputs: Sequence) -> tuple:
    """Gradients of ``outputs`` for the upstream gradients seeded from the native outputs."""
    import torch

    grad_outputs = [g.to(o.dtype) for g, o in zip(make_grad_outputs(case, native), outputs)]
    wanted = [t for t in inputs if t.requires_grad]
    grads = torch.autograd.grad(outputs, wanted, grad_outputs, allow_unused=True)
    return tuple(g.detach() if g is not None else None for g in grads)


@dataclass(frozen=True)
class ControlRuns:
    """The reference in float64 (``wide``: outputs and gradients unrounded) and in the
    precision the kernels compute in (``low``: rounded to the native dtypes), for the
    measured control (checking/control.py). ``low_dtype`` is the low run's float dtype."""

    wide_outputs: tuple
    wide_grads: tuple
    low_outputs: tuple
    low_grads: tuple
    low_dtype: torch.dtype
    # What the comparisons derive from these runs alone (tensor_check.Control.bound), kept
    # for every implementation compared against them.
    memo: dict = field(default_factory=dict, compare=False, repr=False)


def control_run(op: Op, case: Case, inputs: Sequence[torch.Tensor], backward: bool) -> ControlRuns:
    """Two more runs of the reference for the control; raises what the reference raises
    (the caller falls back to the dtype table: a reference that cannot run in float64)."""
    import torch

    native = as_tuple(op.definition.reference(*inputs, *case.extra))
    floats = [t.dtype for t in inputs if t.dtype.is_floating_point]
    low_dtype = low_precision(floats[0]) if floats else torch.float32
    wide = _copy_run(op, case, inputs, native, backward, lambda d: torch.float64)
    wide_outputs, wide_grads = wide
    low_outputs, low_grads = _rounded(
        _copy_run(op, case, inputs, native, backward, low_precision), native, inputs
    )
    if any(t.device.type != "cpu" for t in inputs):
        # torch's error is its worst over the CPU and this device: a GPU's reference can
        # sum in a more accurate order than the CPU's (a tree where the CPU runs a loop),
        # and a correct kernel summing as the CPU does would then sit near the bound.
        try:
            cpu = _copy_run(op, case, inputs, native, backward, low_precision, device="cpu")
        except Exception:  # noqa: BLE001 (a reference for one device only: the device's run stands)
            cpu = None
        if cpu is not None:
            cpu_outputs, cpu_grads = _rounded(cpu, native, inputs)
            low_outputs = tuple(map(farther, low_outputs, cpu_outputs, wide_outputs))
            low_grads = tuple(map(farther, low_grads, cpu_grads, wide_grads))
    return ControlRuns(wide_outputs, wide_grads, low_outputs, low_grads, low_dtype)


def _copy_run(
    op: Op,
    case: Case,
    inputs: Sequence[torch.Tensor],
    native: Sequence,
    backward: bool,
    dtype_of: Callable[[torch.dtype], torch.dtype],
    device: str | None = None,
) -> tuple[tuple, tuple]:
    """The reference on copies of ``inputs`` (floats in ``dtype_of`` their dtype, on
    ``device`` where given): its outputs, and the gradients seeded from ``native``."""
    copies = [
        t.detach().to(device or t.device).to(dtype_of(t.dtype)).requires_grad_(t.requires_grad)
        if t.dtype.is_floating_point
        else t.detach().to(device or t.device)
        for t in inputs
    ]
    outputs = as_tuple(op.definition.reference(*copies, *case.extra))
    seeds = [n.detach().to(device or n.device) for n in native]
    grads = _grads(case, seeds, outputs, copies) if backward else ()
    return tuple(o.detach() for o in outputs), grads


def _rounded(
    run: tuple[tuple, tuple], native: Sequence, inputs: Sequence[torch.Tensor]
) -> tuple[tuple, tuple]:
    """A low-precision run's outputs and gradients in the native dtypes."""
    outputs, grads = run
    wanted = [t for t in inputs if t.requires_grad]
    return (
        tuple(o.to(n.dtype) for o, n in zip(outputs, native)),
        tuple(g.to(t.dtype) if g is not None else None for g, t in zip(grads, wanted)),
    )


def farther(low: Any, other: Any, wide: Any) -> Any:
    """Per element, whichever of two low-precision results (``low`` on the device,
    ``other`` anywhere) is farther from ``wide``, on ``low``'s device and dtype."""
    import torch

    if low is None or other is None or wide is None or not low.dtype.is_floating_point:
        return low
    if other.shape != low.shape:
        return low
    w = wide.detach().to(low.device, torch.float64)
    other = other.to(low.device)  # once: a GPU-sized CPU result is hundreds of MB
    pick = (other.to(torch.float64) - w).abs() > (low.to(torch.float64) - w).abs()
    return torch.where(pick, other, low)  # NaN compares False: keep the device's


def dropped_gradients(op: Op, case: Case, inputs: Sequence[torch.Tensor]) -> list[str]:
    """One line per float input whose gradient the backward returns as None, undeclared
    (no ``no_grad=``), where the reference gives it one: a forgotten gradient, not a
    deliberate one (``return da, None`` would pass unseen). ``inputs``: the case's CPU
    tensors, half precision widened to float32; a reference that raises is its own row."""
    import torch

    from portkit.torch_op.layout import no_gradient_inputs

    declared = op.definition.no_grad_positions
    suspects = [
        i
        for i in no_gradient_inputs(op)
        if i not in declared and i < len(inputs) and inputs[i].dtype.is_floating_point
    ]
    if not suspects:
        return []
    half = (torch.float16, torch.bfloat16)
    leaves = [
        (t.float() if t.dtype in half else t).detach().clone().requires_grad_(i in suspects)
        for i, t in enumerate(inputs)
    ]
    try:
        outputs = [o for o in as_tuple(op.definition.reference(*leaves, *case.extra))]
        differentiable = [o for o in outputs if o.requires_grad]
        if not differentiable:
            return []
        seeds = [torch.ones_like(o) for o in differentiable]
        wanted = [leaves[i] for i in suspects]
        grads = torch.autograd.grad(differentiable, wanted, seeds, allow_unused=True)
    except Exception:  # noqa: BLE001 (the reference's own run reports it)
        return []
    return [
        f"grad of {op.definition.input_label(i)}: the backward returns None but the reference "
        f"gives this input a gradient; return it, or declare the input with no_grad= if it "
        f"carries none"
        for i, g in zip(suspects, grads)
        if g is not None
    ]
