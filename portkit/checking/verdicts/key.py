"""What a verdict depends on, as one digest per unit of checking.

A *unit* is what runs together and so passes or fails together: one backend on one case
(its forward, backward and gradcheck rows), one prototype against one twin on one case
(the ``vs <twin>`` row), an op's compile rows, its lint row. Its key is the SHA-256 of:

- the op's sources (``op_sources``): the prototype file and every project module it
  imports, followed through the imports transitively (project/imports.py); the twin
  source and every header under its folder (the twin build's own rule). The reference,
  the cases and the declared tolerances live in the prototype, so they are covered;
- the case as data (name, shapes, dtype(s), seed, special values, flags; ``case_identity``);
- the project's settings that change a verdict (strict, lint-warnings, sim-budget,
  lockstep fallback, archs, namespace) and the session's switches (simulator engine and
  math library);
- portkit's version and a digest of its own source (an edited portkit invalidates all);
- Python, NumPy, numba, numba-cuda, torch, its CUDA runtime and NVRTC versions;
- where the unit runs (``device_identity``): for a GPU unit the GPU's name, compute
  capability and driver version, for a CPU unit "cpu", the architecture and the C++
  compiler, so a CPU phase's verdicts are served on a GPU runner and a GPU's are not
  served on another GPU;
- the unit's identity: its kind, the backend name(s), the check.

Modules imported dynamically (``importlib.import_module`` with a computed name) are not
followed: docs/verdict-cache.md says so.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from portkit import cache_files
from portkit.project.imports import prototype_imports

if TYPE_CHECKING:
    from portkit.project.cases import Case
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op

FORMAT = 1  # bumped when what a key covers changes: every stored verdict then misses
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def op_sources(op: Op, config: ProjectConfig) -> str:
    """The digest of every source file the op's verdicts depend on: the prototype and the
    project modules it imports, the twin and its headers, the op's tuning table."""
    from portkit.backends.twin.build import HEADER_SUFFIXES

    root = config.root.resolve()
    files = prototype_imports(op, config)
    if op.twin_path is not None and op.twin_path.is_file():
        folder = op.twin_path.parent
        headers = sorted(p for p in folder.rglob("*") if p.suffix in HEADER_SUFFIXES)
        files += [op.twin_path.resolve(), *(h.resolve() for h in headers)]
    from portkit.project.tuning_table import table_path

    table = table_path(config, op.name)  # which configurations check runs (knobs)
    if table.is_file():
        files.append(table.resolve())
    return cache_files.files_digest(files, root)


def case_identity(case: Case) -> str:
    """The case as data: every field (function objects by name, not address)."""
    return _ADDRESS.sub("", repr(case))


def project_settings(config: ProjectConfig) -> dict[str, Any]:
    """What the project and the session set that can turn a pass into a failure."""
    settings = config.settings
    return {
        "strict": config.strict,
        "lint-warnings": config.lint_warnings_fail,
        "sim-budget": config.sim_budget,
        "lockstep-fallback": (config.lockstep_fallback, settings.lockstep_fallback),
        "archs": list(config.archs),
        "namespace": config.namespace,
        "engine": settings.simt_engine,
        "math": settings.sim_math,
    }


@functools.cache
def portkit_source() -> str:
    """portkit's version and a digest of every file of its package."""
    from portkit import __version__

    return f"{__version__} {cache_files.package_digest()}"


def _version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:
        return "absent"


@functools.cache
def library_versions() -> dict[str, str]:
    """Python and the libraries a verdict depends on (no CUDA call)."""
    import numpy
    import torch

    try:
        from portkit.backends.twin.build import nvrtc_version

        nvrtc = nvrtc_version()
    except Exception:  # no NVRTC: twins do not compile here, which the rows say
        nvrtc = "absent"
    return {
        "python": sys.version,
        "numpy": numpy.__version__,
        "numba": _version("numba"),
        "numba-cuda": _version("numba-cuda"),
        "torch": torch.__version__,
        "cuda runtime": str(torch.version.cuda),
        "nvrtc": nvrtc,
    }


@functools.cache
def gpu_identity() -> dict[str, str]:
    """The GPU this process checks on: name, compute capability, driver version; or
    {"gpu": "none"} without one."""
    from portkit.backends.base import cuda_unavailable_reason

    if cuda_unavailable_reason() is not None:
        return {"gpu": "none"}
    import torch

    index = torch.cuda.current_device()
    major, minor = torch.cuda.get_device_capability(index)
    try:  # the driver's CUDA version, e.g. 13000 (torch has no public call for it)
        from cuda.bindings import driver as cuda_driver

        driver = str(cuda_driver.cuDriverGetVersion()[1])
    except Exception:
        driver = "unknown"
    return {
        "gpu": torch.cuda.get_device_name(index),
        "arch": f"sm_{major}{minor}",
        "driver": driver,
    }


@functools.cache
def cpu_identity() -> dict[str, str]:
    from portkit.host_compiler import find_compiler
    from portkit.project.environment import tool_path

    compiler = find_compiler(tool_path("CXX"))
    return {
        "cpu": platform.machine(),
        "c++": compiler.identity if compiler else "none",
    }


def device_identity(device: str) -> dict[str, str]:
    """Where a unit runs: a GPU unit is tied to the GPU, a CPU unit to the CPU side."""
    return gpu_identity() if device == "cuda" else cpu_identity()


def unit_key(
    op: Op,
    config: ProjectConfig,
    sources: str,
    kind: str,
    device: str,
    names: Sequence[str],
    case: Case | None = None,
    check: str = "",
) -> str:
    """The key of one unit; ``sources`` is ``op_sources(op, config)``, computed once."""
    return _digest(
        FORMAT,
        op.name,
        sources,
        case_identity(case) if case is not None else "",
        project_settings(config),
        portkit_source(),
        library_versions(),
        device_identity(device),
        kind,
        list(names),
        check,
    )
