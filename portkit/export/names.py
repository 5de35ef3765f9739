"""Which names an exported package may take: an importable identifier that shadows
nothing. ``pip install`` of a wheel named ``torch`` replaces PyTorch, and a package named
``json`` or ``import`` can never be imported as itself."""

from __future__ import annotations

import importlib.util
import keyword
import re
import sys
from importlib import metadata

from portkit.errors import PortkitError

GENERATOR = "Generator: portkit export"  # the WHEEL line of every exported package


# The package is also the distribution: a name pip installs (PEP 508: ASCII letters,
# digits, "_"; first and last a letter or digit) and an identifier. PEP 508 also allows
# "-" and ".", which cannot be imported. The length keeps the wheel's file name (name +
# "-0.1.0-py3-none-any.whl") and the staging folder well within a file name's 255 bytes.
_DISTRIBUTION_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_]*[A-Za-z0-9])?", re.ASCII)
MAX_NAME = 100


def check_package_name(name: str) -> None:
    """Raise a one-line PortkitError if ``name`` cannot be, or must not be, the package."""
    if len(name) > MAX_NAME:
        raise PortkitError(
            f"package name of {len(name)} characters; at most {MAX_NAME} (the wheel's file "
            f"name must fit the file system's 255 bytes)"
        )
    if not name.isidentifier():
        raise PortkitError(f"package name {name!r} is not a Python identifier; try my_kernels")
    if not _DISTRIBUTION_NAME.fullmatch(name):
        raise PortkitError(
            f"package name {name!r} is not a name pip installs (PEP 508: ASCII letters, "
            f"digits and '_', beginning and ending with a letter or digit); try my_kernels"
        )
    if keyword.iskeyword(name):
        raise PortkitError(f"package name {name!r} is a Python keyword: it cannot be imported")
    if name in sys.stdlib_module_names:
        raise PortkitError(
            f"package name {name!r} is a standard-library module: the package would hide it"
        )
    owner = _installed_owner(name)
    if owner:
        raise PortkitError(
            f"package name {name!r} is taken by the installed distribution {owner}: "
            f"installing the export would replace it; choose another --name"
        )


def _normal(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed_owner(name: str) -> str | None:
    """The installed distribution (other than an earlier portkit export) whose name or
    top-level module is ``name``."""
    wanted = _normal(name)
    module_owners: set[str] = set()
    if importlib.util.find_spec(name) is not None:  # reading every RECORD takes a second
        module_owners = set(metadata.packages_distributions().get(name, ()))
    for dist in metadata.distributions():
        dist_name = dist.metadata["Name"] or ""
        if _normal(dist_name) != wanted and dist_name not in module_owners:
            continue
        if GENERATOR in (dist.read_text("WHEEL") or ""):
            continue  # the same package exported before: a new export upgrades it
        return f"{dist_name} {dist.version}"
    return None
