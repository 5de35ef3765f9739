"""One twin kernel's launches: the argument plan, the launch loop and the refusal path.

portkit's twin backend and an exported package launch a compiled kernel through this one
class (``TwinLaunch``), so every argument takes the same path and gets the same message
in both: ``ArgumentPlan`` (per instantiation, which arguments are pointers, slot numbers
or raw struct bytes), ``plain_launch`` (the fast path, one Python frame, which launches or
returns False having launched nothing), ``launch`` (the checked path) and ``refuse``.
NumPy scalars are numbers here, recognised without importing NumPy (docs/fast-path.md,
"Launch path").
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Collection, Sequence
from typing import Any

import torch

from . import driver_launch
from . import launch_contract as contract
from .launch_contract import InputError, LaunchConfig
from .steps import ReplayLaunch

# Scalar types the driver's slot codes lack, packed by struct: NumPy type name -> code.
_RAW_CODES = {"int8": "b", "uint8": "B", "int16": "h"}
_NUMBERS = (int, float)  # what torch's C++ launcher takes for a number slot
_BOOL = (bool,)  # ... and for a C bool: an int there goes through struct's "?" (1)
_REFUSED = (TypeError, AttributeError, OverflowError, ValueError, IndexError, KeyError)


def python_number(value: Any) -> Any:
    """A NumPy scalar as the Python number it holds; any other value as it is."""
    return value.item() if numpy_scalar_type(value.__class__) else value


@functools.lru_cache(maxsize=64)  # per type: a launch's arguments are of a few
def numpy_scalar_type(kind: Any) -> bool:  # a type
    """``isinstance(x, numpy.generic)`` without importing NumPy: NumPy's scalar types
    (``float32``, ``int64``, ``bool``, ...) all derive from ``numpy.generic``, which
    declares ``item()``; an array (even of one element) is not one."""
    return any(base.__module__ == "numpy" and base.__name__ == "generic" for base in kind.__mro__)


def cached_plan(plans: dict, positions: tuple[int, ...], args: Sequence[Any]) -> Any:
    """The plan in ``plans`` (keyed by the dtypes of the tensors at ``positions``, each
    with a ``count`` of arguments) for ``args``, or None: the first launch of these
    dtypes, or arguments it does not fit, which then get the full check."""
    try:
        plan = plans[tuple(args[i].dtype for i in positions)]
    except (IndexError, AttributeError, KeyError):
        return None
    return plan if len(args) == plan.count else None


class ArgumentPlan:
    """How one instantiation's arguments become launch values."""

    def __init__(self, kernel: contract.TwinKernel, ctypes: Sequence[str], handle: Any) -> None:
        self.pointers: list[tuple[int, Any]] = []  # (position, torch dtype or None)
        self.scalars: list[int] = []  # a one-element tensor there is refused
        self.raw: list[tuple[int, str]] = []  # (position, struct code)
        # (position, the Python types the fast path hands to torch's launcher there)
        self.plain_scalars: list[tuple[int, tuple[type, ...]]] = []
        slots = []
        for position, (param, ctype) in enumerate(zip(kernel.params, ctypes)):
            if param.pointer:
                name = contract.DTYPE_OF_C_SCALAR.get(ctype)
                self.pointers.append((position, getattr(torch, name) if name else None))
                slots.append("pointer")
            elif ctype in driver_launch.SLOT_CODES:
                self.scalars.append(position)
                self.plain_scalars.append((position, _BOOL if ctype == "bool" else _NUMBERS))
                slots.append(ctype)
            else:
                self.raw.append((position, "=" + _RAW_CODES[contract.SCALAR_TYPES[ctype]]))
                self.scalars.append(position)
                slots.append("raw")
        self.count = len(kernel.params)
        self.driver = driver_launch.DriverKernel(handle, slots)


class TwinLaunch:
    """Launches one twin kernel on GPU ``device`` (None: the current device when the
    first plan is built). ``compiled``: the instantiation keys
    (``launch_contract.instantiation_key``) there is code for; ``handle_of``: the driver
    handle of one of them (loaded on first use). Offers what a launch target declares
    (``has_plain_launch``, ``has_replay_step``: docs/design.md, "Declared capabilities")."""

    has_plain_launch = True
    has_replay_step = True

    def __init__(
        self,
        kernel: contract.TwinKernel,
        compiled: Collection[str],
        handle_of: Callable[[contract.Instantiation], Any],
        device: int | None,
    ) -> None:
        self.kernel, self.name = kernel, kernel.name
        self._compiled, self._handle_of, self._device = compiled, handle_of, device
        self._plans: dict[Any, ArgumentPlan] = {}
        # The tensors whose dtypes decide the instantiation, and so find its plan.
        self._deciders = contract.deciders(kernel)

    # -- the launch loop ------------------------------------------------------------------

    def plain_launch(self, config: LaunchConfig) -> Callable[[Sequence[Any]], bool]:
        """The fast path for one launch configuration: a function that launches when
        every argument is what its dtype's plan expects (tensors of that dtype on this
        GPU in C order, Python numbers for number slots and bools for C ``bool``s, values
        that fit) and returns True, or returns False having launched nothing."""
        grid, block, shared = config.grid, config.block, config.shared_bytes
        warps = driver_launch.static_warps(grid, block)
        plans, positions = self._plans, self._deciders
        decider = positions[0] if len(positions) == 1 else None
        stream_of = driver_launch.current_stream
        owner = self

        def launch(args: Sequence[Any]) -> bool:
            try:
                if decider is not None:
                    plan = plans[(args[decider].dtype,)]
                else:
                    plan = plans[tuple(args[i].dtype for i in positions)]
                if len(args) != plan.count or plan.raw:
                    return False
                device = owner._device  # set with the first plan, before any is found
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
                for position, plain in plan.plain_scalars:
                    value = values[position]
                    if type(value) not in plain:
                        value = values[position] = python_number(value)
                        if type(value) not in plain:
                            return False
                # Packing checks each value's range before anything is launched, and a
                # launch error is a RuntimeError: nothing caught here follows a launch.
                plan.driver.launch(grid, block, shared, stream_of(device), values, warps)  # type: ignore[arg-type]
            except (*_REFUSED, struct.error):
                return False
            return True

        return launch

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
        """The checked path: the first launch of a dtype, or arguments the fast path
        doubted. A wrong argument is refused with its message before anything launches."""
        plan = self._plan(args)  # sets self._device, the GPU the kernels were loaded on
        self.refuse(args)
        values = [python_number(a) for a in args]
        try:
            for position, _ in plan.pointers:
                values[position] = values[position].data_ptr()
            # torch's launcher takes plain values only: an int for a C bool is packed (0/1).
            plain = not plan.raw and all(type(values[p]) in ok for p, ok in plan.plain_scalars)
            for position, code in plan.raw:
                values[position] = struct.pack(code, values[position])
            grid, block = config.grid, config.block
            warps = driver_launch.static_warps(grid, block) if plain else 0
            stream = driver_launch.current_stream(self._device)  # type: ignore[arg-type]
            plan.driver.launch(grid, block, config.shared_bytes, stream, values, warps)
        except (TypeError, OverflowError, struct.error) as exc:
            raise InputError(f"twin kernel {self.name}: an argument does not fit: {exc}") from None

    def replay_step(self, config: LaunchConfig, args: Sequence[Any]) -> ReplayLaunch | None:
        """How to repeat the launch ``plain_launch`` just made with ``args`` (replaying.py):
        one 8-byte slot per parameter, so a pointer's slot is its position."""
        plan = cached_plan(self._plans, self._deciders, args)
        if plan is None or plan.raw:
            return None
        values = [python_number(a) for a in args]
        for position, _ in plan.pointers:
            values[position] = None
        grid, block = config.grid, config.block
        plain = all(type(values[p]) in ok for p, ok in plan.plain_scalars)
        return ReplayLaunch(
            driver=plan.driver,
            grid=grid,
            block=block,
            shared_bytes=config.shared_bytes,
            warps=driver_launch.static_warps(grid, block) if plain else 0,
            values=tuple(values),
            pointers=tuple((position, position) for position, _ in plan.pointers),
        )

    def _plan(self, args: Sequence[Any]) -> ArgumentPlan:
        plan = cached_plan(self._plans, self._deciders, args)
        if plan is not None:
            return plan
        if self._device is None:
            self._device = torch.cuda.current_device()
        instantiation = self.refuse(args)
        ctypes = contract.instantiated_ctypes(self.kernel, instantiation)
        plan = ArgumentPlan(self.kernel, ctypes, self._handle_of(instantiation))
        self._plans[tuple(args[i].dtype for i in self._deciders)] = plan
        return plan

    # -- the refusal path -----------------------------------------------------------------

    def refuse(self, args: Sequence[Any]) -> contract.Instantiation:
        """Raise the message for the first argument this kernel cannot take (device,
        layout, dtype, instantiation, C type, value); the instantiation they need."""
        for position, arg in enumerate(args):
            if isinstance(arg, torch.Tensor) and self._device is not None:
                self._refuse_tensor(position, arg)
        return refuse_arguments(self.kernel, args, self._is_compiled)

    def _is_compiled(self, instantiation: contract.Instantiation) -> bool:
        return contract.instantiation_key(instantiation) in self._compiled

    def _refuse_tensor(self, position: int, arg: torch.Tensor) -> None:
        index = arg.get_device()
        if not arg.is_contiguous() or (index < 0 and index != self._device):
            raise contract.tensor_error(
                self.name, position, arg.device.type, tuple(arg.shape), arg.stride()
            )
        if index != self._device:
            raise InputError(
                f"twin kernel {self.name}, argument {position}: tensor is on "
                f"cuda:{index}, the twin was loaded on cuda:{self._device}"
            )


def refuse_arguments(
    kernel: contract.TwinKernel,
    args: Sequence[Any],
    compiled: Callable[[contract.Instantiation], bool] | None = None,
) -> contract.Instantiation:
    """The launch contract's checks of ``args`` for ``kernel`` (with ``compiled``, whether
    there is code for an instantiation) and of each scalar's value: the instantiation
    they need, or the InputError naming the argument at fault."""
    dtypes = [
        str(a.dtype).removeprefix("torch.") if isinstance(a, torch.Tensor) else None for a in args
    ]
    instantiation = contract.template_types(kernel, dtypes)
    if compiled is not None and not compiled(instantiation):
        raise contract.not_compiled(kernel, instantiation)
    ctypes = contract.instantiated_ctypes(kernel, instantiation)
    for param, ctype, arg, dtype in zip(kernel.params, ctypes, args, dtypes):
        contract.check_argument(kernel, param, ctype, dtype, type(arg).__name__)
        if not param.pointer:
            scalar_value(kernel, param, ctype, arg)
    return instantiation


def scalar_value(
    kernel: contract.TwinKernel, param: contract.TwinParam, ctype: str, arg: Any
) -> Any:
    """``arg`` as the Python number a C ``ctype`` parameter takes, or the InputError: an
    integer type refuses a float (2.7 would silently pass 2 where the prototype sees
    2.7), and every value must fit its type."""
    where = f"twin kernel {kernel.name}, parameter {param.name}"
    value = python_number(arg)
    kind = contract.SCALAR_TYPES[ctype]
    if not isinstance(value, int if kind.startswith(("int", "uint")) else (int, float)):
        raise InputError(f"{where} is a {ctype}; got {type(arg).__name__} {arg!r}")
    code = _RAW_CODES.get(kind) or driver_launch.SLOT_CODES[ctype][0]
    try:
        struct.pack("=" + code, value)
    except (struct.error, OverflowError):
        raise InputError(f"{where}: {arg!r} does not fit a {ctype}") from None
    return value
