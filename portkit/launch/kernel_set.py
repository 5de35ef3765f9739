"""``k``: the kernels of one implementation, as the host launcher sees them.

``k.sigmoid_fwd[grid, block](x, out, n)`` or ``k.kernel[grid, block, shared_bytes](...)``
launches the kernel of that name on whichever implementation ``k`` belongs to. The
launch configuration (by the launch contract, ``portkit/runtime/launch_contract.py``, which an
exported package ships too) and the arguments are checked here, once, for every
backend, so a user's mistake gets the same message in the simulator, on a GPU and in
an exported package.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from portkit.errors import InputError
from portkit.launch.poison import poison_bits
from portkit.runtime.kernels_protocol import no_kernel_message

# The configuration checks, its limits and which configurations may key a cache are the
# launch contract's, shared with the exported runtime.
from portkit.runtime.launch_contract import (
    MAX_CACHED_CONFIGS,
    KernelsKind,
    cacheable_config,
    launch_config,
    tensor_error,
)
from portkit.runtime.launch_contract import LaunchConfig as LaunchConfig

if TYPE_CHECKING:
    import torch

    from portkit.launch.guards import GuardZones
    from portkit.runtime.knob_choice import KnobChoice


class LaunchTarget:
    """One backend's way of running one kernel: ``launch(config, args)``. Every target
    derives from this class; what it can do beyond launching it declares here (the table
    in docs/design.md, "Declared capabilities"):

    - ``has_plain_launch``: it offers ``plain_launch(config)``, a function of the
      arguments that launches straight away when every argument passes the target's own
      cheap checks (device, layout, dtype) and returns True, or returns False, having
      launched nothing, when any argument is in doubt; the launch then takes the checked
      path below, whose errors name the problem.
    - ``has_replay_step`` (with ``has_plain_launch``): it offers ``replay_step(config,
      args)``: right after a plain launch with ``args``, a
      ``runtime.steps.ReplayLaunch`` that repeats it with other data pointers, or
      None; ``portkit.load`` then replays recorded calls (``runtime/replaying.py``).
    """

    has_plain_launch: ClassVar[bool] = False
    has_replay_step: ClassVar[bool] = False

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define launch()")

    def plain_launch(self, config: LaunchConfig) -> Callable[[Sequence[Any]], bool]:
        raise NotImplementedError(f"{type(self).__name__} declares no plain launch")

    def replay_step(self, config: LaunchConfig, args: Sequence[Any]) -> Any:
        raise NotImplementedError(f"{type(self).__name__} declares no replay step")


_modules: dict[str, Any] = {}
_DEVICE_FLAG = {"cuda": "is_cuda", "cpu": "is_cpu"}


def _torch_numpy() -> tuple[Any, Any]:
    """torch and numpy, imported on first use (``portkit --help`` imports neither) and then
    read from a dict: an ``import`` statement costs about a microsecond on every launch."""
    if not _modules:
        import numpy
        import torch

        _modules.update(torch=torch, numpy=numpy, scalars=(bool, int, float, numpy.generic))
    return _modules["torch"], _modules["scalars"]


def check_kernel_args(kernel: str, args: Sequence[Any], device: str) -> list[Any]:
    """Tensors must live on ``device`` and be contiguous; autograd is stripped."""
    torch, scalars = _torch_numpy()
    on_device = _DEVICE_FLAG.get(device, "")  # tensor.is_cuda: no torch.device per call
    checked = []
    for position, arg in enumerate(args):
        if isinstance(arg, torch.Tensor):
            if not (getattr(arg, on_device, False) and arg.is_contiguous()):
                shape, strides = tuple(arg.shape), arg.stride()
                raise tensor_error(kernel, position, arg.device.type, shape, strides, device)
            checked.append(arg.detach() if arg.requires_grad else arg)
        elif isinstance(arg, scalars):
            checked.append(arg)
        else:
            raise InputError(
                f"kernel {kernel}, argument {position}: {type(arg).__name__} is neither a tensor "
                f"nor a number; kernels take torch tensors and Python or NumPy scalars"
            )
    return checked


class BoundLaunch:
    def __init__(self, kernel: Kernel, config: LaunchConfig):
        self._kernel, self._config = kernel, config
        target = kernel.target
        self._plain_launch = target.plain_launch(config) if target.has_plain_launch else None

    def __call__(self, *args: Any) -> None:
        kernel = self._kernel
        owner = kernel.owner
        # The production path (no guards) lets a target that checks its own arguments
        # launch without the generic pass below; anything it doubts comes back here.
        if self._plain_launch is not None and owner.guards is None and self._plain_launch(args):
            return
        checked = check_kernel_args(kernel.name, args, owner.device)
        kernel.target.launch(self._config, checked)
        if owner.guards is not None:
            owner.guards.verify(owner.op, owner.implementation, kernel.name, checked)


class Kernel:
    def __init__(self, name: str, target: LaunchTarget, owner: KernelSet) -> None:
        self.name, self.target, self.owner = name, target, owner
        # Checked launch configurations by what went inside k.kernel[...]: a launcher
        # launches the same few configurations over and over.
        self._bound: dict[tuple, BoundLaunch] = {}

    def __getitem__(self, config: Any) -> BoundLaunch:
        # The common k.kernel[blocks, threads] first, checked without a loop.
        if type(config) is tuple and len(config) == 2:
            grid, block = config
            if type(grid) is int and type(block) is int:
                bound = self._bound.get(config)
                if bound is not None:
                    return bound
        plain = cacheable_config(config)
        if plain:
            bound = self._bound.get(config)
            if bound is not None:
                return bound
        bound = BoundLaunch(self, launch_config(config, self.name))
        if plain:
            if len(self._bound) >= MAX_CACHED_CONFIGS:
                self._bound.clear()
            self._bound[config] = bound
        return bound


class KernelSet:
    """The ``k`` handed to an op's forward and backward launchers."""

    def __init__(
        self,
        op: str,
        implementation: str,
        device: str,
        targets: Mapping[str, LaunchTarget],
        poison_outputs: bool = False,
        guards: GuardZones | None = None,
        knob_choice: KnobChoice | None = None,
        kind: KernelsKind | None = None,
    ) -> None:
        self.op = op
        # The op's knobs and tuned table (portkit.runtime.knob_choice): what
        # portkit.knobs(k, x) reads.
        self.knob_choice = knob_choice
        self.implementation = implementation
        self.device = device
        # What a launch does (the runtime's kernels_protocol): a GPU's or a simulation's
        # by the device unless said (lint's trace says TRACE).
        if kind is None:
            kind = KernelsKind.GPU if device == "cuda" else KernelsKind.SIMULATED
        self.kind = kind
        # Both composed in by whoever asks for k (launch/compose.py), fixed for its life:
        # the harness poisons outputs and puts them and the inputs in guarded buffers,
        # verified after every launch; the production path (portkit.load) does neither.
        self.poison_outputs = poison_outputs
        self.guards = guards
        self._device_flag = _DEVICE_FLAG.get(device, "")
        # Whether empty_like may be torch's plain allocation (decided here, not on every
        # call, because a launcher allocates on every call).
        self.plain_allocation = not poison_outputs and guards is None
        self.targets = dict(targets)
        self._kernels = {name: Kernel(name, t, self) for name, t in targets.items()}
        # Kernels as instance attributes: k.name finds them without __getattr__.
        for name, kernel in self._kernels.items():
            if not hasattr(type(self), name) and name not in self.__dict__:
                self.__dict__[name] = kernel

    def wrapped(self, wrap: Callable[[str, LaunchTarget], LaunchTarget]) -> KernelSet:
        """The same kernels with every launch target passed through ``wrap`` (to record
        launches, for instance)."""
        targets = {name: wrap(name, target) for name, target in self.targets.items()}
        return KernelSet(
            self.op,
            self.implementation,
            self.device,
            targets,
            self.poison_outputs,
            self.guards,
            knob_choice=self.knob_choice,
            kind=self.kind,
        )

    def __getattr__(self, name: str) -> Kernel:
        kernels = self.__dict__.get("_kernels", {})
        if name in kernels:
            return kernels[name]
        where = f" in its {self.__dict__.get('implementation')} implementation"
        raise AttributeError(no_kernel_message(self.op, name, list(kernels), where))

    def empty(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        """An output buffer on this implementation's device. During checks it is filled
        with NaN (or -1 for integers) so that an element no kernel writes fails, and it
        sits between guard zones (``launch/guards.py``) that catch stores past its ends."""
        torch, _ = _torch_numpy()
        if self.guards is not None:
            out = self.guards.allocate(tuple(shape), dtype, self.device)
        else:
            out = torch.empty(tuple(shape), dtype=dtype, device=self.device)
        if not self.poison_outputs:
            return out
        poison = poison_bits(dtype)
        if poison is not None:
            out.view(poison[0]).fill_(poison[1])
        else:
            out.fill_(math.nan if dtype.is_floating_point else -1)
        return out

    def empty_like(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.plain_allocation and getattr(tensor, self._device_flag, False):
            # The cheapest allocation torch offers from Python; C order whatever the
            # strides of ``tensor``, because kernels index outputs in C order.
            torch, _ = _torch_numpy()
            return torch.empty_like(tensor, memory_format=torch.contiguous_format)
        return self.empty(tensor.shape, tensor.dtype)
