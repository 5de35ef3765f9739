"""Backends from outside portkit: the ``portkit.backends`` entry-point group and the
project's ``[tool.portkit] backends = ["pkg.module:BackendClass"]``.

An installed package declares its backend once, in its own pyproject.toml::

    [project.entry-points."portkit.backends"]
    mine = "my_package.backend:MyBackend"     # the entry point's name is the backend's

and ``portkit check --backend mine`` finds it; a project lists a backend of its own (a
module under its root, or an installed one) in ``[tool.portkit] backends``, and it then
runs with the built-ins. Entry points are read only when a name is not otherwise known
(``import portkit`` and a plain ``portkit check`` never scan the installed packages).
docs/add-a-backend.md walks through one.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from portkit.backends.base import Backend
from portkit.errors import ConfigError, PortkitError

GROUP = "portkit.backends"
_MISSING = object()


def _entry_points() -> list[metadata.EntryPoint]:
    return list(metadata.entry_points(group=GROUP))


def entry_point_names() -> list[str]:
    """The backend names installed packages declare (not loaded)."""
    return sorted({ep.name for ep in _entry_points()})


def _checked(obj: object, where: str, name: str | None = None) -> type[Backend]:
    if not (isinstance(obj, type) and issubclass(obj, Backend)):
        raise PortkitError(f"{where} is not a subclass of portkit.backends.Backend")
    declared = getattr(obj, "name", None)
    if name is not None and declared != name:
        raise PortkitError(
            f"{where} declares name {declared!r}, not its entry point's name {name!r}"
        )
    return obj


def from_entry_point(name: str) -> type[Backend] | None:
    """The backend class an installed package declares under ``name``, or None."""
    found = [ep for ep in _entry_points() if ep.name == name]
    if not found:
        return None
    if len({ep.value for ep in found}) > 1:
        values = ", ".join(sorted(ep.value for ep in found))
        raise PortkitError(f"backend {name!r} is declared by more than one package: {values}")
    ep = found[0]
    where = f"entry point {name} = {ep.value!r} (group {GROUP})"
    try:
        loaded = ep.load()
    except Exception as exc:  # a third party's import: any error is its, said in one line
        raise PortkitError(f"{where} does not load: {type(exc).__name__}: {exc}") from None
    return _checked(loaded, where, name)


def from_reference(reference: str, root: Path, source: str) -> type[Backend]:
    """The class ``"pkg.module:Class"`` names, imported with the project's root first on
    the path (a backend kept in the project needs no install)."""
    module_name, colon, attribute = reference.partition(":")
    where = f"{source}: backend {reference!r}"
    if not colon or not module_name or not attribute:
        raise ConfigError(f'{where} must be "package.module:ClassName"')
    added = str(root) not in sys.path
    if added:
        sys.path.insert(0, str(root))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the project's module: its error, in one line
        why = f"{type(exc).__name__}: {exc}"
        raise ConfigError(f"{where}: cannot import {module_name}: {why}") from None
    finally:
        if added:
            sys.path.remove(str(root))
    obj: object = module
    for part in attribute.split("."):
        obj = getattr(obj, part, _MISSING)
        if obj is _MISSING:
            raise ConfigError(f"{where}: {module_name} has no {attribute}")
    try:
        return _checked(obj, where)
    except PortkitError as exc:
        raise ConfigError(str(exc)) from None


def from_project(references: Iterable[str], root: Path) -> list[type[Backend]]:
    """The classes a project's ``[tool.portkit] backends`` names."""
    source = f"{root / 'pyproject.toml'} [tool.portkit]"
    return [from_reference(ref, root, source) for ref in references]
