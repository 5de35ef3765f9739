"""The backend registry. Built-ins register exactly as a third party would, when first
created: ``portkit sim`` imports the simulator's backend, not the twin's compiler, the
CPU twin's builder or pdb's machinery for numba's simulator."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from portkit.backends import plugins
from portkit.backends.base import ROLES, Backend
from portkit.errors import PortkitError
from portkit.project.config import ProjectConfig

_REGISTRY: dict[str, type[Backend]] = {}
# Built-ins: name -> (module, class, runs by default). tests/backends check each entry
# against the class it names.
_BUILTINS: dict[str, tuple[str, str, bool]] = {
    "torch": ("portkit.backends.reference", "TorchReference", True),
    "sim": ("portkit.backends.sim", "PortkitSimulator", True),
    "numba": ("portkit.backends.numba_gpu", "NumbaGPU", True),
    "twin": ("portkit.backends.twin.backend", "Twin", True),
    "twin-cpu": ("portkit.backends.twin_cpu.backend", "TwinCPU", True),
    "numba-sim": ("portkit.backends.numba_sim.backend", "NumbaSimulator", False),
}


def register(backend: type[Backend]) -> type[Backend]:
    for attribute in ("name", "role", "device", "description"):
        if not isinstance(getattr(backend, attribute, None), str):
            raise TypeError(f"backend {backend.__name__} must set the class attribute {attribute}")
    if backend.role not in ROLES:
        raise TypeError(f"backend {backend.name}: role {backend.role!r} is not one of {ROLES}")
    if "launch_targets" in getattr(backend, "__abstractmethods__", ()):
        raise TypeError(_missing_targets(backend))
    builtin = _BUILTINS.get(backend.name)
    taken = _REGISTRY.get(backend.name)
    if builtin and not taken and (backend.__module__, backend.__name__) != builtin[:2]:
        taken = backend_class(backend.name)
    if taken is not None and taken is not backend:
        raise TypeError(f"backend name {backend.name!r} is already registered")
    _REGISTRY[backend.name] = backend
    return backend


def _missing_targets(backend: type[Backend]) -> str:
    """Why a class without ``launch_targets`` is no backend; the interface before it
    (``kernels(op, poison_outputs=...)``) is named with what to change (docs/design.md,
    "Backends return launch targets": why an error, not an adapter)."""
    own = backend.__mro__[: backend.__mro__.index(Backend)]
    if any("kernels" in vars(cls) for cls in own):
        return (
            f"backend {backend.name} defines kernels(op, poison_outputs=...), which portkit "
            f"no longer calls: rename it launch_targets(op) and return the targets by kernel "
            f"name instead of self.kernel_set(...); portkit adds poisoned outputs and guard "
            f"zones itself (docs/add-a-backend.md)"
        )
    return f"backend {backend.name} must define launch_targets(op) (docs/add-a-backend.md)"


def _register_found(backend: type[Backend]) -> None:
    """Register a third party's class, its mistakes as one-line errors."""
    if _REGISTRY.get(backend.name) is backend:
        return
    try:
        register(backend)
    except TypeError as exc:
        raise PortkitError(f"{backend.__module__}.{backend.__qualname__}: {exc}") from None


def load_project_backends(config: ProjectConfig) -> list[str]:
    """Register the backends the project's ``[tool.portkit] backends`` names; their names."""
    found = plugins.from_project(config.backends, config.root)
    for backend in found:
        _register_found(backend)
    return [b.name for b in found]


def backend_class(name: str, config: ProjectConfig | None = None) -> type[Backend]:
    """The class of backend ``name``: a built-in, one registered already, one the project's
    ``[tool.portkit] backends`` names (with ``config``), or an installed package's entry
    point in the ``portkit.backends`` group, in that order."""
    if name not in _REGISTRY and name in _BUILTINS:
        module, attribute, _ = _BUILTINS[name]
        register(getattr(importlib.import_module(module), attribute))
    if name not in _REGISTRY and config is not None:
        load_project_backends(config)
    if name not in _REGISTRY:
        found = plugins.from_entry_point(name)
        if found is not None:
            _register_found(found)
    if name not in _REGISTRY:
        known = ", ".join(dict.fromkeys([*names(), *plugins.entry_point_names()]))
        raise PortkitError(f"unknown backend {name!r}; backends: {known}")
    return _REGISTRY[name]


def names() -> list[str]:
    """Built-in and registered backends (installed entry points are listed once loaded)."""
    return list(dict.fromkeys([*_BUILTINS, *_REGISTRY]))


def create(name: str, config: ProjectConfig) -> Backend:
    return backend_class(name, config)(config)


def default_names(config: ProjectConfig | None = None) -> list[str]:
    """The backends that run when none is named (numba's simulator is only run on request):
    the built-ins, then registered ones whose ``default`` is True, the project's included."""
    if config is not None:
        load_project_backends(config)
    builtin = [name for name, (_, _, default) in _BUILTINS.items() if default]
    added = [name for name, b in _REGISTRY.items() if name not in _BUILTINS and b.default]
    return builtin + added


def create_all(config: ProjectConfig, selected: list[str] | None = None) -> list[Backend]:
    """The backends ``selected`` names, else the default ones. The project's
    ``[tool.portkit] backends`` load either way, so a wrong entry is said on every run."""
    load_project_backends(config)
    return [create(n, config) for n in (selected or default_names(config))]


def twin_pairs(backends: Iterable[Backend]) -> list[tuple[Backend, Backend]]:
    """(prototype, twin) on the same device, among default backends: numba with the GPU
    twin, the simulator with the CPU twin (the pytest plugin's ``proto~twin`` items)."""
    chosen = [b for b in backends if b.default]
    prototypes = [b for b in chosen if b.role == "prototype"]
    return [
        (next(p for p in prototypes if p.device == twin.device), twin)
        for twin in chosen
        if twin.role == "twin" and any(p.device == twin.device for p in prototypes)
    ]


__all__ = [
    "Backend",
    "backend_class",
    "create",
    "create_all",
    "default_names",
    "load_project_backends",
    "names",
    "register",
    "twin_pairs",
]
