"""Caches of what an op's content determines, bounded, that keep no op alive.

``functools.cache`` on a function of an ``Op`` keys on the op object itself, so it keeps
every op it ever saw, with its prototype module, kernels and compiled code: a resident
process (``portkit watch``, a notebook) that re-imports an edited op 1,000 times keeps
1,000 of them. ``by_op_content`` keys instead on what the op is made of (its name, its
launchers' and kernels' code, its cases) and keeps the ``maxsize`` entries used last:
an unchanged op hits whichever object it is, an edited one misses, and nothing holds on
to an op.
"""

from __future__ import annotations

import functools
import hashlib
import types
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from portkit.project.discovery import Op

T = TypeVar("T")
DEFAULT_MAXSIZE = 64  # ops a project works on at once, with room


def _code_digest(func: Any, digest: Any) -> None:
    code = getattr(func, "__code__", None)
    if code is None:  # a callable object, not a function: its type's name
        digest.update(repr(type(func)).encode())
        return
    todo = [code]
    while todo:
        code = todo.pop()
        literals = [c for c in code.co_consts if not isinstance(c, types.CodeType)]
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
        digest.update(code.co_code + repr(literals).encode() + repr(code.co_names).encode())


def op_content_key(op: Op) -> tuple[str, str]:
    """(name, digest of what the op object carries: its launchers' code (literal
    constants and names included), its kernels' names and code, and its cases' names,
    shapes, dtypes and extra arguments). Read from the objects, not the files, so an op
    imported before an edit keeps its own key after it."""
    digest = hashlib.sha256()
    definition = op.definition
    for launcher in (definition.forward, definition.backward):
        _code_digest(launcher, digest)
    for name, kernel in sorted(op.kernels.items()):
        digest.update(name.encode())
        _code_digest(kernel.py_func, digest)  # a numba dispatcher: its Python function
    for case in definition.cases:
        digest.update(repr((case.name, case.shapes, case.dtype, case.input_dtypes)).encode())
        digest.update(repr(case.extra).encode())
        if case.inputs is not None:
            _code_digest(case.inputs, digest)
    return op.name, digest.hexdigest()


def by_op_content(
    maxsize: int = DEFAULT_MAXSIZE,
) -> Callable[[Callable[[Op], T]], Callable[[Op], T]]:
    """Cache ``function(op)`` by ``op_content_key``, the ``maxsize`` last used; exceptions
    are not cached. The wrapper has ``cache_clear()`` and ``cache_len()``."""

    def decorate(function: Callable[[Op], T]) -> Callable[[Op], T]:
        entries: OrderedDict[tuple[str, str], T] = OrderedDict()

        @functools.wraps(function)
        def cached(op: Op) -> T:
            key = op_content_key(op)
            if key in entries:
                entries.move_to_end(key)
                return entries[key]
            value = function(op)
            entries[key] = value
            while len(entries) > maxsize:
                entries.popitem(last=False)
            return value

        cached.cache_clear = entries.clear  # type: ignore[attr-defined]
        cached.cache_len = entries.__len__  # type: ignore[attr-defined]
        return cached

    return decorate
