"""The project files an op's prototype imports: the prototype and every module under the
project root that it imports, followed through the imports transitively (read from the
source with ``ast``, never from what a process happens to have imported).

Two caches key on these files: the verdict store (checking/verdicts/key.py) and the lint
findings (lint/cache.py). Reading the imports from the source makes both keys the same
in every process: a key built from ``sys.modules`` changed with whatever else a process
had imported from the project (a ``conftest.py``, a test's helper, a pytest plugin in
the project root), so a pytest worker missed the entries a ``portkit check`` had written.
Modules imported dynamically (``importlib.import_module`` with a computed name) are not
followed: docs/verdict-cache.md says so.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op

_INSTALLED = ("site-packages", "dist-packages")
_PORTKIT = Path(__file__).resolve().parents[1]  # hashed whole where a key needs it


def is_project_file(path: Path, root: Path) -> bool:
    """Whether ``path`` (resolved) is the project's own code: under ``root`` (resolved),
    outside portkit itself (an editable install lives in its checkout) and outside an
    environment installed there."""
    return (
        path.is_relative_to(root)
        and not path.is_relative_to(_PORTKIT)
        and not any(part in _INSTALLED for part in path.parts)
    )


def _module_files(name: str, bases: Sequence[Path]) -> list[Path]:
    """The files importing ``name`` (a.b.c) runs, found under ``bases``: each package's
    ``__init__.py`` on the way and the module itself; empty when not in the project."""
    parts = name.split(".")
    for base in bases:
        found: list[Path] = []
        for depth in range(1, len(parts) + 1):
            stem = base.joinpath(*parts[:depth])
            if (stem / "__init__.py").is_file():
                found.append(stem / "__init__.py")
            elif stem.with_suffix(".py").is_file():
                found.append(stem.with_suffix(".py"))
                break
            else:
                break
        if found:
            return found
    return []


def _imported_names(path: Path, tree: ast.Module) -> Iterable[tuple[str, Path | None]]:
    """(module name, folder it is relative to or None) for each import in ``tree``; for
    ``from a import b`` also ``a.b``, which is a module when b is a submodule."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None
        elif isinstance(node, ast.ImportFrom):
            anchor = None
            if node.level:
                anchor = path.parent
                for _ in range(node.level - 1):
                    anchor = anchor.parent
            module = node.module or ""
            if module:
                yield module, anchor
            for alias in node.names:
                yield (f"{module}.{alias.name}" if module else alias.name), anchor


def project_imports(prototype: Path, search: Sequence[Path], root: Path) -> list[Path]:
    """The prototype and every module file under ``root`` it imports, transitively
    (not installed packages, not portkit itself), sorted."""
    root = root.resolve()
    seen: set[Path] = set()
    queue = [prototype.resolve()]
    while queue:
        path = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (OSError, SyntaxError, ValueError):
            continue  # its bytes are hashed all the same; it fails where it is imported
        for name, anchor in _imported_names(path, tree):
            bases = [anchor] if anchor is not None else list(search)
            for found in _module_files(name, bases):
                resolved = found.resolve()
                if is_project_file(resolved, root):
                    queue.append(resolved)
    return sorted(seen)

def prototype_imports(op: Op, config: ProjectConfig) -> list[Path]:
    """``project_imports`` of the op's prototype, searched from the project root, the
    prototypes folder and the prototype's own folder."""
    root = config.root.resolve()
    search = [config.root, config.prototypes_dir, op.prototype_path.parent]
    return project_imports(op.prototype_path, search, root)
