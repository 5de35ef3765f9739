"""A literal negative index as numba compiles it: ``x[-1]``, ``profile[i, -1]`` count
from the end of the array's dimension, as in Python (stumpy's GPU kernels rely on it).

The simulator reports a *computed* index that comes out negative (``x[i - 1]`` at
``i == 0``): numba on a GPU wraps it too, but that is almost always a boundary bug, and
a C twin reads before the array. A literal ``-1`` is written on purpose, so the rewrite
(both engines, ``source.parsed_definition``) makes it ``x.shape[axis] - 1`` before any
check sees it. On a tuple (``shape[-1]``) it stays Python's ``-1``.
"""

from __future__ import annotations

import ast
from typing import Any

WRAP = "__pk_wrap_index"  # the helper's name in a rewritten kernel's namespace


def wrap_index(value: Any, axis: int, count: int) -> Any:
    """``value.shape[axis] - count`` for an array; ``-count`` for anything else."""
    shape = getattr(value, "shape", None)
    if shape is None or axis >= len(shape):
        return -count
    return shape[axis] - count


def _negative_literal(node: ast.expr) -> int | None:
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
        and node.operand.value > 0
    ):
        return node.operand.value
    return None


class LiteralNegativeIndices(ast.NodeTransformer):
    """``name[..., -K, ...]`` -> ``name[..., __pk_wrap_index(name, axis, K), ...]``."""

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.value, ast.Name):
            return node
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(isinstance(i, ast.Constant) and i.value is Ellipsis for i in items):
            return node
        wrapped = []
        for axis, item in enumerate(items):
            count = _negative_literal(item)
            if count is not None:
                array = ast.Name(node.value.id, ast.Load())
                call = ast.Call(ast.Name(WRAP, ast.Load()), [array, ast.Constant(axis)], [])
                call.args.append(ast.Constant(count))
                item = ast.copy_location(call, item)
            wrapped.append(item)
        if isinstance(node.slice, ast.Tuple):
            node.slice = ast.copy_location(ast.Tuple(wrapped, ast.Load()), node.slice)
        else:
            node.slice = wrapped[0]
        return ast.fix_missing_locations(node)
