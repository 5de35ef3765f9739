"""The launch contract: what an op's launchers, ``k`` and a twin kernel agree on.

The launch errors, what a launcher may use from ``portkit`` (``cdiv``, ``sm_count``,
``knobs``), the checks of ``k.kernel[grid, block(, shared_bytes)]``, the twin's C types
and instantiations, and the refusal of one not compiled (docs/design.md, "The launch
contract"). Standard library only (torch inside ``sm_count`` alone): a test loads this
file alone.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import Any

# -- errors -----------------------------------------------------------------------------


class PortkitError(Exception):
    """A problem the user can fix; the message says what and where."""


class OpDefinitionError(PortkitError):
    """A prototype file or twin that breaks the author's contract."""


class InputError(PortkitError, ValueError):
    """A tensor handed to an op or kernel is on the wrong device, of the wrong dtype,
    non-contiguous, or of a shape the op does not accept. Also a ``ValueError``: code
    around an op catches a bad argument as one, in portkit and in an exported package."""


class LaunchError(PortkitError):
    """A kernel launch configuration a GPU would reject (too many threads, empty grid, ...)."""


# -- what a launcher may call -------------------------------------------------------------

# ``portkit.X`` names a launcher may use; an exported package offers exactly these.
LAUNCHER_NAMES = (
    "cdiv",
    "sm_count",
    "knobs",
    "InputError",
    "LaunchError",
    "PortkitError",
    "OpDefinitionError",
)


def cdiv(a: int, b: int) -> int:
    """Ceiling division: the number of blocks of ``b`` threads that cover ``a`` items."""
    return -(-a // b)


# On a simulated implementation (kernels run on the CPU) sm_count is a small constant: a
# simulator gains nothing from a large grid, and a small one makes grid-stride loops loop.
SIMULATED_SM_COUNT = 2
# `portkit lint` and `portkit compile` trace launchers on the CPU to see the launches a
# GPU would get; they check for sm_90, so they see an H100's grid.
TRACED_SM_COUNT = 132


@cache
def _cuda_sm_count(device_index: int) -> int:
    import torch

    return torch.cuda.get_device_properties(device_index).multi_processor_count


_get_device: Callable[[], int] | None = None


class KernelsKind(Enum):
    """What a ``k`` does with a launch: runs it on a GPU, runs it on the CPU (simulators,
    the CPU twin), records it unrun (lint's traces), or nothing (registration's fake)."""

    GPU = "gpu"
    SIMULATED = "simulated"
    TRACE = "trace"
    FAKE = "fake"


def sm_count(k: Any) -> int:
    """Streaming multiprocessors of the GPU behind ``k`` (``SIMULATED_SM_COUNT`` when
    ``k`` runs on the CPU): ``grid = min(cdiv(work, threads), 8 * portkit.sm_count(k))``."""
    kind = k.kind  # declared by every k (kernels_protocol.Kernels)
    if kind is not KernelsKind.GPU:
        return TRACED_SM_COUNT if kind is KernelsKind.TRACE else SIMULATED_SM_COUNT
    global _get_device
    if _get_device is None:
        # torch.cuda.current_device() checks lazy initialisation on every call; a launcher
        # asks on every launch, after torch initialised CUDA, so read the device directly.
        import torch

        from .torch_private import cuda_current_device

        torch.cuda.init()
        _get_device = cuda_current_device()
    return _cuda_sm_count(_get_device())


# -- the launch configuration -------------------------------------------------------------

MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = (2**31 - 1, 65535, 65535)
MAX_SHARED_BYTES = 227 * 1024  # opt-in maximum per block on sm_90
# What cuLaunchKernel answers a launch beyond those limits (numba's and CuPy's errors name it).
INVALID_LAUNCH = "CUDA_ERROR_INVALID_VALUE"
MAX_CACHED_CONFIGS = 512  # grids follow input sizes; a model sees a few hundred at most


@dataclass(frozen=True)
class LaunchConfig:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0

    @property
    def threads_per_block(self) -> int:
        return math.prod(self.block)


def _dims(value: Any, what: str, kernel: str) -> tuple[int, int, int]:
    """Python's index protocol (an int, an integer NumPy scalar, a SymInt); not a bool."""
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    try:
        if 1 <= len(items) <= 3 and not any(isinstance(i, bool) for i in items):
            x, y, z = (*(operator.index(i) for i in items), 1, 1)[:3]
            return x, y, z
    except TypeError:
        pass
    raise LaunchError(f"kernel {kernel}: {what} must be an int or 1-3 ints, got {value!r}")


def _within_limits(kernel: str, what: str, dims: tuple[int, ...], limits: tuple[int, ...]) -> None:
    for axis, (d, limit) in enumerate(zip(dims, limits)):
        if d > limit:
            raise LaunchError(
                f"kernel {kernel}: {what} dimension {'xyz'[axis]}={d} > {limit}"
                f" ({INVALID_LAUNCH} on a GPU)"
            )


def launch_config(config: Any, kernel: str) -> LaunchConfig:
    """Check ``config`` (what went inside ``k.kernel[...]``) as a GPU would."""
    if not isinstance(config, tuple) or len(config) not in (2, 3):
        raise LaunchError(
            f"kernel {kernel}: launch as k.{kernel}[grid, block] or "
            f"k.{kernel}[grid, block, shared_bytes], got [{config!r}]"
        )
    grid, block = _dims(config[0], "grid", kernel), _dims(config[1], "block", kernel)
    shared = int(config[2]) if len(config) == 3 else 0
    result = LaunchConfig(grid, block, shared)
    if any(d <= 0 for d in block):
        raise LaunchError(f"kernel {kernel}: block {block} has a dimension below 1")
    if result.threads_per_block > MAX_THREADS_PER_BLOCK:
        raise LaunchError(
            f"kernel {kernel}: block {block} asks for {result.threads_per_block} threads per "
            f"block; a GPU allows at most {MAX_THREADS_PER_BLOCK} ({INVALID_LAUNCH} on a GPU)"
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


def cacheable_config(config: Any) -> bool:
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


# -- the twin's types ---------------------------------------------------------------------

# The C type a template parameter is instantiated with for tensors of each dtype: every
# dtype portkit knows (project/dtypes.py). cuda_fp16.h and cuda_bf16.h declare the halves.
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
# C scalar types a kernel parameter may have -> NumPy type name used to pass it.
SCALAR_TYPES = {
    "float": "float32",
    "double": "float64",
    "int": "int32",
    "int32_t": "int32",
    "unsigned": "uint32",
    "unsigned int": "uint32",
    "uint32_t": "uint32",
    "long long": "int64",
    "int64_t": "int64",
    "long": "int64",
    "unsigned long long": "uint64",
    "uint64_t": "uint64",
    "size_t": "uint64",
    "bool": "bool_",
    "short": "int16",
    "signed char": "int8",
    "unsigned char": "uint8",
    "uint8_t": "uint8",
    "int8_t": "int8",
    "int16_t": "int16",
}
# Element types a pointer parameter may have beyond the scalars: half precision and
# vector types (their tensor's dtype is the element's: float4* takes float32 tensors).
POINTER_ONLY_TYPES = {
    "__half": "float16",
    "half": "float16",
    "__nv_bfloat16": "bfloat16",
    "nv_bfloat16": "bfloat16",
    "float2": "float32",
    "float4": "float32",
    "double2": "float64",
    "int2": "int32",
    "int4": "int32",
}
# The dtype of the tensor a pointer parameter of a fixed C type takes (no entry: any).
DTYPE_OF_C_SCALAR = {
    **{c: d for c, d in SCALAR_TYPES.items() if d != "bool_"},
    "bool": "bool",
    **POINTER_ONLY_TYPES,
}

Instantiation = tuple[str, ...] | None  # one C type per template parameter; None: no template


@dataclass(frozen=True)
class TwinParam:
    name: str
    ctype: str  # base type: "T", "float", "int", ...
    pointer: bool


@dataclass(frozen=True)
class TwinKernel:
    """A twin kernel's signature (``backends/twin/source.py`` reads it from the ``.cu``;
    an exported package from its manifest)."""

    name: str
    template_params: tuple[str, ...]
    params: tuple[TwinParam, ...]
    line: int = 0

    @property
    def template_param(self) -> str | None:
        """The first template parameter (most twins have one), or None."""
        return self.template_params[0] if self.template_params else None

    def expression(self, scalar: str | tuple[str, ...] | None) -> str:
        """The NVRTC name expression: ``k<float>`` or ``k<float, int>`` for a template."""
        if not self.template_params:
            return self.name
        if isinstance(scalar, str):  # one C type for every template parameter
            scalar = (scalar,) * len(self.template_params)
        scalars = tuple(scalar or ())
        return f"{self.name}<{', '.join(scalars)}>"


def instantiation_key(instantiation: Instantiation) -> str:
    """How an exported manifest keys an instantiation's lowered name: ``"__half, float"``
    (``""`` for a kernel without a template)."""
    return ", ".join(instantiation or ())


def template_types(kernel: TwinKernel, dtypes: Sequence[str | None]) -> Instantiation:
    """The instantiation a launch needs, from the dtype of each argument (None for a
    scalar): the first ``T*`` tensor decides T. Raises InputError when the tensors
    cannot decide it."""
    if len(dtypes) != len(kernel.params):
        raise InputError(
            f"twin kernel {kernel.name} takes {len(kernel.params)} arguments "
            f"({', '.join(p.name for p in kernel.params)}), got {len(dtypes)}"
        )
    chosen: dict[str, str] = {}  # template parameter -> C type
    for param, dtype in zip(kernel.params, dtypes):
        if dtype is None or not (param.pointer and param.ctype in kernel.template_params):
            continue
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
    return tuple(chosen[t] for t in kernel.template_params) or None


def not_compiled(kernel: TwinKernel, instantiation: Instantiation) -> InputError:
    # ``T=__half, A=float``, as NVRTC's failures name an instantiation
    types = ", ".join(f"{t}={c}" for t, c in zip(kernel.template_params, instantiation or ()))
    return InputError(
        f"twin kernel {kernel.name} was not compiled with {types}: "
        f"no case of the op launches it; add a case with those dtypes"
    )


def instantiated_ctypes(kernel: TwinKernel, instantiation: Instantiation) -> list[str]:
    """Each parameter's C type in ``instantiation`` (a template parameter replaced by its
    C type); a pointer's tensor must have ``DTYPE_OF_C_SCALAR.get(ctype)`` (None: any)."""
    chosen = dict(zip(kernel.template_params, instantiation or ()))
    return [chosen.get(p.ctype, p.ctype) for p in kernel.params]


def deciders(kernel: TwinKernel) -> tuple[int, ...]:
    """The position of the first pointer of each template parameter's type: the tensors
    whose dtypes decide the instantiation (``template_types``), so a launcher's plan for
    an instantiation can be found by their dtypes alone."""
    params = kernel.params
    return tuple(
        next(i for i, p in enumerate(params) if p.pointer and p.ctype == t)
        for t in kernel.template_params
        if any(p.pointer and p.ctype == t for p in params)
    )


# -- argument checks ----------------------------------------------------------------------


def tensor_error(
    kernel: str,
    position: int,
    device_type: str,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    device: str = "cuda",
) -> InputError:
    """Why a tensor argument cannot be launched on ``device``: it lives elsewhere, or it
    is not contiguous (kernels index it in C order)."""
    where = f"kernel {kernel}, argument {position}"
    if device_type != device:
        return InputError(
            f"{where}: tensor is on {device_type}, this implementation runs on "
            f"{device}; move it with .to({device!r})"
        )
    return InputError(
        f"{where}: tensor of shape {shape} with strides {strides} is not contiguous; "
        f"pass .contiguous()"
    )


def check_argument(
    kernel: TwinKernel, param: TwinParam, ctype: str, dtype: str | None, type_name: str
) -> None:
    """Refuse an argument ``param`` (of C type ``ctype`` in this instantiation) cannot
    take: ``dtype`` is the argument's dtype name if it is a tensor, else None, and
    ``type_name`` its Python type's name."""
    where = f"twin kernel {kernel.name}, parameter {param.name}"
    if param.pointer:
        if dtype is None:
            raise InputError(f"{where} is a pointer; pass a tensor, not {type_name}")
        expected = DTYPE_OF_C_SCALAR.get(ctype)
        if expected and dtype != expected:
            raise InputError(f"{where} is {ctype}*; got a {dtype} tensor")
        return
    if dtype is not None:
        raise InputError(f"{where} is a {ctype} scalar; got a tensor")
    if ctype not in SCALAR_TYPES:
        raise InputError(f"{where} is a {ctype} scalar, which portkit cannot pass; make it float")
