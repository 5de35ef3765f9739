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

from portkit.simt.literal_index import LiteralNegativeIndices

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


LAMBDA_NAME = "__pk_lambda"  # the def a lambda becomes


def parsed_definition(fn: Any, lines: list[str], first: int) -> ast.Module:
    """The module of ``fn``'s source lines (``first``: the first line's number), its
    first statement the function's ``def``. A lambda (``cuda.jit(device=True)(lambda a,
    b: a + b)``, ``cuda.reduce(lambda ...)``: numba compiles those) becomes a ``def`` of
    its one expression, at its own lines."""
    tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, first - 1)
    tree = LiteralNegativeIndices().visit(tree)  # x[-1]: numba's, from the end
    if fn.__name__ != "<lambda>" or (tree.body and isinstance(tree.body[0], ast.FunctionDef)):
        return tree
    code = fn.__code__
    wanted = list(code.co_varnames[: code.co_argcount])
    found = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Lambda)
        and node.lineno == code.co_firstlineno
        and [a.arg for a in node.args.args] == wanted
    ]
    if len(found) != 1:  # none, or several alike on one line: not told apart
        return tree
    lam = found[0]
    body = ast.copy_location(ast.Return(lam.body), lam)
    definition = ast.FunctionDef(name=LAMBDA_NAME, args=lam.args, body=[body], decorator_list=[])
    return ast.Module(body=[ast.copy_location(definition, lam)], type_ignores=[])


def has_source(fn: Any) -> bool:
    """Whether the rewrite can read ``fn``'s source: a ``def`` of its name (or a lambda).
    A function built by ``exec()`` of a string has none; under ``python -c`` its
    ``<string>`` file name finds the command line instead, which does not define it there."""
    try:
        lines, first = source_lines(fn)
        tree = parsed_definition(fn, lines, first)
    except (OSError, TypeError, SyntaxError):
        return False
    head = tree.body[0] if tree.body else None
    return isinstance(head, ast.FunctionDef) and head.name in (fn.__name__, LAMBDA_NAME)


def own_nodes(definition: ast.FunctionDef) -> Iterator[ast.AST]:
    """Nodes of a function body, not descending into nested functions or lambdas."""
    stack: list[ast.AST] = list(definition.body)
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                stack.append(child)
