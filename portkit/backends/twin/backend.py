"""``twin``: the hand-ported C CUDA kernels of ``cuda_src/<op>.cu``, compiled with NVRTC.

NVRTC compiles through ``cuda.core``; loading and launching go through the driver API
(``driver_launch``: a cuda.core launch costs 7.9 µs of host time, a driver launch with
the argument buffers built once about 3).
The kernel's parsed signature decides the template instantiation (``float`` or
``double`` from the tensors bound to ``T*`` parameters) and the C type of every
scalar, and a wrong argument is named before anything reaches the GPU.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import cache
from typing import Any

from portkit.backends.base import Backend, cuda_unavailable_reason
from portkit.backends.twin.build import compile_twin
from portkit.backends.twin.source import SCALAR_TYPES, TwinKernel, parse_twin
from portkit.errors import InputError, OpDefinitionError
from portkit.launch.kernel_set import KernelSet, LaunchConfig

C_SCALAR_OF_DTYPE = {"float32": "float", "float64": "double"}
DTYPE_OF_C_SCALAR = {"float": "float32", "double": "float64", "int": "int32"}


def twin_expressions(op) -> list[str]:
    """NVRTC name expressions for every kernel of ``op`` in every dtype it accepts."""
    kernels = checked_twin_kernels(op)
    expressions = []
    for kernel in kernels.values():
        if kernel.template_param:
            expressions += [kernel.expression(C_SCALAR_OF_DTYPE[d]) for d in op.definition.dtypes]
        else:
            expressions.append(kernel.expression(None))
    return expressions


def checked_twin_kernels(op) -> dict[str, TwinKernel]:
    """The twin's kernels, after checking it declares every kernel the prototype has."""
    assert op.twin_path is not None
    declared = parse_twin(op.twin_path)
    missing = sorted(set(op.kernels) - set(declared))
    if missing:
        raise OpDefinitionError(
            f"twin {op.twin_path} lacks kernel(s) {', '.join(missing)} that the prototype "
            f"{op.prototype_path} defines; twins use the same kernel names"
        )
    return {name: declared[name] for name in op.kernels}


def bind_arguments(kernel: TwinKernel, args: Sequence[Any]) -> tuple[str | None, list[Any]]:
    """The C scalar type of the instantiation and the arguments as C values."""
    import numpy as np
    import torch

    if len(args) != len(kernel.params):
        raise InputError(
            f"twin kernel {kernel.name} takes {len(kernel.params)} arguments "
            f"({', '.join(p.name for p in kernel.params)}), got {len(args)}"
        )
    scalar = None
    for param, arg in zip(kernel.params, args):
        if param.pointer and param.ctype == kernel.template_param:
            if not isinstance(arg, torch.Tensor):
                continue
            dtype = str(arg.dtype).removeprefix("torch.")
            if dtype not in C_SCALAR_OF_DTYPE:
                raise InputError(
                    f"twin kernel {kernel.name}: {param.name} is a {dtype} tensor; the template "
                    f"is instantiated for {', '.join(C_SCALAR_OF_DTYPE)}"
                )
            if scalar is not None and C_SCALAR_OF_DTYPE[dtype] != scalar:
                raise InputError(
                    f"twin kernel {kernel.name}: {param.name} is {dtype} but earlier "
                    f"{param.ctype}* arguments were {DTYPE_OF_C_SCALAR[scalar]}; "
                    f"one instantiation takes one dtype"
                )
            scalar = C_SCALAR_OF_DTYPE[dtype]
    if kernel.template_param and scalar is None:
        raise InputError(f"twin kernel {kernel.name}: no tensor decides its template type")

    values: list[Any] = []
    for param, arg in zip(kernel.params, args):
        where = f"twin kernel {kernel.name}, parameter {param.name}"
        ctype = scalar if param.ctype == kernel.template_param else param.ctype
        if param.pointer:
            if not isinstance(arg, torch.Tensor):
                raise InputError(f"{where} is a pointer; pass a tensor, not {type(arg).__name__}")
            expected = DTYPE_OF_C_SCALAR.get(ctype or "")
            actual = str(arg.dtype).removeprefix("torch.")
            if expected and actual != expected:
                raise InputError(f"{where} is {ctype}*; got a {actual} tensor")
            values.append(arg.data_ptr())  # cuda.core passes a Python int as a pointer
        else:
            if isinstance(arg, torch.Tensor):
                raise InputError(f"{where} is a {ctype} scalar; got a tensor")
            numpy_type = getattr(np, SCALAR_TYPES[ctype])
            if np.issubdtype(numpy_type, np.integer) and not isinstance(arg, (int, np.integer)):
                # np.int32(2.7) would silently pass 2 where the prototype sees 2.7.
                raise InputError(f"{where} is a {ctype}; got {type(arg).__name__} {arg!r}")
            try:
                with np.errstate(over="raise"):
                    values.append(numpy_type(arg))
            except (OverflowError, FloatingPointError, ValueError):
                raise InputError(f"{where}: {arg!r} does not fit a {ctype}") from None
    return scalar, values


class _Plan:
    """How one instantiation's arguments become launch values, built on its first launch."""

    def __init__(self, kernel: TwinKernel, scalar: str | None, handle: Any) -> None:
        import numpy as np
        import torch

        from portkit.backends.twin.driver_launch import SLOT_CODES, DriverKernel

        self.pointers: list[tuple[int, Any]] = []  # (position, torch dtype or None)
        self.raw: list[tuple[int, Any]] = []  # scalars without a struct code: numpy bytes
        self.scalars: list[int] = []  # struct would take a one-element tensor: refuse it
        slots = []
        for position, param in enumerate(kernel.params):
            ctype = scalar if param.ctype == kernel.template_param else param.ctype
            if param.pointer:
                dtype = DTYPE_OF_C_SCALAR.get(ctype or "")
                self.pointers.append((position, getattr(torch, dtype) if dtype else None))
                slots.append("pointer")
            elif ctype in SLOT_CODES:
                self.scalars.append(position)
                slots.append(ctype)
            else:
                self.raw.append((position, getattr(np, SCALAR_TYPES[ctype])))
                slots.append("raw")
        self.count = len(kernel.params)
        self.driver = DriverKernel(handle, slots)


_Tensor: Any = None  # torch.Tensor, once torch is imported


class TwinKernelTarget:
    """Launches one twin kernel. The first launch of each dtype checks every argument
    (``bind_arguments``) and builds a plan; later launches check types cheaply, pack the
    values and call the driver on torch's current stream. Any argument the fast checks
    doubt goes back through ``bind_arguments``, so every error message stays the same."""

    def __init__(self, kernel: TwinKernel, handles: dict[str | None, Any], device: int) -> None:
        self._kernel = kernel
        self._handles = handles  # C scalar of the instantiation (None: no template) -> CUkernel
        self._device = device
        self._plans: dict[Any, _Plan] = {}
        self._decider = next(
            (
                i
                for i, p in enumerate(kernel.params)
                if p.pointer and p.ctype == kernel.template_param
            ),
            None,
        )

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
        from portkit.backends.twin.driver_launch import current_stream

        global _Tensor
        if _Tensor is None:
            import torch

            _Tensor = torch.Tensor
        plan = self._plan(args)
        values = list(args)
        try:
            for position, dtype in plan.pointers:
                arg = values[position]
                if (dtype is not None and arg.dtype != dtype) or arg.get_device() != self._device:
                    raise TypeError
                values[position] = arg.data_ptr()
            for position in plan.scalars:
                if isinstance(values[position], _Tensor):
                    raise TypeError
            for position, numpy_type in plan.raw:
                values[position] = numpy_type(values[position]).tobytes()
            stream = current_stream(self._device)
            plan.driver.launch(config.grid, config.block, config.shared_bytes, stream, values)
        except (TypeError, AttributeError, OverflowError, ValueError, struct.error):
            self._explain(args)
            raise

    def _plan(self, args: Sequence[Any]) -> _Plan:
        decider = self._decider
        try:
            key = args[decider].dtype if decider is not None else None
            plan = self._plans[key]
            if len(args) == plan.count:
                return plan
        except (IndexError, AttributeError, KeyError):
            pass
        scalar, _ = bind_arguments(self._kernel, args)  # raises the clear error, if any
        plan = _Plan(self._kernel, scalar, self._handles[scalar])
        self._plans[args[decider].dtype if decider is not None else None] = plan
        return plan

    def _explain(self, args: Sequence[Any]) -> None:
        """Raise the clear error for arguments the fast path refused."""
        bind_arguments(self._kernel, args)
        for position, arg in enumerate(args):
            if hasattr(arg, "get_device") and arg.get_device() != self._device:
                raise InputError(
                    f"twin kernel {self._kernel.name}, argument {position}: tensor is on "
                    f"cuda:{arg.get_device()}, the twin was loaded on cuda:{self._device}"
                )


@cache
def _current_device_arch() -> str:
    import torch
    from cuda.core import Device

    device = Device(torch.cuda.current_device())
    device.set_current()
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


class Twin(Backend):
    name = "twin"
    role = "twin"
    device = "cuda"
    description = "C CUDA twin from cuda_src/, compiled with NVRTC, on the GPU"

    def _probe(self) -> str | None:
        reason = cuda_unavailable_reason()
        if reason:
            return reason
        try:
            import cuda.core  # noqa: F401
        except ImportError as exc:
            return f"cuda.core is not importable: {exc}"
        return None

    def unsupported_reason(self, op) -> str | None:
        if not op.has_twin:
            return f"no twin: {self.config.cuda_src_dir / (op.name + '.cu')} does not exist"
        return None

    def kernels(self, op, *, poison_outputs: bool = False) -> KernelSet:
        import torch

        from portkit.backends.twin.driver_launch import get_kernel, load_library

        kernels = checked_twin_kernels(op)
        arch = _current_device_arch()
        compiled = compile_twin(op.twin_path, twin_expressions(op), self.config.cache_dir, arch)
        library = load_library(compiled.cubin)
        device = torch.cuda.current_device()
        targets = {}
        for name, kernel in kernels.items():
            scalars = (
                [C_SCALAR_OF_DTYPE[d] for d in op.definition.dtypes]
                if kernel.template_param
                else [None]
            )
            handles = {
                scalar: get_kernel(library, compiled.symbols[kernel.expression(scalar)])
                for scalar in scalars
            }
            targets[name] = TwinKernelTarget(kernel, handles, device)
        return KernelSet(op.name, self.name, self.device, targets, poison_outputs)
