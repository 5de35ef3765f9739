"""Find a project's ops: ``prototypes/<op>.py`` joined by name with ``cuda_src/<op>.cu``.

Adding an op means adding those two files; nothing central lists ops. A file that
fails to import does not hide the others: it is kept, with its error, in
``Catalog.broken`` and reported when someone asks for that op.

Prototypes are imported when first asked for: ``catalog.get("sigmoid")`` imports
prototypes/sigmoid.py only (``portkit sim sigmoid`` does not pay for every other op);
``catalog.ops`` and ``catalog.broken`` import them all.

A catalog belongs to whoever built it (a ``Session``); nothing is memoised per process.
It notes the content of every file an op was loaded from, so ``refresh()`` can forget
exactly the ops whose files changed and import them again as fresh module objects.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import sys
import traceback
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from portkit.errors import (
    ConfigError,
    OpDefinitionError,
    OpLoadError,
    OpNotFound,
    PortkitError,
    failure_site,
)
from portkit.project.cases import Case
from portkit.project.config import ProjectConfig
from portkit.project.spec import OP_ATTRIBUTE, OpDefinition
from portkit.results import FailureSite

MODULE_PREFIX = "portkit_ops"


@dataclass(frozen=True, eq=False)  # ops compare and hash by identity
class Op:
    name: str
    definition: OpDefinition
    prototype_path: Path
    kernels: Mapping[str, Any]  # kernel name -> numba CUDADispatcher (device=False)
    twin_path: Path | None

    @property
    def has_twin(self) -> bool:
        return self.twin_path is not None

    def has_any_case(self, names: Iterable[str]) -> bool:
        return not {c.name for c in self.definition.cases}.isdisjoint(names)

    def case(self, name: str) -> Case:
        for case in self.definition.cases:
            if case.name == name:
                return case
        known = ", ".join(c.name for c in self.definition.cases)
        raise PortkitError(f"op {self.name} has no case {name!r}; cases: {known}")


@dataclass
class Catalog:
    config: ProjectConfig
    prototypes: dict[str, Path] = field(default_factory=dict)  # op name -> prototype file
    twins: dict[str, Path] = field(default_factory=dict)  # op name -> twin file
    _ops: dict[str, Op] = field(default_factory=dict)
    _broken: dict[str, str] = field(default_factory=dict)
    _broken_at: dict[str, FailureSite | None] = field(default_factory=dict)  # the line, if known
    # op name -> {file: content digest} as loaded; project modules prototypes imported
    _stamps: dict[str, dict[Path, str]] = field(default_factory=dict)
    _helpers: dict[str, Path] = field(default_factory=dict)  # module name -> its file
    _helper_stamps: dict[Path, str] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return sorted({*self.prototypes, *self.twins})

    @property
    def ops(self) -> dict[str, Op]:
        """Every op that loads (imports every prototype not imported yet)."""
        self._load_all()
        return self._ops

    @property
    def broken(self) -> dict[str, str]:
        """Op name -> why it cannot be loaded (imports every prototype not imported yet)."""
        self._load_all()
        return self._broken

    def _load_all(self) -> None:
        for name in self.names:
            self._load(name)

    def _load(self, name: str) -> None:
        if name in self._ops or name in self._broken or name not in self.names:
            return
        self._stamps[name] = {path: _digest(path) for path in self._files_of(name)}
        if name not in self.prototypes:
            if name in self.twins:
                expected = self.config.prototypes_dir / (name + ".py")
                self._broken[name] = f"{self.twins[name]} has no prototype; expected {expected}"
            return
        before = set(sys.modules)
        try:
            with importable(self.config):
                self._ops[name] = load_op(name, self.prototypes[name], self.twins.get(name))
        except OpDefinitionError as exc:
            self._broken[name], self._broken_at[name] = str(exc), failure_site(exc)
        finally:
            self._note_helpers(set(sys.modules) - before)

    def _files_of(self, name: str) -> list[Path]:
        return [files[name] for files in (self.prototypes, self.twins) if name in files]

    def _note_helpers(self, added: set[str]) -> None:
        """Project modules (not prototypes, not portkit) a prototype's import brought in."""
        root = self.config.root.resolve()
        for module_name in added:
            file = getattr(sys.modules.get(module_name), "__file__", None)
            if not file or module_name.split(".")[0] in ("portkit", MODULE_PREFIX):
                continue
            path = Path(file).resolve()
            if path.is_relative_to(root):
                self._helpers[module_name] = path
                self._helper_stamps[path] = _digest(path)

    @property
    def helper_files(self) -> list[Path]:
        """The project modules the prototypes imported so far (what a watcher watches)."""
        return sorted(set(self._helpers.values()))

    def refresh(self, keep_ops_on_twin_edit: bool = False) -> list[str]:
        """Look at the folders and files again and forget every op whose prototype or twin
        changed, appeared or went away; when a project module a prototype imported changed
        (it may be shared), forget every op and that module. Returns the names forgotten,
        sorted: they are imported again, as fresh modules, when next asked for.
        ``keep_ops_on_twin_edit``: an op whose twin alone was edited in place is kept (its
        prototype is not imported again; backends read the twin afresh, by content)."""
        self.prototypes, self.twins = _scan(self.config)
        if keep_ops_on_twin_edit:
            self._restamp_edited_twins()
        changed = {p for p, d in self._helper_stamps.items() if _digest(p) != d}
        if changed:
            for module_name, path in list(self._helpers.items()):
                if path in changed:
                    sys.modules.pop(module_name, None)
                    del self._helpers[module_name]
                    self._helper_stamps.pop(path, None)
            stale = set(self._stamps)
        else:
            stale = {
                name
                for name, files in self._stamps.items()
                if set(files) != set(self._files_of(name))
                or any(_digest(p) != d for p, d in files.items())
            }
        for name in stale:
            self._ops.pop(name, None)
            self._broken.pop(name, None)
            self._broken_at.pop(name, None)
            del self._stamps[name]
            sys.modules.pop(f"{MODULE_PREFIX}.{name}", None)
        return sorted(stale)

    def _restamp_edited_twins(self) -> None:
        """Note the new content of twins edited in place whose op is otherwise unchanged."""
        for name, files in self._stamps.items():
            twin = self.twins.get(name)
            if twin is None or twin not in files or set(files) != set(self._files_of(name)):
                continue
            others = [p for p in files if p != twin]
            if all(_digest(p) == files[p] for p in others):
                try:
                    check_utf8(twin)  # else forgotten: loading it again says why
                except OpDefinitionError:
                    continue
                files[twin] = _digest(twin)

    def get(self, name: str) -> Op:
        self._load(name)
        if name in self._ops:
            return self._ops[name]
        if name in self._broken:
            site = self._broken_at.get(name)
            raise OpLoadError(f"op {name} cannot be loaded: {self._broken[name]}", site)
        raise OpNotFound(name, self.names)


@contextlib.contextmanager
def importable(config: ProjectConfig) -> Iterator[None]:
    """While a prototype imports, the project root and the prototypes folder are on
    ``sys.path`` (after what is there), so that its ``import helpers`` (a module beside
    it or at the root) is found under the ``portkit`` command as under ``python -m
    portkit.cli`` from the root, whose working directory Python puts on the path and a
    console script does not. Taken off again: another project's modules must not shadow."""
    added = [
        str(folder)
        for folder in (config.root, config.prototypes_dir)
        if folder.is_dir() and str(folder) not in sys.path
    ]
    sys.path.extend(added)
    try:
        yield
    finally:
        for entry in added:
            if entry in sys.path:
                sys.path.remove(entry)


def is_kernel(value: Any) -> bool:
    """A numba ``cuda.jit`` kernel (not a ``device=True`` function)."""
    options = getattr(value, "targetoptions", None)
    return hasattr(value, "py_func") and isinstance(options, dict) and not options.get("device")


def _prefix_package() -> None:
    """Make ``portkit_ops`` an importable (empty) package, so that ``portkit_ops.<op>``
    imports from sys.modules: pickle imports a function's module by name before it saves
    it, and without the parent every prototype function and constant was unpicklable
    (torch.compile's cache of a reference failed to pickle its key: 112 warnings in one
    `portkit bench --impl torch.compile` on an H200, 2026-11-28)."""
    if MODULE_PREFIX not in sys.modules:
        package = ModuleType(MODULE_PREFIX, "portkit's loaded prototypes")
        package.__path__ = []  # a package whose children are only those in sys.modules
        sys.modules[MODULE_PREFIX] = package


def _import_prototype(name: str, path: Path) -> ModuleType:
    module_name = f"{MODULE_PREFIX}.{name}"
    _prefix_package()
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # numba and pickle look modules up by name
    try:
        # A print() at import goes to stderr: stdout carries --json output.
        with contextlib.redirect_stdout(sys.stderr):
            spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def check_utf8(path: Path) -> None:
    """A source file portkit reads as text must be UTF-8; say where it is not, in one line."""
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise OpDefinitionError(
            f"{path} is not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start} "
            f"(line {line}); save the file as UTF-8"
        ) from None


def load_op(name: str, path: Path, twin_path: Path | None) -> Op:
    if twin_path is not None:
        check_utf8(twin_path)
    try:
        module = _import_prototype(name, path)
    except (OpDefinitionError, KeyboardInterrupt):
        raise
    except BaseException as exc:  # SystemExit too: sys.exit() or argparse at import
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        site = FailureSite(file=frame.filename, line=frame.lineno)
        if isinstance(exc, SyntaxError) and exc.filename:  # its frame is importlib's
            site = FailureSite(file=exc.filename, line=exc.lineno)
        raise OpLoadError(
            f"{path} failed to import: {type(exc).__name__}: {exc} "
            f"(at {frame.filename}:{frame.lineno})",
            site,
        ) from exc
    definitions = [
        v for v in vars(module).values() if isinstance(v, type) and OP_ATTRIBUTE in vars(v)
    ]
    if len(definitions) != 1:
        found = ", ".join(c.__name__ for c in definitions) or "none"
        helper = "" if definitions else f" (a helper module, not an op? name it _{path.name})"
        raise OpDefinitionError(
            f"{path} must define exactly one @portkit.op class; found {found}{helper}"
        )
    kernels = {
        k: v
        for k, v in vars(module).items()
        if is_kernel(v) and getattr(v.py_func, "__module__", None) == module.__name__
    }
    if not kernels:
        raise OpDefinitionError(f"{path} defines no @cuda.jit kernel")
    return Op(name, getattr(definitions[0], OP_ATTRIBUTE), path, kernels, twin_path)


def require_project(config: ProjectConfig) -> None:
    """Raise ``ConfigError`` (one line) outside a project: no ``[tool.portkit]`` table and
    neither the prototypes nor the twins folder, where a command would check nothing; or
    a folder ``[tool.portkit]`` names that does not exist."""
    pyproject = config.root / "pyproject.toml"
    folders = {"prototypes": config.prototypes_dir, "cuda-src": config.cuda_src_dir}
    for key in config.set_folders:
        if not folders[key].is_dir():
            what = "a file, not a folder" if folders[key].exists() else "no such folder"
            raise ConfigError(
                f"{pyproject}: [tool.portkit] {key} names {folders[key]}: {what}; "
                f"fix the path or create the folder"
            )
    if config.configured or config.prototypes_dir.is_dir() or config.cuda_src_dir.is_dir():
        return
    found = (
        f"{pyproject} has no [tool.portkit] table"
        if pyproject.is_file()
        else f"no pyproject.toml at or above {config.root}"
    )
    raise ConfigError(
        f"no portkit project: no folder {config.prototypes_dir} ({found}); run portkit in a "
        f'project, or set [tool.portkit] prototypes = "..." and cuda-src = "..." in its '
        f"pyproject.toml"
    )


def _digest(path: Path) -> str:
    """The file's content (a missing file has none): an edit within the same second at
    the same length is still an edit."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def _scan(config: ProjectConfig) -> tuple[dict[str, Path], dict[str, Path]]:
    """(op name -> prototype file, op name -> twin file) as the folders hold them now."""
    prototypes = (
        {p.stem: p for p in config.prototypes_dir.glob("*.py") if not p.name.startswith("_")}
        if config.prototypes_dir.is_dir()
        else {}
    )
    twins = (
        {p.stem: p for p in config.cuda_src_dir.glob("*.cu")}
        if config.cuda_src_dir.is_dir()
        else {}
    )
    return prototypes, twins


def discover(config: ProjectConfig) -> Catalog:
    """A new catalog of the project's ops by file name; each prototype is imported when
    first asked for. A ``Session`` keeps one; each call here makes another."""
    return Catalog(config, *_scan(config))
