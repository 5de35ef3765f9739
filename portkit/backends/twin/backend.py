"""``twin``: the hand-ported C CUDA kernels of ``cuda_src/<op>.cu``, compiled with NVRTC.

NVRTC compiles through ``cuda.core``; loading and launching go through the driver API
(``driver_launch``: a cuda.core launch costs 7.9 µs of host time, a driver launch with
the argument buffers built once about 3).
The kernel's parsed signature decides the template instantiation (``float`` or
``double`` from the tensors bound to ``T*`` parameters) and the C type of every
scalar, and a wrong argument is named before anything reaches the GPU.
"""

from __future__ import annotations

import functools
import hashlib
import struct
from collections.abc import Callable, Collection, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from portkit.backends.base import Backend, cuda_unavailable_reason
from portkit.backends.twin import driver_launch
from portkit.backends.twin.build import compile_twin, nvrtc_syntax_check
from portkit.backends.twin.instances import readable_twin, twin_instantiations
from portkit.backends.twin.source import TwinKernel
from portkit.errors import InputError
from portkit.launch.kernel_set import KernelSet, LaunchConfig, LaunchTarget
from portkit.launch.replay.steps import ReplayLaunch
from portkit.launch_contract import (
    DTYPE_OF_C_SCALAR,
    SCALAR_TYPES,
    cached_plan,
    check_argument,
    deciders,
    instantiated_ctypes,
    not_compiled,
    template_types,
)
from portkit.project.dtypes import dtype_name
from portkit.project.tuning_table import knob_choice

if TYPE_CHECKING:
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op


def missing_twin_reason(op: Op, config: ProjectConfig) -> str | None:
    """Why a twin backend (GPU or CPU) cannot run ``op``: it has no ``cuda_src/OP.cu``."""
    if not op.has_twin:
        return f"no twin: {config.cuda_src_dir / (op.name + '.cu')} does not exist"
    return None


def bind_arguments(
    kernel: TwinKernel, args: Sequence[Any], compiled: Collection[str] | None = None
) -> tuple[tuple[str, ...] | None, list[Any]]:
    """The C types of the instantiation (None for no template) and the arguments as C
    values; with ``compiled`` (name expressions), an instantiation outside it is refused
    before any argument is converted."""
    import numpy as np
    import torch

    dtypes = [dtype_name(a.dtype) if isinstance(a, torch.Tensor) else None for a in args]
    scalar = template_types(kernel, dtypes)
    if compiled is not None and kernel.expression(scalar) not in compiled:
        raise not_compiled(kernel, scalar)

    values: list[Any] = []
    ctypes = instantiated_ctypes(kernel, scalar)
    for param, ctype, arg, dtype in zip(kernel.params, ctypes, args, dtypes):
        check_argument(kernel, param, ctype, dtype, type(arg).__name__)
        if param.pointer:
            values.append(arg.data_ptr())  # cuda.core passes a Python int as a pointer
        else:
            where = f"twin kernel {kernel.name}, parameter {param.name}"
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

    def __init__(self, kernel: TwinKernel, scalar: tuple[str, ...] | None, handle: Any) -> None:
        import numpy as np
        import torch

        from portkit.backends.twin.driver_launch import SLOT_CODES, DriverKernel

        self.pointers: list[tuple[int, Any]] = []  # (position, torch dtype or None)
        self.raw: list[tuple[int, Any]] = []  # scalars without a struct code: numpy bytes
        self.scalars: list[int] = []  # struct would take a one-element tensor: refuse it
        # (position, the Python types the production path packs there without a second
        # look, the one NumPy scalar type it takes as its value): a C bool takes a Python
        # bool only (struct's "?" would make 5 or 0.5 True); a C int takes numpy.int32, as
        # lint advises when 32 bits are meant.
        self.plain_scalars: list[tuple[int, tuple[type, ...], type | None]] = []
        slots = []
        ctypes = instantiated_ctypes(kernel, scalar)
        for position, (param, ctype) in enumerate(zip(kernel.params, ctypes)):
            if param.pointer:
                dtype = DTYPE_OF_C_SCALAR.get(ctype or "")
                self.pointers.append((position, getattr(torch, dtype) if dtype else None))
                slots.append("pointer")
            elif ctype in SLOT_CODES:
                self.scalars.append(position)
                if ctype == "bool":
                    self.plain_scalars.append((position, _BOOL, None))
                else:
                    exact = getattr(np, SCALAR_TYPES[ctype])
                    self.plain_scalars.append((position, _PLAIN_SCALARS, exact))
                slots.append(ctype)
            else:
                self.raw.append((position, getattr(np, SCALAR_TYPES[ctype])))
                slots.append("raw")
        self.count = len(kernel.params)
        self.driver = DriverKernel(handle, slots)


_Tensor: Any = None  # torch.Tensor, once torch is imported
# (cubin digest, device) -> the CUlibrary loaded from it (``Twin.kernels``).
_LIBRARIES: dict[tuple[str, int], Any] = {}
_PLAIN_SCALARS = (int, float)  # what the production path packs without a second look
_BOOL = (bool,)  # ... into a C bool (1 byte; torch's launcher code "b")


class TwinKernelTarget(LaunchTarget):
    """Launches one twin kernel. The first launch of each dtype checks every argument
    (``bind_arguments``) and builds a plan; later launches check types cheaply, pack the
    values and call the driver on torch's current stream. Any argument the fast checks
    doubt goes back through ``bind_arguments``, so every error message stays the same."""

    has_plain_launch = True
    has_replay_step = True

    def __init__(
        self, kernel: TwinKernel, handles: dict[tuple[str, ...] | None, Any], device: int
    ) -> None:
        self._kernel = kernel
        # C types of the instantiation, one per template parameter (None: no template)
        # -> CUkernel.
        self._handles = handles
        self._device = device
        self._plans: dict[Any, _Plan] = {}
        # The tensors whose dtypes decide the instantiation, and so find its plan.
        self._deciders = deciders(kernel)

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
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
            stream = driver_launch.current_stream(self._device)
            plan.driver.launch(config.grid, config.block, config.shared_bytes, stream, values)
        except (TypeError, AttributeError, OverflowError, ValueError, struct.error):
            self._explain(args)
            raise

    def plain_launch(self, config: LaunchConfig) -> Callable[[Sequence[Any]], bool]:
        """The production path for one launch configuration (``LaunchTarget``): a function
        that launches when every argument is what its dtype's plan expects (tensors of
        that dtype on this GPU in C order, Python ints and floats for scalars and bools
        for C ``bool``s, values that fit) and returns True, or returns False having
        launched nothing, and the checked path explains. One Python frame per launch:
        it runs on every call."""
        grid, block, shared = config.grid, config.block, config.shared_bytes
        warps = driver_launch.static_warps(grid, block)
        plans, positions, device = self._plans, self._deciders, self._device
        decider = positions[0] if len(positions) == 1 else None
        stream_of = driver_launch.current_stream

        def launch(args: Sequence[Any]) -> bool:
            try:
                if decider is not None:
                    plan = plans[(args[decider].dtype,)]
                else:
                    plan = plans[tuple(args[i].dtype for i in positions)]
                if len(args) != plan.count or plan.raw:
                    return False
                values = list(args)
                for position, dtype in plan.pointers:
                    arg = values[position]
                    if (
                        (dtype is not None and arg.dtype != dtype)
                        or arg.get_device() != device
                        or not arg.is_contiguous()
                    ):
                        return False
                    values[position] = arg.data_ptr()
                for position, plain, exact in plan.plain_scalars:
                    value = values[position]
                    if type(value) not in plain:
                        if type(value) is not exact:
                            return False
                        values[position] = value.item()  # type: ignore[attr-defined]  # a NumPy scalar: torch's launcher takes Python numbers
                # Packing checks each value's range before anything is launched, and a
                # launch error is a RuntimeError: nothing caught here follows a launch.
                plan.driver.launch(grid, block, shared, stream_of(device), values, warps)
            except (
                TypeError,
                AttributeError,
                OverflowError,
                ValueError,
                IndexError,
                KeyError,
                struct.error,
            ):
                return False
            return True

        return launch

    def replay_step(self, config: LaunchConfig, args: Sequence[Any]) -> ReplayLaunch | None:
        """How to repeat the launch ``plain_launch`` just made with ``args``
        (``LaunchTarget``; launch/replay): one 8-byte slot per parameter, so a pointer's
        slot is its position."""
        plan = self._plans.get(tuple(args[i].dtype for i in self._deciders))
        if plan is None or plan.raw or len(args) != plan.count:
            return None
        values: list[Any] = list(args)
        for position, _ in plan.pointers:
            values[position] = None
        for position, _, exact in plan.plain_scalars:
            if type(values[position]) is exact:
                values[position] = values[position].item()
        grid, block = config.grid, config.block
        return ReplayLaunch(
            driver=plan.driver,
            grid=grid,
            block=block,
            shared_bytes=config.shared_bytes,
            warps=driver_launch.static_warps(grid, block),
            values=tuple(values),
            pointers=tuple((position, position) for position, _ in plan.pointers),
            stream=functools.partial(driver_launch.current_stream, self._device),
        )

    def _plan(self, args: Sequence[Any]) -> _Plan:
        plan = cached_plan(self._plans, self._deciders, args)
        if plan is not None:
            return plan
        compiled = {self._kernel.expression(i) for i in self._handles}
        scalar, _ = bind_arguments(self._kernel, args, compiled)  # the clear error, if any
        plan = _Plan(self._kernel, scalar, self._handles[scalar])
        self._plans[tuple(args[i].dtype for i in self._deciders)] = plan
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

    def unsupported_reason(self, op: Op) -> str | None:
        return missing_twin_reason(op, self.config)

    def kernels(self, op: Op, *, poison_outputs: bool = False) -> KernelSet:
        import torch

        from portkit.backends.twin.driver_launch import get_kernel, load_library

        arch = _current_device_arch()
        kernels, expressions = readable_twin(op, lambda path: nvrtc_syntax_check(path, arch))
        assert op.twin_path is not None  # readable_twin checked it
        compiled = compile_twin(op.twin_path, expressions, self.config.cache_dir, arch)
        device = torch.cuda.current_device()
        # One CUlibrary per cubin content and device for the process: the harness asks for
        # kernels once per case, and a resident process (portkit watch, a notebook) asks
        # on every run; loading again each time would pile up modules on the GPU.
        key = (hashlib.sha256(compiled.cubin).hexdigest(), device)
        if key not in _LIBRARIES:
            _LIBRARIES[key] = load_library(compiled.cubin)
        library = _LIBRARIES[key]
        targets = {}
        for name, instantiations in twin_instantiations(op).items():
            kernel = kernels[name]
            handles = {
                combo: get_kernel(library, compiled.symbols[kernel.expression(combo)])
                for combo in instantiations
            }
            targets[name] = TwinKernelTarget(kernel, handles, device)
        return KernelSet(
            op.name,
            self.name,
            self.device,
            targets,
            poison_outputs,
            knob_choice=knob_choice(op, self.config),
        )
