"""portkit: write a custom GPU op once as numba prototype and C CUDA twin; simulate it
on a CPU; check prototype, twin and PyTorch reference against each other on a GPU.

Importing portkit is cheap: torch, numba and cuda.core load only when an op runs.
"""

import sys
from collections.abc import Callable
from typing import Any

from portkit.errors import (
    InputError,
    KernelError,
    LaunchError,
    OpDefinitionError,
    PortkitError,
    TwinCompileError,
)
from portkit.project import cases
from portkit.project.spec import op
from portkit.project.tolerances import Tolerance
from portkit.runtime.knob_choice import knobs
from portkit.runtime.launch_contract import cdiv, sm_count

# `from portkit.cases import custom` (the README's spelling) finds the cases module.
sys.modules.setdefault(f"{__name__}.cases", cases)

__version__ = "0.1.0"

__all__ = [
    "InputError",
    "KernelError",
    "LaunchError",
    "OpDefinitionError",
    "PortkitError",
    "Tolerance",
    "TwinCompileError",
    "cases",
    "cdiv",
    "knobs",
    "op",
    "sm_count",
    "load",
    "simt",
    "check",
    "sim",
    "diff",
]

# The notebook API (portkit/api), imported on first use.
_API = ("check", "sim", "diff")


def __getattr__(name: str) -> Any:
    """``portkit.simt`` and the notebook API (``portkit.check``, ``sim``, ``diff``)
    without importing them (and numba's checks) on ``import portkit``."""
    import importlib

    if name == "simt":
        return importlib.import_module("portkit.simt")
    if name in _API:
        return getattr(importlib.import_module("portkit.api"), name)
    raise AttributeError(f"module 'portkit' has no attribute {name!r}")


def load(name: str, implementation: str = "twin", session: Any = None) -> Callable[..., Any]:
    """The op ``name`` of the current project as a differentiable function:
    ``portkit.load("sigmoid", "twin")(x)``. It is also registered as the PyTorch op
    ``torch.ops.<namespace>.<name>_<implementation>`` (namespace from ``[tool.portkit]``,
    default ``portkit``), so torch.compile, CUDA graphs and opcheck see it. The op is read
    as its files are now; ``session`` (a ``portkit.project.session.Session`` a resident
    process keeps and refreshes) is used instead of reading the project again. It takes
    CuPy arrays too (viewed through DLPack, run on CuPy's current stream) and then returns
    CuPy arrays, without autograd (``torch_op/cupy_arrays.py``)."""
    from portkit.backends import create
    from portkit.errors import BackendUnavailable
    from portkit.project.shared import project_session
    from portkit.torch_op.cupy_arrays import cupy_call
    from portkit.torch_op.load import registered_callable

    if session is None:  # the project's one session (project/shared.py), as check's
        session = project_session(require=False)
        session.refresh()  # the op as its files are now
    config = session.config
    op_ = session.op(name)
    backend = create(implementation, config)
    reason = backend.unavailable_reason or backend.unsupported_reason(op_)
    if reason:
        raise BackendUnavailable(f"{implementation} cannot run op {name}: {reason}")
    loaded = registered_callable(
        op_, backend.kernels(op_), config.namespace, replay=config.settings.replay
    )
    loaded.other_arrays = cupy_call
    return loaded
