"""The int64-index finder: integer arithmetic typed int64 inside a loop whose result
indexes an array (64-bit multiply/add costs 2+ instructions on the GPU)."""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Any

from portkit.lint.typed_ir import (
    Defs,
    RawFinding,
    TypedFunction,
    definitions,
    is_ir,
    loop_blocks,
    unliteral,
    var_name,
)

INT64_INDEX = "int64-index"  # the finding kind
INT64_INDEX_MESSAGE = (
    "int64 index math in a loop: 64-bit integer multiply/add costs 2+ instructions on the GPU"
)
INT64_INDEX_FIX = (
    "if sizes fit in 32 bits, compute the index in int32 (numba.int32(...)); note that numba "
    "types int32 op int32 as int64, so wrap the whole index expression, not only its operands"
)

_INT_INDEX_OPS = {
    operator.add: "+",
    operator.sub: "-",
    operator.mul: "*",
    operator.floordiv: "//",
    operator.mod: "%",
    operator.lshift: "<<",
    operator.rshift: ">>",
    operator.iadd: "+=",
    operator.isub: "-=",
    operator.imul: "*=",
    operator.ifloordiv: "//=",
    operator.imod: "%=",
    operator.ilshift: "<<=",
    operator.irshift: ">>=",
}


# --------------------------------------------------------------------------------------
# int64 index arithmetic in loops


def int64_index_in(functions: list[TypedFunction]) -> Iterator[RawFinding]:
    for fn in functions:
        in_loop = loop_blocks(fn.blocks)
        if not in_loop:
            continue
        block_of: dict[int, Any] = {}
        for label, block in fn.blocks.items():
            for stmt in block.body:
                block_of[id(stmt)] = label
        defs = definitions(fn)
        seen: set = set()
        for array, index in _index_uses(fn):
            for stmt, expr, direct in _int64_index_math(fn, defs, index, set()):
                if block_of.get(id(stmt)) not in in_loop or id(stmt) in seen:
                    continue
                seen.add(id(stmt))
                lhs = unliteral(fn.typemap.get(expr.lhs.name))
                rhs = unliteral(fn.typemap.get(expr.rhs.name))
                result = unliteral(fn.typemap.get(stmt.target.name))
                symbol = _INT_INDEX_OPS[expr.fn]
                use = "indexes" if direct else "feeds an index of"
                message = (
                    f"{INT64_INDEX_MESSAGE} ({lhs} {symbol} {rhs} -> {result}, "
                    f"{use} {var_name(array)})"
                )
                yield RawFinding(INT64_INDEX, fn, stmt.loc, message, (INT64_INDEX_FIX,))


def _index_uses(fn: TypedFunction) -> Iterator[tuple[Any, Any]]:
    """(array variable, index variable) for every array getitem/setitem."""
    from numba.core import types

    def is_array(var: Any) -> bool:
        return isinstance(fn.typemap.get(var.name), types.Buffer)

    for block in fn.blocks.values():
        for stmt in block.body:
            if is_ir(stmt, "SetItem") and is_array(stmt.target):
                yield stmt.target, stmt.index
            elif is_ir(stmt, "StaticSetItem") and is_array(stmt.target):
                if stmt.index_var is not None:
                    yield stmt.target, stmt.index_var
            elif is_ir(stmt, "Assign") and is_ir(stmt.value, "Expr"):
                expr = stmt.value
                if expr.op == "getitem" and is_array(expr.value):
                    yield expr.value, expr.index
                elif expr.op == "static_getitem" and is_array(expr.value):
                    if expr.index_var is not None:
                        yield expr.value, expr.index_var


def _int64_index_math(
    fn: TypedFunction, defs: Defs, var: Any, visited: set[str], direct: bool = True
) -> Iterator[tuple[Any, ...]]:
    """(statement, expression, direct) for the int64 arithmetic an index value is
    computed by, following copies, casts, index tuples and the operands of that
    arithmetic; ``direct`` when its result is the index itself, not an operand."""
    from numba.core import types

    if var.name in visited:
        return
    visited.add(var.name)
    for stmt in defs.get(var.name, ()):
        value = stmt.value
        if is_ir(value, "Var"):
            yield from _int64_index_math(fn, defs, value, visited, direct)
        elif is_ir(value, "Expr"):
            if value.op == "cast":
                yield from _int64_index_math(fn, defs, value.value, visited, direct)
            elif value.op == "build_tuple":
                for item in value.items:
                    yield from _int64_index_math(fn, defs, item, visited, direct)
            elif value.op in ("binop", "inplace_binop") and value.fn in _INT_INDEX_OPS:
                result = unliteral(fn.typemap.get(stmt.target.name))
                if isinstance(result, types.Integer) and result.bitwidth == 64:
                    yield stmt, value, direct
                    yield from _int64_index_math(fn, defs, value.lhs, visited, False)
                    yield from _int64_index_math(fn, defs, value.rhs, visited, False)
