"""``k``: the kernels of one implementation, as the host launcher sees them.

``k.sigmoid_fwd[grid, block](x, out, n)`` or ``k.kernel[grid, block, shared_bytes](...)``
launches the kernel of that name on whichever implementation ``k`` belongs to. The
launch configuration and the arguments are checked here, once, for every backend, so
a user's mistake gets the same message whether it runs in the simulator or on a GPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from portkit.errors import InputError, LaunchError
from portkit.launch.poison import poison_bits

if TYPE_CHECKING:
    import torch

    from portkit.launch.guards import GuardZones

MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = (2**31 - 1, 65535, 65535)
MAX_SHARED_BYTES = 227 * 1024  # opt-in maximum per block on sm_90


@dataclass(frozen=True)
class LaunchConfig:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0

    @property
    def threads_per_block(self) -> int:
        return math.prod(self.block)


def _dims(value: Any, what: str, kernel: str) -> tuple[int, int, int]:
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(items) <= 3 or not all(_is_int(i) for i in items):
        raise LaunchError(f"kernel {kernel}: {what} must be an int or 1-3 ints, got {value!r}")
    return tuple(int(i) for i in items) + (1,) * (3 - len(items))  # type: ignore[return-value]


def _is_int(value: Any) -> bool:
    """An int or an integer NumPy scalar; bool is not a dimension."""
    return not isinstance(value, bool) and hasattr(value, "__index__")


def _within_limits(kernel: str, what: str, dims: tuple[int, ...], limits: tuple[int, ...]) -> None:
    for axis, (d, limit) in enumerate(zip(dims, limits)):
        if d > limit:
            raise LaunchError(f"kernel {kernel}: {what} dimension {'xyz'[axis]}={d} > {limit}")


def launch_config(config: Any, kernel: str) -> LaunchConfig:
    """Check ``config`` (what went inside ``k.kernel[...]``) as a GPU would."""
    if not isinstance(config, tuple) or len(config) not in (2, 3):
        raise LaunchError(
            f"kernel {kernel}: launch as k.{kernel}[grid, block] or "
            f"k.{kernel}[grid, block, shared_bytes], got [{config!r}]"
        )
    grid = _dims(config[0], "grid", kernel)
    block = _dims(config[1], "block", kernel)
    shared = int(config[2]) if len(config) == 3 else 0
    result = LaunchConfig(grid, block, shared)
    if any(d <= 0 for d in block):
        raise LaunchError(f"kernel {kernel}: block {block} has a dimension below 1")
    if result.threads_per_block > MAX_THREADS_PER_BLOCK:
        raise LaunchError(
            f"kernel {kernel}: block {block} asks for {result.threads_per_block} threads per "
            f"block; a GPU allows at most {MAX_THREADS_PER_BLOCK}"
        )
    _within_limits(kernel, "block", block, MAX_BLOCK_DIMS)
    if any(d <= 0 for d in grid):
        raise LaunchError(
            f"kernel {kernel}: grid {grid} has a dimension below 1, which a GPU rejects; "
            f"skip the launch when there is no work (e.g. `if n == 0: return out`)"
        )
    _within_limits(kernel, "grid", grid, MAX_GRID_DIMS)
    if not 0 <= shared <= MAX_SHARED_BYTES:
        raise LaunchError(
            f"kernel {kernel}: {shared} bytes of dynamic shared memory; "
            f"the range is 0..{MAX_SHARED_BYTES}"
        )
    return result


class LaunchTarget(Protocol):
    """One backend's way of running one kernel.

    A target may also offer ``plain_launch(config)``, a function of the arguments that
    launches straight away when every argument passes the target's own cheap checks
    (device, layout, dtype) and returns True, or returns False, having launched nothing,
    when any argument is in doubt; the launch then takes the checked path below, whose
    errors name the problem. A target with ``plain_launch`` may also offer
    ``replay_step(config, args)``: right after a plain launch with ``args``, a
    ``launch.replay.steps.ReplayLaunch`` that repeats it with other data pointers, or
    None; ``portkit.load`` then replays recorded calls (``launch/replay``).
    """

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None: ...


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
                _explain_tensor(kernel, position, arg, device)
            checked.append(arg.detach() if arg.requires_grad else arg)
        elif isinstance(arg, scalars):
            checked.append(arg)
        else:
            raise InputError(
                f"kernel {kernel}, argument {position}: {type(arg).__name__} is neither a tensor "
                f"nor a number; kernels take torch tensors and Python or NumPy scalars"
            )
    return checked


def _explain_tensor(kernel: str, position: int, arg: torch.Tensor, device: str) -> None:
    where = f"kernel {kernel}, argument {position}"
    if arg.device.type != device:
        raise InputError(
            f"{where}: tensor is on {arg.device.type}, this implementation runs on "
            f"{device}; move it with .to({device!r})"
        )
    raise InputError(
        f"{where}: tensor of shape {tuple(arg.shape)} with strides {arg.stride()} "
        f"is not contiguous; pass .contiguous()"
    )


class BoundLaunch:
    def __init__(self, kernel: Kernel, config: LaunchConfig):
        self._kernel, self._config = kernel, config
        plain_launch = getattr(kernel.target, "plain_launch", None)
        self._plain_launch = plain_launch(config) if plain_launch is not None else None

    def __call__(self, *args: Any) -> None:
        kernel = self._kernel
        owner = kernel.owner
        # The production path (no guards) lets a target that checks its own arguments
        # launch without the generic pass below; anything it doubts comes back here.
        if self._plain_launch is not None and owner._guards is None and self._plain_launch(args):
            return
        checked = check_kernel_args(kernel.name, args, owner.device)
        kernel.target.launch(self._config, checked)
        if owner.guards is not None:
            owner.guards.verify(owner.op, owner.implementation, kernel.name, checked)


MAX_CACHED_CONFIGS = 512  # grids follow input sizes; a model sees a few hundred at most


def _plain_config(config: Any) -> bool:
    """A tuple of ints and tuples of ints: safe as a cache key (4.0 == 4 and True == 1
    hash alike, and those must still reach launch_config's error)."""
    if type(config) is not tuple:
        return False
    for item in config:
        if type(item) is not int:
            if type(item) is not tuple:
                return False
            for d in item:
                if type(d) is not int:
                    return False
    return True


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
        plain = _plain_config(config)
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
    ) -> None:
        self.op = op
        self.implementation = implementation
        self.device = device
        self._poison_outputs = poison_outputs
        # Set by the harness while checking: outputs and inputs in guarded buffers,
        # verified after every launch. None on the production path (portkit.load).
        self._guards = guards
        self._device_flag = _DEVICE_FLAG.get(device, "")
        self._update_allocation()
        self.targets = dict(targets)
        self._kernels = {name: Kernel(name, t, self) for name, t in targets.items()}
        # Kernels as instance attributes: k.name finds them without __getattr__.
        for name, kernel in self._kernels.items():
            if not hasattr(type(self), name) and name not in self.__dict__:
                self.__dict__[name] = kernel

    @property
    def guards(self) -> GuardZones | None:
        return self._guards

    @guards.setter
    def guards(self, guards: GuardZones | None) -> None:
        self._guards = guards
        self._update_allocation()

    @property
    def poison_outputs(self) -> bool:
        return self._poison_outputs

    @poison_outputs.setter
    def poison_outputs(self, poison: bool) -> None:
        self._poison_outputs = poison
        self._update_allocation()

    def _update_allocation(self) -> None:
        """Whether ``empty_like`` may be torch's plain allocation (decided here, not on
        every call, because a launcher allocates on every call)."""
        self._plain_allocation = not self._poison_outputs and self._guards is None

    def wrapped(self, wrap: Callable[[str, LaunchTarget], LaunchTarget]) -> KernelSet:
        """The same kernels with every launch target passed through ``wrap`` (to record
        launches, for instance)."""
        targets = {name: wrap(name, target) for name, target in self.targets.items()}
        return KernelSet(
            self.op, self.implementation, self.device, targets, self.poison_outputs, self.guards
        )

    def __getattr__(self, name: str) -> Kernel:
        kernels = self.__dict__.get("_kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(
            f"op {self.op} has no kernel {name!r} in its {self.__dict__.get('implementation')} "
            f"implementation; kernels: {', '.join(sorted(kernels)) or 'none'}"
        )

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
        if self._plain_allocation and getattr(tensor, self._device_flag, False):
            # The cheapest allocation torch offers from Python; C order whatever the
            # strides of ``tensor``, because kernels index outputs in C order.
            torch, _ = _torch_numpy()
            return torch.empty_like(tensor, memory_format=torch.contiguous_format)
        return self.empty(tensor.shape, tensor.dtype)
