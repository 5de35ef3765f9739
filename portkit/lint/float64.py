"""The float64 finder: arithmetic in a kernel that consumes or produces a float64, with
the reason (a Python float literal, an int meeting a float32, math.inf...) and the fix."""

from __future__ import annotations

import math
import operator
from collections.abc import Iterator, Sequence
from typing import Any

from portkit.lint.typed_ir import (
    Defs,
    RawFinding,
    TypedFunction,
    assignments,
    definitions,
    is_f64,
    is_int,
    is_ir,
    unique,
    unliteral,
    var_name,
)

FLOAT64 = "float64"  # the finding kind
# Why a value is float64, and its fix (None: no fix of its own), or None: not known.
Explanation = tuple[str, str | None] | None

# --------------------------------------------------------------------------------------
# float64 arithmetic

_BINOPS = {
    operator.add: "+",
    operator.sub: "-",
    operator.mul: "*",
    operator.truediv: "/",
    operator.floordiv: "//",
    operator.mod: "%",
    operator.pow: "**",
    operator.matmul: "@",
    operator.iadd: "+=",
    operator.isub: "-=",
    operator.imul: "*=",
    operator.itruediv: "/=",
    operator.ifloordiv: "//=",
    operator.imod: "%=",
    operator.ipow: "**=",
    operator.imatmul: "@=",
}
_ARITHMETIC_BUILTINS = {abs: "abs", min: "min", max: "max", pow: "pow"}
_MATH_CONSTANTS = ("inf", "nan", "pi", "e", "tau")


def float64_in(functions: list[TypedFunction]) -> Iterator[RawFinding]:
    for fn in functions:
        defs = definitions(fn)
        for stmt, expr in assignments(fn, ops=("binop", "inplace_binop", "unary", "call")):
            found = _float64_op(fn, defs, stmt, expr)
            if found is not None:
                message, fixes = found
                yield RawFinding(FLOAT64, fn, stmt.loc, message, fixes)


def _float64_op(
    fn: TypedFunction, defs: Defs, stmt: Any, expr: Any
) -> tuple[str, tuple[str, ...]] | None:
    typemap = fn.typemap
    result = unliteral(typemap.get(stmt.target.name))
    sig = fn.calltypes.get(expr)
    sig_types = [*sig.args, sig.return_type] if sig is not None else []
    if expr.op in ("binop", "inplace_binop"):
        symbol = _BINOPS.get(expr.fn)
        if symbol is None:  # comparisons, bitwise operators
            return None
        operands = [expr.lhs, expr.rhs]
        types_ = [unliteral(typemap.get(v.name)) for v in operands]
        text = f"{types_[0]} {symbol} {types_[1]} -> {result}"
        callee = None
    elif expr.op == "unary":
        if expr.fn not in (operator.neg, "-"):
            return None
        operands = [expr.value]
        types_ = [unliteral(typemap.get(expr.value.name))]
        text = f"-{types_[0]} -> {result}"
        callee = None
    else:
        label = _arithmetic_callee(typemap.get(expr.func.name))
        if label is None:
            return None
        operands = list(expr.args) + [v for _, v in expr.kws]
        types_ = [unliteral(typemap.get(v.name)) for v in operands]
        text = f"{label}({', '.join(str(t) for t in types_)}) -> {result}"
        callee = label
    if not any(is_f64(t) for t in [*types_, result, *sig_types]):
        return None

    reasons: list[str] = []
    fixes: list[str] = []
    unexplained = False
    result_f64 = is_f64(result)
    if expr.op in ("binop", "inplace_binop") and all(is_int(t) for t in types_):
        reasons.append("true division of integers gives float64")
        fixes.append(
            "use // for an integer quotient, or divide float32 values: "
            "numba.float32(a) / numba.float32(b)"
        )
    else:
        for var, t in zip(operands, types_):
            if is_f64(t):
                why = _explain_float64(fn, defs, var, stmt.loc.line, set())
            elif is_int(t) and result_f64:
                why = _explain_int(fn, defs, var, callee)
            else:
                continue
            if why is None:
                unexplained = True
                continue
            reasons.append(why[0])
            if why[1]:
                fixes.append(why[1])
            elif why[1] is None:
                unexplained = True
    if reasons:
        text += f" ({'; '.join(unique(reasons))})"
    if unexplained or not reasons:
        fixes.append(
            "keep this arithmetic in float32: convert the float64 operand with "
            "numba.float32(...) or make its source float32"
        )
    return text, tuple(fixes)


def _arithmetic_callee(ftype: Any) -> str | None:
    """``math.exp``-like label if ``ftype`` is the type of an arithmetic function."""
    key = getattr(ftype, "typing_key", None)
    if key is None:
        return None
    if getattr(key, "__module__", None) == "math" and callable(key):
        return f"math.{key.__name__}"
    try:
        if key in _ARITHMETIC_BUILTINS:
            return _ARITHMETIC_BUILTINS[key]
    except TypeError:  # unhashable typing keys
        return None
    try:
        import numpy as np

        if isinstance(key, np.ufunc):
            return f"numpy.{key.__name__}"
    except ImportError:  # pragma: no cover
        pass
    return None


def _explain_int(fn: TypedFunction, defs: Defs, var: Any, callee: str | None) -> tuple[str, str]:
    """Why an integer operand makes arithmetic float64 (``callee``: a function, like
    ``math.exp``, that it is an argument of; None for an operator)."""
    t = unliteral(fn.typemap.get(var.name))
    const = _const_value(defs, var)
    if isinstance(const, int) and not isinstance(const, bool):
        if callee is None:
            return f"int literal {const} promotes to float64", f"write numba.float32({const})"
        return f"{callee} of int literal {const} is float64", f"write numba.float32({const})"
    name = var_name(var)
    if var.is_temp:
        return f"{t} operand promotes to float64", "convert it with numba.float32(...)"
    return f"{t} {name} promotes to float64", f"convert it: numba.float32({name})"


def _const_value(defs: Defs, var: Any, depth: int = 0) -> Any:
    if depth > 8:
        return None
    for stmt in defs.get(var.name, ()):
        value = stmt.value
        if is_ir(value, "Const"):
            return value.value
        if is_ir(value, "Var"):
            found = _const_value(defs, value, depth + 1)
            if found is not None:
                return found
    return None


def _explain_float64(
    fn: TypedFunction, defs: Defs, var: Any, line: int, visited: set[str]
) -> Explanation:
    """Why ``var`` is float64, and how to avoid it, from the statements defining it."""
    if var.name in visited or len(visited) > 16:
        return None
    visited.add(var.name)
    fallback = None
    for stmt in defs.get(var.name, ()):
        value = stmt.value
        found: Explanation = None
        if is_ir(value, "Const") and isinstance(value.value, float):
            literal = _literal(value.value)
            found = (
                f"Python float literal {literal}",
                f"use a typed constant: numba.float32({literal})",
            )
        elif is_ir(value, "Global") or is_ir(value, "FreeVar"):
            if isinstance(value.value, float):
                found = (
                    f"global {value.name} = {_literal(value.value)} is a Python float (float64)",
                    f"use numba.float32({value.name})",
                )
        elif is_ir(value, "Var"):
            found = _explain_float64(fn, defs, value, line, visited)
        elif is_ir(value, "Arg"):
            found = (
                f"argument {value.name} is float64 as called",
                f"pass a float32 to {fn.name}",
            )
        elif is_ir(value, "Expr"):
            found = _explain_float64_expr(fn, defs, stmt, value, line, visited)
        if found is not None:
            if found[1]:
                return found
            fallback = fallback or found
    return fallback


def _explain_float64_expr(
    fn: TypedFunction, defs: Defs, stmt: Any, expr: Any, line: int, visited: set[str]
) -> Explanation:
    typemap = fn.typemap
    if expr.op == "cast":
        return _explain_float64(fn, defs, expr.value, line, visited)
    if expr.op == "getattr" and expr.attr in _MATH_CONSTANTS:
        module = _global_value(defs, expr.value)
        if module is math:
            return (
                f"math.{expr.attr} is a float64 constant",
                f"use numba.float32(math.{expr.attr})",
            )
    if expr.op in ("getitem", "static_getitem"):
        array = expr.value
        if is_f64(getattr(typemap.get(array.name), "dtype", None)):
            name = var_name(array)
            return (
                f"element of float64 array {name}",
                f"if double precision is not intended, make {name} float32",
            )
    if expr.op == "call":
        callee = typemap.get(expr.func.name)
        disp = getattr(callee, "dispatcher", None)
        if disp is not None and hasattr(disp, "py_func"):
            name = disp.py_func.__name__
            return f"{name}(...) returns float64", f"make {name} compute and return float32"
        label = _arithmetic_callee(callee)
        if label is not None:
            return _from_arithmetic(fn, defs, stmt, list(expr.args), label, line, visited)
        if callee is not None and str(callee).startswith("class(float64)"):
            return "explicit numba.float64(...)", None
    if expr.op in ("binop", "inplace_binop"):
        operands = [expr.lhs, expr.rhs]
        return _from_arithmetic(fn, defs, stmt, operands, "the arithmetic", line, visited)
    if expr.op == "unary":
        return _from_arithmetic(fn, defs, stmt, [expr.value], "the negation", line, visited)
    return None


def _from_arithmetic(
    fn: TypedFunction,
    defs: Defs,
    stmt: Any,
    operands: Sequence[Any],
    what: str,
    line: int,
    visited: set[str],
) -> Explanation:
    """A float64 value computed by arithmetic. On the line being explained, that
    arithmetic is a finding of its own (its fix is already there): say so, fix "".
    On another line, explain it by that arithmetic's own float64 operands."""
    if stmt.loc.line == line:
        return f"float64 from {what} on this line", ""
    for var in operands:
        if is_f64(fn.typemap.get(var.name)):
            found = _explain_float64(fn, defs, var, stmt.loc.line, visited)
        elif is_int(fn.typemap.get(var.name)) and what == "the arithmetic":
            found = _explain_int(fn, defs, var, None)
        else:
            continue
        if found is not None and found[1]:
            return f"{found[0]}, line {stmt.loc.line}", found[1]
    return f"float64 from {what} on line {stmt.loc.line}", None


def _global_value(defs: Defs, var: Any) -> Any:
    for stmt in defs.get(var.name, ()):
        if is_ir(stmt.value, "Global") or is_ir(stmt.value, "FreeVar"):
            return stmt.value.value
        if is_ir(stmt.value, "Var"):
            return _global_value(defs, stmt.value)
    return None


def _literal(value: float) -> str:
    return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
