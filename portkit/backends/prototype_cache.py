"""Compiled prototypes kept on disk, keyed by content, so a fresh process loads a kernel
instead of compiling it again (numba compiles each kernel for each dtype on first launch,
seconds per op).

numba-cuda's own cache does the work (``CUDACache``: it pickles the compiled kernel, PTX
and cubin, and indexes entries by signature, compute capability, CUDA runtime version,
numba-cuda version and the kernel's bytecode). portkit only chooses where its files go:
``<cache-dir>/numba/<op>-<key>/``, where ``key`` is a hash of everything numba's own index
does not see:

- the prototype file's bytes (numba's own freshness test is the file's mtime and size,
  which an edit within the same second at the same length would pass);
- every other file holding a ``device=True`` function a kernel calls, followed from
  function to function, and every project module a kernel reads a name from;
- the values of plain constants (numbers, strings, dtypes) the kernels read from their
  globals, which numba freezes into the code (a constant computed at import time);
- the kernel's compile options (``lineinfo`` under compute-sanitizer, ``fastmath``, ...);
- the numba, numba-cuda, Python and cache-format versions.

An edit therefore lands in a new folder and is compiled afresh; nothing stale is served.
A damaged entry is compiled again and rewritten, never an error.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import types
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeGuard

from portkit import cache_files, numba_internals

CACHE_FORMAT = 1
# The switch is the session's (``config.settings.prototype_cache``: --no-cache,
# PORTKIT_PROTOTYPE_CACHE=0); callers ask it before they attach.
_CONSTANTS = (bool, int, float, complex, str, bytes)

log = logging.getLogger("portkit.prototype_cache")


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _referenced(func: Any) -> Iterator[tuple[str, Any]]:
    """(name, value) of every global or closure value ``func``'s code reads."""
    names = {name for code in _code_objects(func.__code__) for name in code.co_names}
    for name in sorted(names):
        if name in func.__globals__:
            yield name, func.__globals__[name]
    for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
        try:
            yield name, cell.cell_contents
        except ValueError:  # an empty cell
            continue


def _is_device_function(value: Any) -> bool:
    options = getattr(value, "targetoptions", None)
    return hasattr(value, "py_func") and isinstance(options, dict) and bool(options.get("device"))


def _is_project_file(path: str | None, root: Path) -> TypeGuard[str]:
    if not path:
        return False
    try:
        Path(path).resolve().relative_to(root)
    except ValueError:
        return False
    return True


def code_digest(func: Any) -> str:
    """The function's code as this process has it (bytecode and literal constants), so a
    file edited after the import still gets the key of the code that is compiled."""
    digest = hashlib.sha256()
    for code in _code_objects(func.__code__):
        literals = [c for c in code.co_consts if not isinstance(c, types.CodeType)]
        digest.update(code.co_code + repr(literals).encode() + repr(code.co_names).encode())
    return f"{func.__module__}.{func.__qualname__}:{digest.hexdigest()}"


def dependencies(kernels: Iterable[Any], root: Path) -> tuple[set[Path], list[str]]:
    """Files the kernels' compiled code depends on (beyond numba itself) and what else
    goes into the code: device functions followed transitively to their files, project
    modules a kernel reads an attribute of (``helpers.TILE``), plain constant values, and
    the bytecode of every function reached."""
    files: set[Path] = set()
    constants: list[str] = []
    seen: set[int] = set()
    todo = [k.py_func for k in kernels]
    while todo:
        func = todo.pop()
        if id(func) in seen:
            continue
        seen.add(id(func))
        constants.append(code_digest(func))
        source = getattr(func.__code__, "co_filename", None)
        if source and os.path.isfile(source):
            files.add(Path(source).resolve())
        for name, value in _referenced(func):
            if _is_device_function(value):
                todo.append(value.py_func)
            elif isinstance(value, types.ModuleType):
                module_file = getattr(value, "__file__", None)
                if _is_project_file(module_file, root):
                    files.add(Path(module_file).resolve())
            elif isinstance(value, _CONSTANTS) or type(value).__module__ == "numpy":
                constants.append(f"{func.__qualname__}:{name}={value!r}")
    return files, sorted(set(constants))


def cache_key(kernels: Iterable[Any], root: Path, options: dict[str, Any]) -> str:
    import numba
    import numba_cuda

    kernels = list(kernels)
    files, constants = dependencies(kernels, root.resolve())
    digest = hashlib.sha256()
    digest.update(f"portkit-prototype-cache-{CACHE_FORMAT}\n".encode())
    versions = (numba.__version__, numba_cuda.__version__, sys.version)
    digest.update(repr(versions).encode())
    for path in sorted(files):
        digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update("\n".join(constants).encode())
    digest.update(repr(sorted((k, repr(v)) for k, v in options.items())).encode())
    return digest.hexdigest()


def _cache_classes(directory: Path) -> type:
    """numba-cuda's ``CUDACache`` with one locator: ``directory``. A damaged index or
    entry is a miss (numba would raise from pickle): the index is reset and the kernel
    compiled and saved again."""

    # mypy types no base class found at run time (numba-cuda's CUDACache)
    class PortkitCache(numba_internals.directory_cache_class(directory)):  # type: ignore[misc]
        def load_overload(self, sig: Any, target_context: Any) -> Any:
            try:
                return super().load_overload(sig, target_context)
            except Exception as exc:  # a truncated or foreign file: compile instead
                cache_files.notice(
                    f"cache entry in {directory} is damaged ({type(exc).__name__}); "
                    "compiling the kernel again"
                )
                try:
                    numba_internals.reset_cache_index(self)  # a fresh, empty index
                except OSError:
                    pass
                return None

        def save_overload(self, sig: Any, data: Any) -> None:
            # numba refuses to pickle a kernel that links extra files (float16 and
            # bfloat16 math link numba-cuda's .cu shims): a rebuilt kernel could not link
            # them again for another GPU. The cubin for this GPU is built by then, and an
            # entry is only loaded for the same compute capability and CUDA runtime
            # (numba's index key), so it never links again: save it without them.
            with numba_internals.linked_files_left_out(data):
                try:
                    super().save_overload(sig, data)
                except Exception as exc:  # a full disk or read-only cache never fails
                    log.info("prototype cache: could not save to %s (%s)", directory, exc)

    return PortkitCache


def entry_directory(cache_dir: Path, op_name: str, key: str) -> Path:
    return cache_dir / "numba" / f"{op_name}-{key[:24]}"


def attach(dispatcher: Any, op_name: str, root: Path, cache_dir: Path) -> Path | None:
    """Point ``dispatcher``'s disk cache at portkit's folder for its content and compile
    options. The key is taken once per options, the first time: the source must be hashed
    as it was imported, not as it is after an edit made while this process runs (numba's
    index also holds the kernel's bytecode hash, a second guard against that). None when
    the folder cannot be made."""
    options = repr(sorted((k, repr(v)) for k, v in dispatcher.targetoptions.items()))
    keys = dispatcher.__dict__.setdefault("_portkit_cache_keys", {})
    if options not in keys:
        keys[options] = cache_key([dispatcher], root, dispatcher.targetoptions)
    directory = entry_directory(cache_dir, op_name, keys[options])
    if getattr(dispatcher, "_portkit_cache_dir", None) != directory:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a read-only cache folder: compile in memory, as before
            log.info("prototype cache: cannot use %s (%s)", directory, exc)
            detach(dispatcher)
            return None
        # numba's public switch is enable_caching(), which picks the folder itself
        # (beside the source or NUMBA_CACHE_DIR); this is the same object, our folder.
        numba_internals.set_disk_cache(dispatcher, _cache_classes(directory)(dispatcher.py_func))
        dispatcher._portkit_cache_dir = directory
    return directory


def detach(dispatcher: Any) -> None:
    """No disk cache for ``dispatcher`` (``--no-cache``): compile in memory only."""
    if getattr(dispatcher, "_portkit_cache_dir", None) is not None:
        numba_internals.set_disk_cache(dispatcher, None)
    dispatcher._portkit_cache_dir = None


def origin(dispatcher: Any) -> str:
    """'cache', 'compiled', 'cache+compiled' or 'not run', from numba's own counters."""
    stats = dispatcher.stats
    hits, misses = sum(stats.cache_hits.values()), sum(stats.cache_misses.values())
    if not hits and not misses:
        return "not run"
    if hits and misses:
        return f"{hits} from cache, {misses} compiled"
    return f"{hits} from cache" if hits else f"{misses} compiled"
