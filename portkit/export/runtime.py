"""The runtime of an exported package: ``k`` for the shipped launchers, kernels loaded from
the package's cubins (or PTX on a newer GPU), and the registration of the ops at import.

``portkit export`` copies this file verbatim into the package as ``_runtime.py``, next to
byte-for-byte copies of ``launch_contract.py``, ``registration.py`` and
``driver_launch.py``, and the replayer (``_replay.py``, ``_prepared.py``). It imports only
the standard library, torch and cuda.bindings (through ``_driver_launch``): no numba, no
NVRTC, no portkit. The launch contract (the
launch errors, launch-configuration limits, dtype <-> C type tables, the choice of a
template instantiation) is portkit's own module, so a package launches by the rules
``portkit check`` tested. The launchers see this module as ``portkit``
(``portkit.cdiv``, ``portkit.sm_count``, ``portkit.knobs``, ``portkit.InputError``).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

# Siblings only in an exported package (mypy: the [tool.mypy] overrides in pyproject.toml).
from . import _driver_launch as driver_launch  # type: ignore[attr-defined]
from . import _knobs as knob_choice
from . import _launch_contract as contract
from . import _prepared as prepared
from . import _registration as registration
from . import _replay as replay  # type: ignore[attr-defined]
from ._knobs import knobs as knobs

# What a launcher may use as ``portkit.X`` (launch_contract.LAUNCHER_NAMES).
from ._launch_contract import InputError as InputError
from ._launch_contract import LaunchError as LaunchError
from ._launch_contract import OpDefinitionError as OpDefinitionError
from ._launch_contract import PortkitError as PortkitError
from ._launch_contract import cdiv as cdiv
from ._launch_contract import sm_count as sm_count


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


# Scalar types the driver's slot codes lack, packed here (portkit's twin packs them with
# NumPy, which a package does not need): NumPy type name -> struct code.
_RAW_CODES = {"int8": "b", "uint8": "B", "int16": "h"}
_NUMBERS = (int, float)  # what torch's C++ launcher takes for a number slot
_BOOL = (bool,)  # ... and for a C bool (one byte, its code "b")


class _Plan:
    """How one instantiation's arguments become launch values, built on its first launch."""

    def __init__(self, signature: contract.TwinKernel, ctypes: list[str], handle: Any) -> None:
        self.pointers: list[tuple[int, Any]] = []  # (position, torch dtype or None)
        self.scalars: list[int] = []
        self.raw: list[tuple[int, str]] = []  # (position, struct code)
        # (position, the Python types torch's launcher takes there as they are): a C bool
        # takes a Python bool only, as in portkit's twin; an int there (5) goes through
        # struct's "?", which makes it 1, never the raw byte torch's launcher would pass.
        self.plain_scalars: list[tuple[int, tuple[type, ...]]] = []
        slots = []
        for position, (param, ctype) in enumerate(zip(signature.params, ctypes)):
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
        self.count = len(signature.params)
        self.driver = driver_launch.DriverKernel(handle, slots)


class Kernel:
    """``k.NAME``: one kernel of the package, launched as ``k.NAME[grid, block](*args)``
    with the launch contract's checks (launch_contract.py), as in portkit."""

    def __init__(self, name: str, spec: dict, library: Library) -> None:
        self.name, self.spec, self.library = name, spec, library
        params = tuple(
            contract.TwinParam(p["name"], p["ctype"], p["pointer"]) for p in spec["params"]
        )
        self.signature = contract.TwinKernel(name, tuple(spec["templates"]), params)
        self._bound: dict = {}
        self._plans: dict = {}
        self._deciders = contract.deciders(self.signature)

    def __getitem__(self, config: Any) -> Callable[..., None]:
        cacheable = contract.cacheable_config(config)
        bound = self._bound.get(config) if cacheable else None
        if bound is None:
            checked = contract.launch_config(config, self.name)

            def bound(*args: Any) -> None:
                self.launch(checked, args)

            if cacheable:
                if len(self._bound) >= contract.MAX_CACHED_CONFIGS:
                    self._bound.clear()
                self._bound[config] = bound
        return bound

    def launch(self, config: contract.LaunchConfig, args: Sequence[Any]) -> None:
        plan = self._plan(args)
        values = list(args)
        try:
            if len(values) != plan.count:
                raise TypeError
            for position, dtype in plan.pointers:
                arg = values[position]
                if (dtype is not None and arg.dtype != dtype) or not (
                    arg.is_cuda and arg.is_contiguous()
                ):
                    raise TypeError
                values[position] = arg.data_ptr()
            for position in plan.scalars:
                if isinstance(values[position], torch.Tensor):
                    raise TypeError
            for position, code in plan.raw:
                values[position] = struct.pack(code, values[position])
            # torch's C++ launcher takes Python ints and floats only (as portkit's twin does)
            plain = not plan.raw and all(type(values[p]) in ok for p, ok in plan.plain_scalars)
            grid, block = config.grid, config.block
            warps = driver_launch.static_warps(grid, block) if plain else 0
            stream = driver_launch.current_stream(torch.cuda.current_device())
            plan.driver.launch(grid, block, config.shared_bytes, stream, values, warps)
        except (TypeError, AttributeError, OverflowError, struct.error) as exc:
            self._check(args)  # the contract's message for the argument at fault
            raise InputError(f"kernel {self.name}: an argument does not fit: {exc}") from None

    def _plan(self, args: Sequence[Any]) -> _Plan:
        plan = contract.cached_plan(self._plans, self._deciders, args)
        if plan is not None:
            return plan
        instantiation = self._check(args)
        ctypes = contract.instantiated_ctypes(self.signature, instantiation)
        lowered = self.spec["lowered"][contract.instantiation_key(instantiation)]
        plan = _Plan(self.signature, ctypes, self.library.kernel(lowered))
        self._plans[tuple(args[i].dtype for i in self._deciders)] = plan
        return plan

    def _check(self, args: Sequence[Any]) -> contract.Instantiation:
        """Check every argument as portkit's twin does, raising its message; the
        instantiation the arguments need."""
        signature = self.signature
        dtypes: list[str | None] = []
        for position, arg in enumerate(args):
            if isinstance(arg, torch.Tensor):
                if not (arg.is_cuda and arg.is_contiguous()):
                    raise contract.tensor_error(
                        self.name, position, arg.device.type, tuple(arg.shape), arg.stride()
                    )
                dtypes.append(str(arg.dtype).removeprefix("torch."))
            else:
                dtypes.append(None)
        instantiation = contract.template_types(signature, dtypes)
        if contract.instantiation_key(instantiation) not in self.spec["lowered"]:
            raise contract.not_compiled(signature, instantiation)
        ctypes = contract.instantiated_ctypes(signature, instantiation)
        for param, ctype, arg, dtype in zip(signature.params, ctypes, args, dtypes):
            contract.check_argument(signature, param, ctype, dtype, type(arg).__name__)
        return instantiation


class Kernels:
    """``k`` for the shipped launchers."""

    def __init__(self, op: str, kernels: dict[str, Kernel]) -> None:
        self.op, self.implementation, self.device = op, "exported twin", "cuda"
        self.poison_outputs = False
        self.knob_choice: Any = None  # portkit.knobs(k, x) reads it; register_ops sets it
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


def register_ops(folder: Path, launchers: dict[str, type[Any]]) -> dict[str, Any]:
    """Register every op of the package (``manifest.json``) and return its callables."""
    manifest = json.loads((folder / "manifest.json").read_text())
    callables = {}
    for name, entry in manifest["ops"].items():
        cls = launchers[name]
        library = Library(folder, entry)
        k = Kernels(name, {n: Kernel(n, spec, library) for n, spec in entry["kernels"].items()})
        # the configuration a launcher picks (portkit.knobs): the shipped tuning table's
        table = json.loads((folder / "tuning" / f"{name}.json").read_text())
        k.knob_choice = knob_choice.KnobChoice(name, table["knobs"], table, OpDefinitionError)
        layout = entry["layout"]
        layout = registration.OpLayout(
            tuple(layout["input_types"]),
            layout["outputs"],
            tuple((kind, index) for kind, index in layout["saved"]),
            tuple(layout["grads"]),
            layout["has_backward"],
        )
        custom = getattr(cls, "check_inputs", None)
        check = input_check(name, entry, custom)
        forward, backward = cls.forward, getattr(cls, "backward", None)
        replaying = None
        if replay.replay_wanted():  # as portkit.load: recorded calls replay (_replay.py)
            names = list(entry["kernels"])
            # Without the author's check_inputs the check reads metadata only, which a
            # replay's key holds: the replaying forward runs it on the calls it runs.
            moved = check if custom is None else None
            outputs = layout.outputs if moved is not None else None  # eager replay too
            forward = replaying = replay.ReplayingLauncher(
                forward, k, names, flat=True, check=moved, outputs=outputs
            )
            if backward is not None:
                backward = replay.ReplayingLauncher(backward, k, names, flat=False)
            if moved is not None:
                check = _checked_by_the_forward
        binding = registration.Binding(forward, backward, k, check, OpDefinitionError)
        qualname = f"{manifest['namespace']}::{name}"
        registered = registration.register(qualname, layout, list(entry["kernels"]), binding)
        if replaying is not None and custom is None:  # a plain-eager call: one function
            op = prepared.ReplayedOp(registered, binding, replaying.replayer)
        else:
            op = registration.OpCallable(registered, binding)
        callables[name] = op
    return callables


def _checked_by_the_forward(inputs: Sequence[Any]) -> None:
    """The binding's check where the replaying forward runs the real one itself."""
