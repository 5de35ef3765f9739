"""The backend registry. Built-ins register exactly as a third party would, when first
created: ``portkit sim`` imports the simulator's backend, not the twin's compiler, the
CPU twin's builder or pdb's machinery for numba's simulator."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

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
    builtin = _BUILTINS.get(backend.name)
    taken = _REGISTRY.get(backend.name)
    if builtin and not taken and (backend.__module__, backend.__name__) != builtin[:2]:
        taken = backend_class(backend.name)
    if taken is not None and taken is not backend:
        raise TypeError(f"backend name {backend.name!r} is already registered")
    _REGISTRY[backend.name] = backend
    return backend


def backend_class(name: str) -> type[Backend]:
    if name not in _REGISTRY and name in _BUILTINS:
        module, attribute, _ = _BUILTINS[name]
        register(getattr(importlib.import_module(module), attribute))
    if name not in _REGISTRY:
        raise PortkitError(f"unknown backend {name!r}; backends: {', '.join(names())}")
    return _REGISTRY[name]


def names() -> list[str]:
    return list(dict.fromkeys([*_BUILTINS, *_REGISTRY]))


def create(name: str, config: ProjectConfig) -> Backend:
    return backend_class(name)(config)


def default_names() -> list[str]:
    """The backends that run when none is named (numba's simulator is only run on request)."""
    builtin = [name for name, (_, _, default) in _BUILTINS.items() if default]
    added = [name for name, b in _REGISTRY.items() if name not in _BUILTINS and b.default]
    return builtin + added


def create_all(config: ProjectConfig, selected: list[str] | None = None) -> list[Backend]:
    return [create(n, config) for n in (selected or default_names())]


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
    "names",
    "register",
    "twin_pairs",
]
