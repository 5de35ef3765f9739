"""An op implementation as a PyTorch function with autograd, built from its launchers.

``op_function(op, k)`` returns ``f(*inputs)`` that checks the inputs, runs
``forward(k, ...)`` and, on ``.backward()``, ``backward(k, saved, ...)``. The harness
uses it for equivalence and ``gradcheck``; a user's model can use it as the op.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from portkit.errors import BackwardContractError, InputError, OpDefinitionError
from portkit.project.dtypes import dtype_name

if TYPE_CHECKING:
    import torch

    from portkit.launch.kernel_set import KernelSet
    from portkit.project.discovery import Op


def as_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def check_inputs(op: Op, inputs: Sequence[Any], device: str) -> None:
    """The op-level checks: device, dtype, contiguity, shapes, then the op's own rule."""
    import torch

    tensors = [(i, t) for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)]
    if not tensors:
        raise InputError(f"op {op.name}: no tensor among the inputs")
    problem = op.definition.refused_dtype([dtype_name(t.dtype) for _, t in tensors])
    if problem:
        raise InputError(f"op {op.name}: {problem}")
    for i, t in tensors:
        where = f"op {op.name}, input {i}"
        if t.device.type != device:
            raise InputError(
                f"{where}: tensor is on {t.device.type}, but this implementation runs on "
                f"{device}; move it with .to({device!r})"
            )
        if not t.is_contiguous():
            raise InputError(
                f"{where}: tensor with strides {t.stride()} is not contiguous; pass .contiguous()"
            )
    if op.definition.same_shape:
        shape = tensors[0][1].shape
        for i, t in tensors[1:]:
            if t.shape != shape:
                raise InputError(
                    f"op {op.name}: input {i} has shape {tuple(t.shape)} but input 0 has "
                    f"{tuple(shape)}; the op needs equal shapes"
                )
    if op.definition.check_inputs is not None:
        op.definition.check_inputs(*inputs)


def op_function(op: Op, kernels: KernelSet) -> Callable[..., Any]:
    """``f(*inputs)`` running ``op`` on ``kernels``, differentiable if the op has a backward."""
    import torch
    from torch.autograd.function import once_differentiable

    definition = op.definition

    def run_forward(inputs: Sequence[Any]) -> tuple[tuple[torch.Tensor, ...], tuple]:
        result = definition.forward(kernels, *inputs)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise OpDefinitionError(
                f"op {op.name}: forward must return (outputs, saved_for_backward), "
                f"got {type(result).__name__}"
            )
        outputs, saved = as_tuple(result[0]), as_tuple(result[1])
        if not all(isinstance(o, torch.Tensor) for o in outputs):
            raise OpDefinitionError(f"op {op.name}: forward's outputs must be tensors")
        return outputs, saved

    class OpFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            outputs, saved = run_forward(inputs)
            ctx.num_inputs = len(inputs)
            ctx.tensor_inputs = [isinstance(i, torch.Tensor) for i in inputs]
            ctx.save_for_backward(*[s for s in saved if isinstance(s, torch.Tensor)])
            ctx.saved_layout = [isinstance(s, torch.Tensor) for s in saved]
            ctx.saved_other = [s for s in saved if not isinstance(s, torch.Tensor)]
            ctx.output_shapes = [(o.shape, o.dtype) for o in outputs]
            if definition.backward is None:
                ctx.mark_non_differentiable(*outputs)
            return outputs if len(outputs) > 1 else outputs[0]

        @staticmethod
        @once_differentiable
        def backward(ctx, *grad_outputs):
            if definition.backward is None:
                raise OpDefinitionError(f"op {op.name} has no backward")
            tensors, others = iter(ctx.saved_tensors), iter(ctx.saved_other)
            saved = tuple(next(tensors) if t else next(others) for t in ctx.saved_layout)
            grads = [
                g.contiguous()
                if g is not None
                else torch.zeros(shape, dtype=dtype, device=kernels.device)
                for g, (shape, dtype) in zip(grad_outputs, ctx.output_shapes)
            ]
            result = as_tuple(definition.backward(kernels, saved, *grads))
            if len(result) != ctx.num_inputs:
                raise BackwardContractError.gradient_count(op.name, len(result), ctx.num_inputs)
            frozen = definition.no_grad_positions  # declared: no gradient, whatever it returns
            return tuple(
                g if is_t and i not in frozen else None
                for i, (g, is_t) in enumerate(zip(result, ctx.tensor_inputs))
            )

    def apply(*inputs: Any) -> Any:
        check_inputs(op, inputs, kernels.device)
        return OpFunction.apply(*inputs)

    apply.__name__ = f"{op.name}_{kernels.implementation}"
    return apply
