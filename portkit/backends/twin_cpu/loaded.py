"""The CPU twin's plain build loaded into this process, closed once nothing launches it.

``ctypes.CDLL`` never closes what it opens: a resident process (``portkit watch
--backend twin-cpu``, a notebook) that loads each edited twin's new build would keep
every build it ever loaded. As the GPU twin does with its cubins
(``backends/twin/backend.py`` ``current_library``, ``runtime/driver_launch.py``
``LoadedLibrary``): ``current_library(twin, path)`` loads a build once; an edit replaces
the twin's entry, and past ``MAX_LIBRARIES`` twins the one used least recently leaves
the table; a library that left it is closed (``dlclose``) when the last ``PlainLaunch``
holding it is gone, never while one may still launch it.

The sanitized check builds run in the check worker, which bounds its own (``worker.py``).
"""

from __future__ import annotations

import _ctypes
import ctypes
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any

MAX_LIBRARIES = 64  # twins a project works on at once, with room (each mutant is one)


class LoadedCpuLibrary:
    """A plain build opened with ``ctypes``, closed when this object is collected (the
    handle alone is kept by the finalizer: nothing reachable can call into it then)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._library = ctypes.CDLL(str(path))
        finalizer = weakref.finalize(self, _ctypes.dlclose, self._library._handle)
        finalizer.atexit = False  # the process's end unmaps everything anyway
        _LOADED.add(self)

    def function(self, symbol: str) -> Any:
        """The exported launcher ``symbol``; call it while holding this object."""
        return getattr(self._library, symbol)


# twin source -> the library of its current plain build, the twin used last at the end.
_LIBRARIES: OrderedDict[str, LoadedCpuLibrary] = OrderedDict()
_LOADED: weakref.WeakSet[LoadedCpuLibrary] = weakref.WeakSet()


def current_library(twin: Path, path: Path) -> LoadedCpuLibrary:
    """The plain build at ``path`` of the twin at ``twin``, opened once per build."""
    key = str(twin.resolve())
    current = _LIBRARIES.get(key)
    if current is None or current.path != path:
        current = _LIBRARIES[key] = LoadedCpuLibrary(path)
    _LIBRARIES.move_to_end(key)
    while len(_LIBRARIES) > MAX_LIBRARIES:
        _LIBRARIES.popitem(last=False)
    return current


def loaded_libraries() -> list[Path]:
    """The plain builds open in this process now."""
    return sorted(library.path for library in _LOADED)
