"""The typed-IR findings of an op kept on disk, keyed by content, so the next process
that lints an unchanged op (the ``lint`` row of every ``portkit check``, ``portkit lint``)
reads them instead of typing every kernel with numba again (2-3 s for sigmoid).

The findings depend on more than the kernels: the launchers and cases decide which
signatures are typed and which launches are counted, and helper modules can hold any of
them. The key is therefore the prototype cache's key of the kernels (their files, the
files of every device function they call, their bytecode and constants, the numba,
numba-cuda and Python versions: backends/prototype_cache.py) with, as its options:

- the bytes of the prototype and of every project module it imports, followed through
  the imports in the source (project/imports.py, as the verdict store does). It was the
  project modules in the process's ``sys.modules``: a pytest worker that had imported a
  ``conftest.py`` or a plugin from the project root got other keys than ``portkit
  check``, and missed (softmax_warp's lint item, 7.4 s on the 4x H200 host, 2026-11-28);
- the bytecode of the launchers as imported, and the cases and dtypes as built;
- portkit's own source (the finders, the launch tracer, the case builders);
- the torch and NumPy versions (argument types come from tensors) and every ``NUMBA_*``
  setting of the environment.

It lives beside the compiled prototypes (``<cache-dir>/numba/<op>-<key>/``) and follows
the same switch (``--no-cache``, PORTKIT_PROTOTYPE_CACHE=0). Entries are written whole
with a digest manifest (cache_files); a damaged or unreadable entry is computed again
and rewritten, and a cache that cannot be written only costs the time. Findings are
stored only if the files hashed for the key are unchanged once they are computed and no
project module was first imported meanwhile (a launcher importing a helper on its first
call: a dependency the source's imports do not show).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import portkit.backends.prototype_cache as prototype_cache
from portkit import cache_files
from portkit.project.environment import numba_variables
from portkit.project.imports import is_project_file, prototype_imports

if TYPE_CHECKING:
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op

# 2: severity as the enum's value, dtypes per finding; 3: digest manifest; 4: knob values;
# 5: the project files from the prototype's imports, not sys.modules
FORMAT = 5
FILE_NAME = "lint-findings.json"

log = logging.getLogger("portkit.lint.cache")


def lint_key(op: Op, config: ProjectConfig, extra: dict[str, Any] | None = None) -> str:
    """The key of what linting the op finds; ``extra``: what else an entry depends on."""
    import numpy
    import torch

    definition = op.definition
    launchers = [f for f in (definition.forward, definition.backward) if f is not None]
    options = {
        "cache": f"lint-findings-{FORMAT}",
        "project files": cache_files.files_digest(prototype_imports(op, config)),
        "launchers": [prototype_cache.code_digest(f) for f in launchers],
        "cases": repr((definition.cases, definition.dtypes, definition.input_dtypes)),
        "portkit": cache_files.package_digest(),
        "versions": (torch.__version__, numpy.__version__),
        "environment": numba_variables(),
        **(extra or {}),
    }
    return prototype_cache.cache_key(op.kernels.values(), config.root, options)


def entry_path(
    op: Op, config: ProjectConfig, name: str = FILE_NAME, extra: dict[str, Any] | None = None
) -> Path | None:
    """Where the op's findings (or another lint result, ``name``) are kept, or None with
    the cache off."""
    if not config.settings.prototype_cache:
        return None
    key = lint_key(op, config, extra)
    return prototype_cache.entry_directory(config.cache_dir, op.name, key) / name


def remembered(
    op: Op,
    config: ProjectConfig,
    compute: Callable[[], list[dict[str, Any]]],
    parse: Callable[[list[dict[str, Any]]], Any],
    name: str = FILE_NAME,
    extra: dict[str, Any] | None = None,
) -> tuple[Any, bool]:
    """``parse(rows)`` of the op's findings rows (or of another lint result kept as
    ``name``, whose key adds ``extra``), from the cache when an entry for this content
    exists (True) or from ``compute()`` (False), then saved. ``parse`` raising
    ``TypeError``/``ValueError``/``KeyError`` marks an entry as damaged."""
    entry = entry_path(op, config, name, extra)
    stored = cache_files.load(entry) if entry is not None else None  # digest-checked
    if entry is not None and stored is not None:
        try:
            data = json.loads(stored[0])
            if data.get("format") != FORMAT or not isinstance(data.get("findings"), list):
                raise ValueError("not a findings entry of this format")
            return parse(data["findings"]), True
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            log.info("lint cache: unreadable entry %s (%s); linting again", entry, exc)
    loaded = _project_modules(config.root)
    rows = compute()
    result = parse(rows)
    # A project module first imported while linting (a launcher importing a helper on its
    # first call) is a dependency the source's imports do not show: store nothing.
    unseen = _project_modules(config.root) - loaded
    unchanged = entry_path(op, config, name, extra) == entry  # nothing edited meanwhile
    if entry is not None and not unseen and unchanged:
        try:
            cache_files.store(entry, json.dumps({"format": FORMAT, "findings": rows}, indent=1))
        except OSError as exc:  # a full disk or read-only cache never fails a lint
            log.info("lint cache: could not save %s (%s)", entry, exc)
    return result, False


def _project_modules(root: Path) -> set[str]:
    """The names of the project's modules (``is_project_file``) this process imported."""
    resolved = root.resolve()
    prefixes = tuple({str(resolved) + os.sep, os.path.realpath(root) + os.sep})
    found = set()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not path or not os.path.abspath(path).startswith(prefixes):
            continue  # a cheap string test first: thousands of modules are loaded
        if is_project_file(Path(path).resolve(), resolved):
            found.add(name)
    return found
