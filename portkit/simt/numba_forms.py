"""Forms of kernel source that numba compiles with its own meaning, which Python's
would get wrong in the simulator: ``x is True`` on a boolean (NumPy's booleans are never
the ``True`` object), ``alignment=`` of an allocation (checked, then dropped: simulated
memory has no addresses), a float raised to an integer (numba keeps the float's type) and
a call of a plain ``cuda.jit`` kernel from a kernel (numba compiles the callee as a device
function)."""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from portkit.errors import KernelError
from portkit.simt.scalars import typed_pow


def is_bool(value: Any, literal: bool) -> bool:
    """``value is True`` as numba compiles it: a boolean (Python's or NumPy's) equal to
    the literal; anything else is not the ``True``/``False`` object."""
    return isinstance(value, (bool, np.bool_)) and bool(value) == literal


def bool_literal(node: ast.Compare) -> bool | None:
    """``True``/``False`` where ``node`` is ``x is True``/``x is not False``..., else None."""
    if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.Is, ast.IsNot)):
        return None
    right = node.comparators[0]
    literal = right.value if isinstance(right, ast.Constant) else None
    return literal if isinstance(literal, bool) else None


def is_bool_call(
    node: ast.Compare, literal: bool | None, namespace: dict, name: str, helper: Any
) -> ast.AST:
    """``node`` (already visited) as a call of ``helper`` (bound to ``name`` in the
    kernel's ``namespace``) where ``literal`` says it compares with True or False."""
    if literal is None:
        return node
    namespace[name] = helper
    call = ast.Call(
        func=ast.Name(id=name, ctx=ast.Load()), args=[node.left, ast.Constant(literal)], keywords=[]
    )
    result: ast.expr = call
    if isinstance(node.ops[0], ast.IsNot):
        result = ast.UnaryOp(op=ast.Not(), operand=call)
    return ast.copy_location(result, node)


def power_call(node: ast.BinOp, namespace: dict) -> ast.AST:
    """``a ** b`` (already visited) as a call of ``scalars.typed_pow``: numba keeps a
    float raised to an integer in the float's type, NumPy does not. Both engines."""
    if not isinstance(node.op, ast.Pow):
        return node
    namespace["__pk_pow"] = typed_pow
    call = ast.Call(
        func=ast.Name(id="__pk_pow", ctx=ast.Load()), args=[node.left, node.right], keywords=[]
    )
    return ast.copy_location(call, node)


def without_alignment(node: ast.Call) -> list[ast.keyword]:
    """An allocation's keywords less ``alignment=``, checked as numba checks it (a
    constant power of two): simulated memory has no addresses to align."""
    kept = []
    for keyword in node.keywords:
        if keyword.arg != "alignment":
            kept.append(keyword)
            continue
        value = keyword.value.value if isinstance(keyword.value, ast.Constant) else 0
        if value is not None and (type(value) is not int or value <= 0 or value & (value - 1)):
            raise KernelError(
                f"line {node.lineno}: alignment must be a constant power of two, "
                f"got {ast.unparse(keyword.value)}"
            )
    return kept


def is_called_kernel(value: Any) -> bool:
    """A kernel (``cuda.jit`` without ``device=True``, simulated under the switch) that a
    kernel calls: numba compiles it as a device function there."""
    return type(value).__name__ == "SimulatedKernel" and hasattr(value, "py_func")
