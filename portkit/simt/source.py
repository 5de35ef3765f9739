"""A kernel's source lines, for the rewrite: from its file, or for a kernel defined in
``python -c "..."`` (no file) from the command line Python kept in ``sys.orig_argv``."""

from __future__ import annotations

import ast
import inspect
import linecache
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

COMMAND_LINE_FILE = "<string>"


def source_lines(fn: Any) -> tuple[list[str], int]:
    """``inspect.getsourcelines(fn)``, with ``python -c`` code made visible to it (and to
    linecache, so faults quote the line) first."""
    try:
        return inspect.getsourcelines(fn)
    except (OSError, TypeError):
        if not _register_command_line(fn.__code__.co_filename):
            raise
    return inspect.getsourcelines(fn)


def _register_command_line(filename: str) -> bool:
    argv = getattr(sys, "orig_argv", [])
    if filename != COMMAND_LINE_FILE or "-c" not in argv[:-1]:
        return False
    text = argv[argv.index("-c") + 1]
    lines = text.splitlines(keepends=True)
    linecache.cache[filename] = (len(text), None, lines, filename)
    return True


def has_source(fn: Any) -> bool:
    """Whether the rewrite can read ``fn``'s source: a ``def`` of its name. A function
    built by ``exec()`` of a string has none; under ``python -c`` its ``<string>`` file
    name finds the command line instead, which does not define it there."""
    try:
        lines, _ = source_lines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return False
    first = tree.body[0] if tree.body else None
    return isinstance(first, ast.FunctionDef) and first.name == fn.__name__


def own_nodes(definition: ast.FunctionDef) -> Iterator[ast.AST]:
    """Nodes of a function body, not descending into nested functions or lambdas."""
    stack: list[ast.AST] = list(definition.body)
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                stack.append(child)
