"""The op-level input check every call of an op runs, in portkit and in an exported package.

``InputRule`` is what an op declares about its tensor inputs (``@portkit.op``: the dtypes
it takes, the ones fixed per input, equal shapes) and where its implementation runs;
``input_check`` is the per-call check (a fast pass over torch objects, the author's
``check_inputs`` after it) and ``refuse_inputs`` the slow path that names the input at
fault. portkit's ``portkit.load``, check and diff and an exported package's ops check
by this one module, so a wrong input gets one message wherever the op runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .launch_contract import InputError


@dataclass(frozen=True)
class InputRule:
    op: str
    dtypes: tuple[str, ...]  # the dtypes the op takes (inputs not fixed share one)
    input_dtypes: tuple[str | None, ...] = ()  # a dtype fixed per tensor input, or None
    same_shape: bool = False
    device: str = "cuda"


def refused_dtype(
    dtypes: Sequence[str], accepted: Sequence[str], fixed_dtypes: Sequence[str | None] = ()
) -> str | None:
    """Why tensor inputs of these dtypes (one per tensor input) are refused, or None."""
    free: str | None = None
    for index, dtype in enumerate(dtypes):
        fixed = fixed_dtypes[index] if index < len(fixed_dtypes) else None
        if fixed is not None:
            if dtype != fixed:
                return f"input {index} is {dtype}; the op takes {fixed} there"
            continue
        if dtype not in accepted:
            return (
                f"input {index} is {dtype}, a dtype the op does not accept; "
                f"it takes {', '.join(accepted)}"
            )
        if free is not None and dtype != free:
            return f"input {index} is {dtype} but an earlier input is {free}; they must match"
        free = dtype
    return None


def refuse_inputs(rule: InputRule, inputs: Sequence[Any]) -> None:
    """Raise the message for the first input the op cannot take: no tensor, a dtype, a
    device, a layout, a shape."""
    name, device = rule.op, rule.device
    tensors = [(i, t) for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)]
    if not tensors:
        raise InputError(f"op {name}: no tensor among the inputs")
    dtypes = [str(t.dtype).removeprefix("torch.") for _, t in tensors]
    problem = refused_dtype(dtypes, rule.dtypes, rule.input_dtypes)
    if problem:
        raise InputError(f"op {name}: {problem}")
    for i, t in tensors:
        where = f"op {name}, input {i}"
        if not getattr(t, f"is_{device}"):  # as input_check's: Tensor.is_cuda, is_cpu
            raise InputError(
                f"{where}: tensor is on {t.device.type}, but this implementation runs on "
                f"{device}; move it with .to({device!r})"
            )
        if not t.is_contiguous():
            raise InputError(
                f"{where}: tensor with strides {t.stride()} is not contiguous; pass .contiguous()"
            )
    if rule.same_shape:
        shape = tensors[0][1].shape
        for i, t in tensors[1:]:
            if t.shape != shape:
                raise InputError(
                    f"op {name}: input {i} has shape {tuple(t.shape)} but input 0 has "
                    f"{tuple(shape)}; the op needs equal shapes"
                )


def input_check(
    rule: InputRule, custom: Callable[..., None] | None
) -> Callable[[Sequence[Any]], None]:
    """The per-call check with its work done once (the accepted dtypes as torch objects):
    anything in doubt goes to ``refuse_inputs``, which raises the message; then the
    author's ``check_inputs(*inputs)`` (``custom``), if any."""
    accepted = {getattr(torch, d) for d in rule.dtypes}
    fixed = any(d is not None for d in rule.input_dtypes)
    same_shape, on_device, tensor = rule.same_shape, f"is_{rule.device}", torch.Tensor

    def check(inputs: Sequence[Any]) -> None:
        first = None
        for t in inputs:
            if isinstance(t, tensor):
                if first is None:
                    first = t
                if fixed or not (
                    t.dtype in accepted
                    and t.dtype == first.dtype
                    and getattr(t, on_device)  # Tensor.is_cuda, Tensor.is_cpu
                    and t.is_contiguous()
                    and (not same_shape or t.shape == first.shape)
                ):
                    refuse_inputs(rule, inputs)  # raises the clear error, if any
                    break
        if first is None:
            refuse_inputs(rule, inputs)
        if custom is not None:
            custom(*inputs)

    return check
