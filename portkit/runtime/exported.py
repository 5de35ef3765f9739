"""An exported package's ops: ``k`` for the shipped launchers, kernels loaded from the
package's cubins (or PTX on a newer GPU), and the registration of the ops at import.

The package's ``__init__`` calls ``register_ops`` here. Kernels launch through
``twin_launch.TwinLaunch`` and calls replay through ``replaying.replayed``, as in
``portkit.load``; no numba, NVRTC or portkit (docs/fast-path.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from . import driver_launch, eager_replay, knob_choice, op_inputs, registration
from . import launch_contract as contract
from . import replaying as replay

# What a launcher may use as ``portkit.X`` (launch_contract.LAUNCHER_NAMES).
from .knob_choice import knobs as knobs
from .launch_contract import InputError as InputError
from .launch_contract import LaunchError as LaunchError
from .launch_contract import OpDefinitionError as OpDefinitionError
from .launch_contract import PortkitError as PortkitError
from .launch_contract import cdiv as cdiv
from .launch_contract import sm_count as sm_count
from .twin_launch import TwinLaunch


class Library:
    """An op's compiled twin: the image for this GPU, loaded on first launch."""

    def __init__(self, folder: Path, entry: dict) -> None:
        self.folder, self.entry = folder, entry
        self._library: driver_launch.LoadedLibrary | None = None

    def kernel(self, lowered: str) -> Any:
        if self._library is None:
            self._library = driver_launch.LoadedLibrary(self._image())
        return self._library.kernel(lowered)

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
    """``k.NAME``: one kernel of the package, launched as ``k.NAME[grid, block](*args)``
    through the runtime's launch loop (``twin_launch.TwinLaunch``), as portkit's twin
    launches it, with the launch contract's checks of the configuration."""

    def __init__(self, name: str, spec: dict, library: Library) -> None:
        self.name, self.spec = name, spec
        params = tuple(
            contract.TwinParam(p["name"], p["ctype"], p["pointer"]) for p in spec["params"]
        )
        signature = contract.TwinKernel(name, tuple(spec["templates"]), params)
        lowered = spec["lowered"]

        def handle_of(instantiation: contract.Instantiation) -> Any:
            return library.kernel(lowered[contract.instantiation_key(instantiation)])

        self.target = TwinLaunch(signature, frozenset(lowered), handle_of, None)
        self._bound: dict = {}

    def __getitem__(self, config: Any) -> Callable[..., None]:
        cacheable = contract.cacheable_config(config)
        bound = self._bound.get(config) if cacheable else None
        if bound is None:
            bound = self.bind(contract.launch_config(config, self.name))
            if cacheable:
                if len(self._bound) >= contract.MAX_CACHED_CONFIGS:
                    self._bound.clear()
                self._bound[config] = bound
        return bound

    def bind(self, checked: contract.LaunchConfig) -> Callable[..., None]:
        """The launch of one checked configuration: the fast path, else the checked one."""
        fast, target = self.target.plain_launch(checked), self.target

        def bound(*args: Any) -> None:
            if not fast(args):
                target.launch(checked, args)

        return bound


class Kernels:
    """``k`` for the shipped launchers."""

    def __init__(self, op: str, kernels: dict[str, Kernel]) -> None:
        self.op, self.implementation, self.device = op, "exported twin", "cuda"
        self.kind = contract.KernelsKind.GPU
        self.poison_outputs = False
        self.plain_allocation = True  # the production k: replays run (replaying.py)
        self.knob_choice: Any = None  # portkit.knobs(k, x) reads it; register_ops sets it
        self.targets = {name: kernel.target for name, kernel in kernels.items()}
        self.__dict__.update(kernels)

    def empty(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device="cuda")

    def empty_like(self, tensor: torch.Tensor) -> torch.Tensor:
        if tensor.is_cuda:
            return torch.empty_like(tensor, memory_format=torch.contiguous_format)
        return self.empty(tensor.shape, tensor.dtype)


def register_ops(folder: Path, launchers: dict[str, type[Any]]) -> dict[str, Any]:
    """Register every op of the package (``manifest.json``) and return its callables."""
    manifest = json.loads((folder / "manifest.json").read_text())
    callables = {}
    mode = replay.package_replay_mode()
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
        # What the class defines besides forward is declared by the manifest (export read
        # it from @portkit.op): check_inputs and backward are read, never probed for.
        custom = cls.check_inputs if entry["check_inputs"] else None
        rule = op_inputs.InputRule(
            name,
            tuple(entry["dtypes"]),
            tuple(entry.get("input_dtypes", ())),  # manifests before it had none
            entry["same_shape"],
        )
        check = op_inputs.input_check(rule, custom)
        forward, backward = cls.forward, cls.backward if layout.has_backward else None
        # As portkit.load: recorded calls replay (replaying.py), compiled where it builds.
        forward, backward, check = replay.replayed(
            forward, backward, k, check, custom is not None, layout, mode, folder.name
        )
        binding = registration.Binding(forward, backward, k, check, OpDefinitionError)
        qualname = f"{manifest['namespace']}::{name}"
        registered = registration.register(qualname, layout, list(entry["kernels"]), binding)
        callables[name] = eager_replay.op_callable(registered, binding)
    return callables
