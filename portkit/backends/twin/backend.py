"""``twin``: the hand-ported C CUDA kernels of ``cuda_src/<op>.cu``, compiled with NVRTC.

NVRTC compiles through ``cuda.core``; loading and launching go through the driver API
(``driver_launch``: a cuda.core launch costs 7.9 µs of host time, a driver launch with
the argument buffers built once about 3).
The kernel's parsed signature decides the template instantiation (``float`` or
``double`` from the tensors bound to ``T*`` parameters) and the C type of every
scalar, and a wrong argument is named before anything reaches the GPU.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Collection, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portkit.backends.base import Backend, cuda_unavailable_reason
from portkit.backends.twin.build import compile_twin, nvrtc_syntax_check
from portkit.backends.twin.instances import readable_twin, twin_instantiations
from portkit.backends.twin.source import TwinKernel
from portkit.launch.kernel_set import LaunchTarget
from portkit.runtime.driver_launch import LoadedLibrary
from portkit.runtime.launch_contract import (
    SCALAR_TYPES,
    instantiated_ctypes,
    instantiation_key,
)
from portkit.runtime.twin_launch import TwinLaunch, refuse_arguments, scalar_value

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
    values (NumPy scalars, for the CPU twin's ctypes call); with ``compiled`` (name
    expressions), an instantiation outside it is refused. The checks and messages are
    the runtime's one refusal path (``runtime/twin_launch.py``)."""
    import numpy as np

    is_compiled = None if compiled is None else (lambda i: kernel.expression(i) in compiled)
    scalar = refuse_arguments(kernel, args, is_compiled)
    values: list[Any] = []
    for param, ctype, arg in zip(kernel.params, instantiated_ctypes(kernel, scalar), args):
        if param.pointer:
            values.append(arg.data_ptr())
        else:
            values.append(getattr(np, SCALAR_TYPES[ctype])(scalar_value(kernel, param, ctype, arg)))
    return scalar, values


# (twin source, device) -> (its cubin's digest, the library loaded from it): what a new
# KernelSet launches (``Twin.kernels``), for the MAX_LIBRARIES twins used last. An edited
# twin replaces its entry; a replaced or dropped library is unloaded once no KernelSet or
# recording launches it (``LoadedLibrary``).
_LIBRARIES: OrderedDict[tuple[str, int], tuple[str, LoadedLibrary]] = OrderedDict()
MAX_LIBRARIES = 64  # twins a project works on at once, with room (each mutant is one)


def current_library(path: Path, cubin: bytes, device: int) -> LoadedLibrary:
    """The library of twin ``path``'s ``cubin`` on ``device``, loaded once per content:
    the harness asks for kernels once per case, a resident process (portkit watch, a
    notebook) on every run."""
    key, digest = (str(path), device), hashlib.sha256(cubin).hexdigest()
    current = _LIBRARIES.get(key)
    if current is None or current[0] != digest:
        current = _LIBRARIES[key] = (digest, LoadedLibrary(cubin))
    _LIBRARIES.move_to_end(key)
    while len(_LIBRARIES) > MAX_LIBRARIES:
        _LIBRARIES.popitem(last=False)
    return current[1]


class TwinKernelTarget(TwinLaunch, LaunchTarget):
    """Launches one twin kernel through the runtime's launch loop (``TwinLaunch``: the
    one argument plan, fast path and refusal path an exported package uses too)."""

    def __init__(
        self, kernel: TwinKernel, handles: dict[tuple[str, ...] | None, Any], device: int
    ) -> None:
        # C types of the instantiation, one per template parameter (None: no template)
        # -> CUkernel.
        compiled = {instantiation_key(i) for i in handles}
        super().__init__(kernel, compiled, handles.__getitem__, device)


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

    def launch_targets(self, op: Op) -> dict[str, LaunchTarget]:
        import torch

        arch = _current_device_arch()
        kernels, expressions = readable_twin(op, lambda path: nvrtc_syntax_check(path, arch))
        assert op.twin_path is not None  # readable_twin checked it
        compiled = compile_twin(op.twin_path, expressions, self.config.cache_dir, arch)
        device = torch.cuda.current_device()
        library = current_library(op.twin_path, compiled.cubin, device)
        targets: dict[str, LaunchTarget] = {}
        for name, instantiations in twin_instantiations(op).items():
            kernel = kernels[name]
            handles = {
                combo: library.kernel(compiled.symbols[kernel.expression(combo)])
                for combo in instantiations
            }
            targets[name] = TwinKernelTarget(kernel, handles, device)
        return targets
