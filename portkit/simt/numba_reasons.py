"""Why numba cannot compile a kernel, as one line: the construct and its place.

numba's message is many lines, and for some constructs (``try``/``except``,
recursion, slice assignment) an internal ``AttributeError`` with no place at all. So
the constructs numba-cuda cannot compile are looked for in the kernel's source (and its
device functions') first and named at their line; otherwise numba's own reason is cut
to one line and placed where numba says, or at the call it could not resolve, or at the
kernel's ``def``. The simulator's type check (numba_check.py) and ``portkit port``
(port/draft.py) both say it this way.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import textwrap
from collections.abc import Iterator
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# numba's words for a Python container it cannot build without NRT (lists, sets, dicts)
_CONTAINERS = ("NRT required", "list(", "set(", "dict(", "reflected list")


def why_not(py_func: Any, exc: BaseException) -> tuple[str, str, int]:
    """(one-line reason, file, line) for the kernel ``py_func`` numba failed to compile
    with ``exc``."""
    from numba.core.errors import NumbaError

    message = _ANSI.sub("", str(exc))
    containers = any(word in message for word in _CONTAINERS)
    for function in _reachable(py_func):
        found = _construct(function, containers)
        if found is not None:
            return found
    if isinstance(exc, NumbaError):
        return explain(py_func, message)
    first = (message.strip().splitlines() or [""])[0]
    file, line = _where(message, py_func, None)
    first = re.sub(r"\.? Raised from .*$", "", first)
    return f"numba failed on it ({type(exc).__name__}: {first})", file, line


def explain(py_func: Any, message: str) -> tuple[str, str, int]:
    """numba's error ``message`` about ``py_func`` as (one-line reason, file, line)."""
    text = _ANSI.sub("", message)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("Failed in cuda mode pipeline")]
    reason = lines[0] if lines else "numba gave no reason"
    called = None
    if "found for signature" in reason:
        wanted = next((line[4:] for line in lines if line.startswith(">>> ")), "")
        function = re.search(r"Function\(<[\w ]*?'?([\w.]+)'?(?: at 0x\w+)?>\)", reason)
        label = function.group(1).removeprefix("numba.cuda.stubs.") if function else "a function"
        called = label.rsplit(".", 1)[-1]
        reason = f"no implementation of {label} for {wanted or 'these argument types'}"
        if any(line == "No match." for line in lines):
            reason += " (no match)"
    file, line = _where(text, py_func, called)
    return reason.rstrip(":. "), file, line


def _where(text: str, py_func: Any, called: str | None) -> tuple[str, int]:
    """The file and line numba names, else the first line of the kernel that calls
    ``called``, else the kernel's ``def``."""
    file = py_func.__code__.co_filename
    patterns = (
        r"During: .* at (.+?) \((\d+)\)",
        r'File "(.+?)", line (\d+)',
        r"Raised from (.+?) \((\d+)\)",
    )
    # numba's own files (an f-string fails in numba-cuda's unicode.py) are not the place
    places = (m for p in patterns for m in re.finditer(p, text) if not _in_numba(m.group(1)))
    found = next(places, None)
    if found:
        named = found.group(1)
        if os.path.isfile(named):
            return os.path.abspath(named), int(found.group(2))
        return file, int(found.group(2))
    try:
        source, first = inspect.getsourcelines(py_func)
    except (OSError, TypeError):
        return file, py_func.__code__.co_firstlineno
    if called:
        for offset, text_line in enumerate(source):
            if re.search(rf"\b{re.escape(called)}\s*\(", text_line):
                return file, first + offset
    # the kernel's ``def`` line, below its decorators
    offset = next(
        (k for k, text_line in enumerate(source) if text_line.lstrip().startswith("def ")), 0
    )
    return file, first + offset


def _in_numba(path: str) -> bool:
    """Whether ``path`` is a file of numba or numba-cuda themselves."""
    import numba
    import numba.cuda

    roots = {os.path.dirname(numba.__file__), os.path.dirname(numba.cuda.__file__)}
    full = os.path.abspath(path)
    return any(full.startswith(root + os.sep) for root in roots)


def _reachable(py_func: Any) -> list[Any]:
    """The kernel and the device functions it calls, transitively (by their globals)."""
    found, todo = [py_func], [py_func]
    while todo:
        function = todo.pop()
        for name in function.__code__.co_names:
            callee = getattr(function.__globals__.get(name), "py_func", None)
            if callee is not None and callee not in found:
                found.append(callee)
                todo.append(callee)
    return found


def _construct(py_func: Any, containers: bool) -> tuple[str, str, int] | None:
    """The first construct numba cannot compile in ``py_func``: (what, file, line);
    ``containers``: numba's message is about a list, set or dict."""
    try:
        lines, first = inspect.getsourcelines(py_func)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    file = py_func.__code__.co_filename
    for node in _walk(tree):
        what = _what(node, py_func.__name__, containers)
        if what is not None:
            line = first + getattr(node, "lineno", 1) - 1
            return what, file, line
    return None


def _walk(tree: ast.AST) -> Iterator[ast.AST]:
    """Nodes in source order (ast.walk is breadth first)."""
    nodes = [n for n in ast.walk(tree) if isinstance(n, ast.stmt | ast.expr)]
    return iter(sorted(nodes, key=lambda n: (n.lineno, n.col_offset)))


def _what(node: ast.AST, name: str, containers: bool) -> str | None:
    if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
        return "try/except"
    if isinstance(node, ast.Assign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(t, ast.Subscript) and _has_slice(t.slice) for t in targets):
            return "assignment to a slice"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
        # numba-cuda compiles self-recursion only where every call has the argument types
        # of the first (numba-cuda's own test of a type change is skipped: "Needs
        # insert_unresolved_ref support in target")
        return (
            f"recursion ({name} calls itself; numba-cuda compiles it only with the same "
            f"argument types in every call)"
        )
    if containers and isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp):
        return "a comprehension (a list, set or dict)"
    if containers and isinstance(node, ast.List | ast.Set | ast.Dict):
        return f"a Python {type(node).__name__.lower()}"
    return None


def _has_slice(index: ast.expr) -> bool:
    if isinstance(index, ast.Slice):
        return True
    return isinstance(index, ast.Tuple) and any(isinstance(e, ast.Slice) for e in index.elts)
