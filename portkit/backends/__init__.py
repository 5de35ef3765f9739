"""The backend registry. Built-ins register exactly as a third party would."""

from __future__ import annotations

from collections.abc import Iterable

from portkit.backends.base import ROLES, Backend
from portkit.backends.numba_gpu import NumbaGPU
from portkit.backends.numba_sim.backend import NumbaSimulator
from portkit.backends.reference import TorchReference
from portkit.backends.sim import PortkitSimulator
from portkit.backends.twin.backend import Twin
from portkit.backends.twin_cpu.backend import TwinCPU
from portkit.errors import PortkitError
from portkit.project.config import ProjectConfig

_REGISTRY: dict[str, type[Backend]] = {}


def register(backend: type[Backend]) -> type[Backend]:
    for attribute in ("name", "role", "device", "description"):
        if not isinstance(getattr(backend, attribute, None), str):
            raise TypeError(f"backend {backend.__name__} must set the class attribute {attribute}")
    if backend.role not in ROLES:
        raise TypeError(f"backend {backend.name}: role {backend.role!r} is not one of {ROLES}")
    if backend.name in _REGISTRY and _REGISTRY[backend.name] is not backend:
        raise TypeError(f"backend name {backend.name!r} is already registered")
    _REGISTRY[backend.name] = backend
    return backend


for _builtin in (TorchReference, PortkitSimulator, NumbaGPU, Twin, TwinCPU, NumbaSimulator):
    register(_builtin)


def names() -> list[str]:
    return list(_REGISTRY)


def create(name: str, config: ProjectConfig) -> Backend:
    if name not in _REGISTRY:
        raise PortkitError(f"unknown backend {name!r}; backends: {', '.join(_REGISTRY)}")
    return _REGISTRY[name](config)


def default_names() -> list[str]:
    """The backends that run when none is named (numba's simulator is only run on request)."""
    return [name for name, backend in _REGISTRY.items() if backend.default]


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


__all__ = ["Backend", "create", "create_all", "default_names", "names", "register", "twin_pairs"]
