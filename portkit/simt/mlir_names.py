"""numba-cuda-mlir's names as numba-cuda's, for the simulator.

A kernel written against ``from numba_cuda_mlir import cuda`` (numba-cuda's successor,
0.6) names that package's ``cuda`` module, its intrinsics (``cuda.grid``,
``cuda.shared.array``, ``cuda.atomic.add``...) and its number types. They are the same
names with the same meaning as numba-cuda's, which the simulator resolves; so a kernel's
scope is translated here, name by name, before the kernel is rewritten. Nothing is
imported: a kernel can name numba-cuda-mlir's objects only once its module imported it.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
import warnings
from typing import Any, NamedTuple

MLIR_CUDA = "numba_cuda_mlir.cuda"

# Values whose identity means nothing (small ints are shared): never translated by id.
_PLAIN = (int, float, complex, str, bytes, bool, type(None))

_tables: dict[int, tuple[types.ModuleType, dict[int, Any]]] = {}


def _table(mlir_cuda: types.ModuleType) -> dict[int, Any]:
    """id of each of numba-cuda-mlir's ``cuda`` attributes -> numba-cuda's of that name."""
    cached = _tables.get(id(mlir_cuda))
    if cached is not None and cached[0] is mlir_cuda:
        return cached[1]
    from numba import cuda

    table: dict[int, Any] = {id(mlir_cuda): cuda}
    for name in dir(mlir_cuda):
        value = getattr(mlir_cuda, name, None)
        if name.startswith("__") or isinstance(value, _PLAIN) or not hasattr(cuda, name):
            continue
        table.setdefault(id(value), getattr(cuda, name))
    _tables[id(mlir_cuda)] = (mlir_cuda, table)  # the module keeps the ids' objects alive
    return table


def forget() -> None:
    """Drop the cached tables: ``simulated_cuda()`` swaps the module's names, and a table
    built meanwhile would hold ids of objects freed once they are restored."""
    _tables.clear()


class MlirModules(NamedTuple):
    """numba-cuda-mlir's modules ``simulated_cuda()`` switches, as numba-cuda's."""

    cuda: types.ModuleType
    devices: types.ModuleType  # its test helpers ask devices.gpus for the device
    driver: types.ModuleType


def installed_modules() -> MlirModules | None:
    """numba-cuda-mlir's ``cuda`` and driver-facing modules, imported, where the package
    is installed (importing it costs seconds; only an installed package pays)."""
    if importlib.util.find_spec("numba_cuda_mlir") is None:
        return None
    try:
        cuda = importlib.import_module(MLIR_CUDA)
        devices = importlib.import_module("numba_cuda_mlir.numba_cuda.cudadrv.devices")
        driver = importlib.import_module("numba_cuda_mlir.numba_cuda.cudadrv.driver")
    except ImportError as exc:  # a broken install must not stop numba-cuda's suites
        warnings.warn(f"numba_cuda_mlir not simulated: {exc}", stacklevel=2)
        return None
    return MlirModules(cuda, devices, driver)


def as_numba_names(scope: dict[str, Any]) -> dict[str, Any]:
    """``scope`` (a kernel's globals and closure) with numba-cuda-mlir's ``cuda`` module,
    and everything it exports that numba-cuda exports too, replaced by numba-cuda's."""
    mlir_cuda = sys.modules.get(MLIR_CUDA)
    if mlir_cuda is None:
        return scope
    table = _table(mlir_cuda)
    return {
        name: value if isinstance(value, _PLAIN) else table.get(id(value), value)
        for name, value in scope.items()
    }


def is_mlir_kernel(dispatcher: Any) -> bool:
    """A kernel or device function built by numba-cuda-mlir's ``cuda.jit``."""
    return type(dispatcher).__module__.split(".")[0] == "numba_cuda_mlir"


def mlir_kernel_names(op: Any) -> list[str]:
    """The op's kernels written against numba-cuda-mlir, sorted."""
    return sorted(name for name, k in op.kernels.items() if is_mlir_kernel(k))


# Why portkit's compile and lint checks leave such kernels out (docs/numba-world.md).
NOT_COMPILED = (
    "written against numba-cuda-mlir: portkit compiles and lints numba-cuda kernels, and "
    "numba-cuda-mlir 0.6 cannot compile without a GPU (it reads the device's compute "
    "capability even when given cc); the numba backend compiles it on a GPU"
)
