"""``twin``: the hand-ported C CUDA kernels of ``cuda_src/<op>.cu``, compiled with NVRTC.

Loading and launching go through ``cuda.core`` (docs/design.md says why not CuPy).
The kernel's parsed signature decides the template instantiation (``float`` or
``double`` from the tensors bound to ``T*`` parameters) and the C type of every
scalar, and a wrong argument is named before anything reaches the GPU.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from functools import cache
from typing import Any

from portkit.backends.base import Backend, cuda_unavailable_reason
from portkit.backends.twin.build import compile_twin
from portkit.backends.twin.source import POINTER_ONLY_TYPES, SCALAR_TYPES, TwinKernel, parse_twin
from portkit.errors import DtypeError, InputError, OpDefinitionError
from portkit.launch.kernel_set import KernelSet, LaunchConfig
from portkit.project.dtypes import dtype_name

# The C type a template parameter is instantiated with for tensors of each dtype
# (cuda_fp16.h and cuda_bf16.h, which NVRTC finds by itself, declare the half types).
C_SCALAR_OF_DTYPE = {
    "float16": "__half",
    "bfloat16": "__nv_bfloat16",
    "float32": "float",
    "float64": "double",
    "int8": "signed char",
    "uint8": "unsigned char",
    "int16": "short",
    "int32": "int",
    "int64": "long long",
    "bool": "bool",
}
# The dtype of the tensor a pointer parameter of a fixed C type takes.
DTYPE_OF_C_SCALAR = {
    **{c: d for c, d in SCALAR_TYPES.items() if d != "bool_"},
    "bool": "bool",
    **POINTER_ONLY_TYPES,
}


def twin_expressions(op) -> list[str]:
    """NVRTC name expressions for every kernel of ``op`` in every dtype it accepts."""
    kernels = checked_twin_kernels(op)
    scalars = [C_SCALAR_OF_DTYPE[d] for d in op.definition.dtypes]
    if any(k.template_params for k in kernels.values()):
        _require_half_headers(op)
    expressions = []
    for kernel in kernels.values():
        # Several template parameters: every combination of the op's dtypes (a twin with
        # U fixed by the op would write the type itself instead of a parameter).
        combinations = itertools.product(scalars, repeat=len(kernel.template_params))
        expressions += [kernel.expression(c) for c in combinations]
    return expressions


HALF_HEADERS = {"float16": "cuda_fp16.h", "bfloat16": "cuda_bf16.h"}


def _require_half_headers(op) -> None:
    """A template instantiated with __half or __nv_bfloat16 needs its header; NVRTC's own
    error ("identifier __half is undefined" in a name map) does not say so."""
    source = op.twin_path.read_text()
    for dtype, header in HALF_HEADERS.items():
        if dtype in op.definition.dtypes and header not in source:
            raise DtypeError(
                f"twin {op.twin_path}: op {op.name} accepts {dtype}, so its templates are "
                f"instantiated with {C_SCALAR_OF_DTYPE[dtype]}; add #include <{header}>"
            )


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


def bind_arguments(
    kernel: TwinKernel, args: Sequence[Any]
) -> tuple[tuple[str, ...] | None, list[Any]]:
    """The C types of the instantiation (None for no template) and the arguments as C values."""
    import numpy as np
    import torch

    if len(args) != len(kernel.params):
        raise InputError(
            f"twin kernel {kernel.name} takes {len(kernel.params)} arguments "
            f"({', '.join(p.name for p in kernel.params)}), got {len(args)}"
        )
    chosen: dict[str, str] = {}  # template parameter -> C type
    for param, arg in zip(kernel.params, args):
        if not (param.pointer and param.ctype in kernel.template_params):
            continue
        if not isinstance(arg, torch.Tensor):
            continue
        dtype = dtype_name(arg.dtype)
        if dtype not in C_SCALAR_OF_DTYPE:
            raise InputError(
                f"twin kernel {kernel.name}: {param.name} is a {dtype} tensor; a template "
                f"is instantiated for {', '.join(C_SCALAR_OF_DTYPE)}"
            )
        earlier = chosen.get(param.ctype)
        if earlier is not None and C_SCALAR_OF_DTYPE[dtype] != earlier:
            raise InputError(
                f"twin kernel {kernel.name}: {param.name} is {dtype} but earlier "
                f"{param.ctype}* arguments were {DTYPE_OF_C_SCALAR[earlier]}; "
                f"one instantiation takes one dtype per template parameter"
            )
        chosen[param.ctype] = C_SCALAR_OF_DTYPE[dtype]
    undecided = [t for t in kernel.template_params if t not in chosen]
    if undecided:
        raise InputError(
            f"twin kernel {kernel.name}: no tensor decides its template type {undecided[0]}"
        )
    scalar = tuple(chosen[t] for t in kernel.template_params) or None

    values: list[Any] = []
    for param, arg in zip(kernel.params, args):
        where = f"twin kernel {kernel.name}, parameter {param.name}"
        ctype = chosen.get(param.ctype, param.ctype)
        if param.pointer:
            if not isinstance(arg, torch.Tensor):
                raise InputError(f"{where} is a pointer; pass a tensor, not {type(arg).__name__}")
            expected = DTYPE_OF_C_SCALAR.get(ctype or "")
            actual = dtype_name(arg.dtype)
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


class TwinKernelTarget:
    def __init__(self, kernel: TwinKernel, module: Any) -> None:
        self._kernel = kernel
        self._module = module

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
        import torch
        from cuda.core import LaunchConfig as CoreLaunchConfig
        from cuda.core import Stream, launch

        scalar, values = bind_arguments(self._kernel, args)
        function = self._module.get_kernel(self._kernel.expression(scalar))
        stream = Stream.from_handle(torch.cuda.current_stream().cuda_stream)
        core_config = CoreLaunchConfig(
            grid=config.grid, block=config.block, shmem_size=config.shared_bytes
        )
        launch(stream, core_config, function, *values)


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
        from cuda.core import ObjectCode

        kernels = checked_twin_kernels(op)
        arch = _current_device_arch()
        compiled = compile_twin(op.twin_path, twin_expressions(op), self.config.cache_dir, arch)
        # cuda.core wants the lowered names as bytes; the cache keeps them as JSON text.
        symbols = {expr: sym.encode() for expr, sym in compiled.symbols.items()}
        module = ObjectCode.from_cubin(compiled.cubin, symbol_mapping=symbols)
        targets = {name: TwinKernelTarget(k, module) for name, k in kernels.items()}
        return KernelSet(op.name, self.name, self.device, targets, poison_outputs)
