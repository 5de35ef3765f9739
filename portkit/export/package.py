"""``export_package``: write an installable Python package for some of a project's ops.

    OUT/
      pyproject.toml                 (setuptools; runtime dependencies: torch, cuda-bindings)
      dist/NAME-VERSION-py3-none-any.whl   (the same package, installable offline)
      NAME/__init__.py               registers the ops at import; one function per op
      NAME/manifest.json             toolkit, archs, lowered names, registers, shared memory
      NAME/kernels/OP.sm_XY.cubin    per architecture, and OP.sm_XY.ptx for the newest
      NAME/ops/OP.py                 the op's launchers (see launcher_source)
      NAME/tuning/OP.json            the op's knobs and tuned table (`portkit tune`), as committed
      NAME/_runtime/                 portkit/runtime/ copied byte for byte (the launch
                                     contract, the launch loop, registration, replay,
                                     native.cpp: the compiled replayer, built on first use)

Everything is written to a temporary folder beside OUT and renamed into place at the
end, so a failure leaves nothing behind and OUT is never half-written; a lock beside OUT
turns a second export into the same folder at the same time into a one-line error.
Folders and files get the user's umask, as any file the user writes. The package name
is checked first (``portkit.export.names``): nothing that shadows an installed
distribution or the standard library, nothing that cannot be imported.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portkit.errors import PortkitError
from portkit.export.lock import export_lock
from portkit.export.names import check_package_name

if TYPE_CHECKING:
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Catalog, Op

# Shipped byte for byte as the package's ``_runtime/``: what the package runs is what
# portkit runs (portkit/runtime/ imports only the standard library, torch, cuda.bindings).
RUNTIME_FOLDER = "_runtime"


def runtime_sources() -> dict[str, Path]:
    """The files of ``portkit/runtime/`` a package ships, by name: its modules and the
    compiled replayer's source (``native.cpp``, built at the package's first import where
    a compiler is present, as ``portkit.load`` builds it)."""
    import portkit.runtime

    folder = Path(portkit.runtime.__file__).parent
    files = [*folder.glob("*.py"), *folder.glob("*.cpp")]
    return {path.name: path for path in sorted(files)}


@dataclass(frozen=True)
class ExportResult:
    out: Path
    package: str
    ops: tuple[str, ...]
    archs: tuple[str, ...]
    wheel: Path


def check_output_folder(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PortkitError(f"output folder {out} exists and is not empty; name a new folder")
    # Missing parent folders are made (as `--out build/my_kernels` in a fresh checkout
    # needs); the nearest one that exists must be a writable folder.
    parent = out.parent if out.parent != Path("") else Path(".")
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise PortkitError(f"cannot write {out}: {parent} is not a folder")
    if not os.access(parent, os.W_OK):
        raise PortkitError(f"cannot write {out}: folder {parent} is not writable")


def export_package(
    catalog: Catalog,
    names: Sequence[str],
    out: Path,
    archs: Sequence[str],
    package: str,
    version: str = "0.1.0",
    on_op: Callable[[str], None] | None = None,
) -> ExportResult:
    check_package_name(package)
    check_output_folder(out)
    config = catalog.config
    ops = [catalog.get(name) for name in names]  # an unknown op raises OpNotFound here
    for op in ops:
        if not op.has_twin:
            raise PortkitError(f"op {op.name} has no twin ({op.name}.cu): nothing to export")
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)  # checked above: creatable
    with export_lock(out):
        check_output_folder(out)  # again: another export may have finished meanwhile
        from portkit.backends.twin.build import nvrtc_version
        from portkit.backends.twin.instances import twin_expressions
        from portkit.build.archs import compile_arch
        from portkit.export.launcher_source import launcher_module_source
        from portkit.export.manifest import op_entry
        from portkit.export.wheel import write_wheel

        # os.mkdir honours the umask (tempfile.mkdtemp would make the package folder 0700).
        staging = out.parent / f".{out.name}.{secrets.token_hex(4)}.tmp"
        staging.mkdir()
        try:
            root = staging / package
            (root / "kernels").mkdir(parents=True)
            (root / "ops").mkdir()
            (root / "ops" / "__init__.py").write_text("")
            (root / "tuning").mkdir()
            manifest: dict[str, Any] = {
                "format": 1,
                "namespace": config.namespace,
                "toolkit": f"NVRTC {nvrtc_version()}",
                "archs": list(archs),
                "ops": {},
            }
            for op in ops:
                module = sys.modules[op.definition.forward.__module__]
                cls = vars(module)[op.definition.class_name]
                source = launcher_module_source(op.name, cls, module)
                (root / "ops" / f"{op.name}.py").write_text(source)
                assert op.twin_path is not None  # refused above: an op without a twin
                builds = [
                    compile_arch(op.twin_path, twin_expressions(op), a, a == archs[-1])
                    for a in archs
                ]
                for build in builds:
                    (root / "kernels" / f"{op.name}.{build.arch}.cubin").write_bytes(build.cubin)
                (root / "kernels" / f"{op.name}.{archs[-1]}.ptx").write_bytes(builds[-1].ptx)
                manifest["ops"][op.name] = op_entry(op, cls.__name__, builds)
                (root / "tuning" / f"{op.name}.json").write_text(_tuning_table(op, config))
                if on_op is not None:
                    on_op(op.name)
            (root / "manifest.json").write_text(json.dumps(manifest, indent=1))
            (root / RUNTIME_FOLDER).mkdir()
            for filename, shipped in runtime_sources().items():
                (root / RUNTIME_FOLDER / filename).write_bytes(shipped.read_bytes())
            (root / "__init__.py").write_text(_init_source(package, manifest))
            (staging / "pyproject.toml").write_text(_pyproject(package, version))
            wheel = write_wheel(staging / "dist", root, package, version)
            _move_into_place(staging, out)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return ExportResult(
            out, package, tuple(op.name for op in ops), tuple(archs), out / "dist" / wheel.name
        )


def _move_into_place(staging: Path, out: Path) -> None:
    try:
        if out.exists():
            out.rmdir()  # empty, checked under the lock
        os.replace(staging, out)
    except OSError as exc:  # something other than portkit wrote into OUT meanwhile
        raise PortkitError(f"cannot move the package into {out}: {exc.strerror}") from None


def _tuning_table(op: Op, config: ProjectConfig) -> str:
    """The op's tuning table as the package ships it: the project's (checked against the
    knobs as declared now: a stale one is refused here, not at the user's import), or
    the declaration alone, every device then running the defaults."""
    from portkit.project.tuning_table import knob_choice, read_table, table_path
    from portkit.runtime.knob_choice import TABLE_FORMAT

    knob_choice(op, config)  # raises on an entry the declaration no longer allows
    table = read_table(table_path(config, op.name)) or {}
    return json.dumps(
        {
            "format": TABLE_FORMAT,
            "op": op.name,
            "knobs": {name: list(values) for name, values in op.definition.knobs},
            "gpus": table.get("gpus", {}),
        },
        indent=1,
    )


def _init_source(package: str, manifest: dict[str, Any]) -> str:
    names = list(manifest["ops"])
    imports = "\n".join(
        f"from .ops.{n} import {manifest['ops'][n]['class']} as _{n}" for n in names
    )
    table = ", ".join(f'"{n}": _{n}' for n in names)
    exports = "\n".join(f'{n} = _ops["{n}"]' for n in names)
    return f'''"""{package}: ops exported by portkit ({", ".join(names)}).

Each op is registered at import as torch.ops.{manifest["namespace"]}.<op> (with autograd
and a fake kernel, so torch.compile and CUDA graphs work) and offered here as a function.
Needs torch and cuda-bindings; the kernels were compiled ahead of time for
{", ".join(manifest["archs"])} (PTX for newer GPUs): see manifest.json.
"""

from pathlib import Path as _Path

from ._runtime.exported import InputError, PortkitError, register_ops as _register_ops
from collections.abc import Callable
{imports}

_ops = _register_ops(_Path(__file__).parent, {{{table}}})
{exports}

__all__ = ["InputError", "PortkitError", {", ".join(repr(n) for n in names)}]
'''


def _pyproject(package: str, version: str) -> str:
    return f"""[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{package}"
version = "{version}"
description = "Custom GPU ops exported by portkit"
requires-python = ">=3.10"
dependencies = ["torch>=2.4,<2.14", "cuda-bindings>=12.8"]

[tool.setuptools]
packages = ["{package}", "{package}.ops", "{package}.{RUNTIME_FOLDER}"]

[tool.setuptools.package-data]
{package} = ["manifest.json", "kernels/*", "tuning/*"]
"{package}.{RUNTIME_FOLDER}" = ["*.cpp"]
"""
