"""The runtime of an exported package: ``k`` for the shipped launchers, kernels loaded from
the package's cubins (or PTX on a newer GPU), and the registration of the ops at import.

``portkit export`` copies this file verbatim into the package as ``_runtime.py``, next to
copies of ``registration.py`` and ``driver_launch.py``. It imports only the standard
library, torch and cuda.bindings (through ``_driver_launch``): no numba, no NVRTC, no
portkit. The launchers see it as ``portkit`` (``portkit.cdiv``, ``portkit.InputError``).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from . import _driver_launch as driver_launch
from . import _registration as registration

MAX_THREADS_PER_BLOCK = 1024
# The C type a template parameter takes for each dtype (portkit's backends/twin/instances.py).
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
DTYPE_OF_C_SCALAR = {c: d for d, c in C_SCALAR_OF_DTYPE.items()}


class PortkitError(Exception):
    """A problem the caller can fix; the message says what."""


class InputError(PortkitError, ValueError):
    """A tensor of the wrong device, dtype, layout or shape."""


class LaunchError(PortkitError):
    """A launch configuration a GPU would reject."""


class OpDefinitionError(PortkitError):
    """A launcher that breaks the contract it was exported with."""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


_SM_COUNTS: dict[int, int] = {}


def sm_count(k: Any) -> int:
    """Streaming multiprocessors of the current GPU (``portkit.sm_count`` in a launcher)."""
    device = torch.cuda.current_device()
    if device not in _SM_COUNTS:
        _SM_COUNTS[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNTS[device]


def _dims(value: Any, what: str, kernel: str) -> tuple[int, int, int]:
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(items) <= 3 or not all(
        hasattr(i, "__index__") and not isinstance(i, bool) for i in items
    ):
        raise LaunchError(f"kernel {kernel}: {what} must be an int or 1-3 ints, got {value!r}")
    return tuple(int(i) for i in items) + (1,) * (3 - len(items))  # type: ignore[return-value]


def launch_config(config: Any, kernel: str) -> tuple[tuple, tuple, int]:
    if not isinstance(config, tuple) or len(config) not in (2, 3):
        raise LaunchError(f"kernel {kernel}: launch as k.{kernel}[grid, block(, shared_bytes)]")
    grid, block = _dims(config[0], "grid", kernel), _dims(config[1], "block", kernel)
    shared = int(config[2]) if len(config) == 3 else 0
    if min(block) < 1 or math.prod(block) > MAX_THREADS_PER_BLOCK:
        raise LaunchError(
            f"kernel {kernel}: block {block} is not 1..{MAX_THREADS_PER_BLOCK} threads"
        )
    if min(grid) < 1:
        raise LaunchError(f"kernel {kernel}: grid {grid} has a dimension below 1")
    return grid, block, shared


class Library:
    """An op's compiled twin: the image for this GPU, loaded on first launch."""

    def __init__(self, folder: Path, entry: dict) -> None:
        self.folder, self.entry, self._library = folder, entry, None

    def kernel(self, lowered: str) -> Any:
        if self._library is None:
            self._library = driver_launch.load_library(self._image())
        return driver_launch.get_kernel(self._library, lowered)

    def _image(self) -> bytes:
        major, minor = torch.cuda.get_device_capability()
        device = major * 10 + minor
        cubins = {int(a[3:]): f for a, f in self.entry["cubins"].items()}
        # A cubin runs on its own major version at an equal or higher minor version.
        usable = [a for a in cubins if a // 10 == major and a <= device]
        if usable:
            return (self.folder / cubins[max(usable)]).read_bytes()
        ptx_arch = int(self.entry["ptx_arch"][3:])
        if ptx_arch <= device:
            return (self.folder / self.entry["ptx"]).read_bytes()  # the driver compiles it
        raise PortkitError(
            f"this GPU is sm_{device}; the package has cubins for "
            f"{', '.join(self.entry['cubins'])} and PTX for {self.entry['ptx_arch']}"
        )


class Kernel:
    def __init__(self, name: str, spec: dict, library: Library) -> None:
        self.name, self.spec, self.library = name, spec, library
        self._bound: dict = {}
        self._plans: dict = {}
        params = spec["params"]
        # The first pointer of each template parameter's type decides its C type.
        self._deciders = tuple(
            next(i for i, p in enumerate(params) if p["pointer"] and p["ctype"] == t)
            for t in spec["templates"]
        )

    def __getitem__(self, config: Any) -> Callable[..., None]:
        try:
            bound = self._bound.get(config)
        except TypeError:
            bound = None
        if bound is None:
            grid, block, shared = launch_config(config, self.name)

            def bound(*args: Any) -> None:
                self.launch(grid, block, shared, args)

            if len(self._bound) < 512 and all(type(c) is not float for c in config):
                self._bound[config] = bound
        return bound

    def launch(self, grid: tuple, block: tuple, shared: int, args: Sequence[Any]) -> None:
        plan = self._plan(args)
        values = list(args)
        for position in plan[2]:
            if isinstance(values[position], torch.Tensor):
                raise InputError(f"kernel {self.name}, argument {position}: pass a number")
        for position, dtype in plan[1]:
            arg = values[position]
            if not isinstance(arg, torch.Tensor) or not arg.is_cuda or not arg.is_contiguous():
                raise InputError(
                    f"kernel {self.name}, argument {position}: pass a contiguous CUDA tensor"
                )
            if dtype is not None and arg.dtype != dtype:
                raise InputError(
                    f"kernel {self.name}, argument {position}: {arg.dtype}, expected {dtype}"
                )
            values[position] = arg.data_ptr()
        stream = driver_launch.current_stream(torch.cuda.current_device())
        # torch's C++ launcher takes Python ints and floats only (as portkit's twin does)
        plain = all(type(values[p]) in (int, float) for p in plan[2])
        warps = driver_launch.static_warps(grid, block) if plain else 0
        try:
            plan[0].launch(grid, block, shared, stream, values, warps)
        except (struct.error, TypeError, OverflowError) as exc:
            raise InputError(f"kernel {self.name}: an argument does not fit: {exc}") from None

    def _plan(self, args: Sequence[Any]) -> tuple:
        spec = self.spec
        if len(args) != len(spec["params"]):
            raise InputError(
                f"kernel {self.name} takes {len(spec['params'])} arguments, got {len(args)}"
            )
        for decider in self._deciders:
            if not isinstance(args[decider], torch.Tensor):
                raise InputError(f"kernel {self.name}, argument {decider}: pass a tensor")
        dtypes = tuple(args[i].dtype for i in self._deciders)
        plan = self._plans.get(dtypes)
        if plan is None:
            chosen = {
                t: C_SCALAR_OF_DTYPE.get(str(d).removeprefix("torch."), str(d))
                for t, d in zip(spec["templates"], dtypes)
            }
            key = ", ".join(chosen.values())
            if key not in spec["lowered"]:
                combination = ", ".join(f"{t}={c}" for t, c in chosen.items())
                raise InputError(
                    f"kernel {self.name} was not compiled with {combination}: no case of "
                    f"the op launches it; add a case with those dtypes"
                )
            slots, pointers, scalars = [], [], []
            for position, p in enumerate(spec["params"]):
                ctype = chosen.get(p["ctype"], p["ctype"])
                if p["pointer"]:
                    name = DTYPE_OF_C_SCALAR.get(ctype)
                    pointers.append((position, getattr(torch, name) if name else None))
                else:
                    scalars.append(position)
                slots.append("pointer" if p["pointer"] else ctype)
            handle = self.library.kernel(spec["lowered"][key])
            kernel = driver_launch.DriverKernel(handle, slots)
            plan = self._plans[dtypes] = (kernel, pointers, scalars)
        return plan


class Kernels:
    """``k`` for the shipped launchers."""

    def __init__(self, op: str, kernels: dict[str, Kernel]) -> None:
        self.op, self.implementation, self.device = op, "exported twin", "cuda"
        self.poison_outputs = False
        self.__dict__.update(kernels)

    def empty(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device="cuda")

    def empty_like(self, tensor: torch.Tensor) -> torch.Tensor:
        if tensor.is_cuda:
            return torch.empty_like(tensor, memory_format=torch.contiguous_format)
        return self.empty(tensor.shape, tensor.dtype)


def input_check(name: str, entry: dict, custom: Callable | None) -> Callable:
    accepted = {getattr(torch, d) for d in entry["dtypes"]}
    same_shape = entry["same_shape"]

    def check(inputs: Sequence[Any]) -> None:
        tensors = [(i, t) for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)]
        if not tensors:
            raise InputError(f"op {name}: no tensor among the inputs")
        first = tensors[0][1]
        for i, t in tensors:
            where = f"op {name}, input {i}"
            if not t.is_cuda:
                raise InputError(f"{where}: tensor is on {t.device.type}; move it with .cuda()")
            if t.dtype not in accepted or t.dtype != first.dtype:
                raise InputError(f"{where}: dtype {t.dtype}; the op takes {entry['dtypes']}")
            if not t.is_contiguous():
                raise InputError(f"{where}: tensor is not contiguous; pass .contiguous()")
            if same_shape and t.shape != first.shape:
                raise InputError(f"op {name}: input {i} has shape {tuple(t.shape)}, not input 0's")
        if custom is not None:
            custom(*inputs)

    return check


def register_ops(folder: Path, launchers: dict[str, type]) -> dict[str, Any]:
    """Register every op of the package (``manifest.json``) and return its callables."""
    manifest = json.loads((folder / "manifest.json").read_text())
    callables = {}
    for name, entry in manifest["ops"].items():
        cls = launchers[name]
        library = Library(folder, entry)
        k = Kernels(name, {n: Kernel(n, spec, library) for n, spec in entry["kernels"].items()})
        layout = entry["layout"]
        layout = registration.OpLayout(
            tuple(layout["input_types"]),
            layout["outputs"],
            tuple((kind, index) for kind, index in layout["saved"]),
            tuple(layout["grads"]),
            layout["has_backward"],
        )
        binding = registration.Binding(
            cls.forward,
            getattr(cls, "backward", None),
            k,
            input_check(name, entry, getattr(cls, "check_inputs", None)),
            OpDefinitionError,
        )
        qualname = f"{manifest['namespace']}::{name}"
        registered = registration.register(qualname, layout, list(entry["kernels"]), binding)
        callables[name] = registration.OpCallable(registered, binding)
    return callables
