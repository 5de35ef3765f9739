"""Calls of ``math`` functions and of Python's built-ins (``abs``, ``min``, ``max``,
``int``, ``float``, ``round``, ``len``) in C: the float32 spelling (``expf``) where
every signature computes in float32, the overloaded one where the type follows a
template parameter, and a cast where numba's result type is not C's (``math.floor``
is an integer in numba)."""

from __future__ import annotations

import ast
from typing import Any

from portkit.port.context import ATOM, CExpr, Translator, Untranslated
from portkit.port.ctype import is_float, vec_map, widened
from portkit.port.vartypes import resolved


def math_call(ex: Translator, name: str, fn: Any, node: ast.Call) -> CExpr:
    args = [ex(a) for a in node.args]
    result = resolved(fn, *[a.ntype for a in args])
    short = name.split(".", 1)[1]
    if short in ("isnan", "isinf", "isfinite"):
        from numba.core import types

        arg = (
            args[0]
            if all(is_float(t) for t in args[0].ntype)
            else ex.cast(args[0], ex.ctx.same(types.float64))
        )
        return CExpr(f"{short}({ex.widen(arg).text})", ATOM, result, result)
    return ex.call_float(short, args, result)


def builtin(ex: Translator, name: str, fn: Any, node: ast.Call) -> CExpr:
    from numba.core import types

    if name == "len":
        array = node.args[0]
        if not (isinstance(array, ast.Name) and array.id in ex.ctx.arrays):
            raise Untranslated("len of a non-array", node)
        t = ex.ctx.same(types.int64)
        return CExpr(ex.dimension(array.id, 0, node), ATOM, t, t)
    args = [ex(a) for a in node.args]
    if name in ("int", "float", "bool"):
        target = {"int": types.int64, "float": types.float64, "bool": types.boolean}[name]
        return ex.cast(args[0], ex.ctx.same(target))
    result = resolved(fn, *[a.ntype for a in args])
    if name == "round" and len(args) == 1:
        rounded = ex.call_float("rint", args, tuple(widened(t) for t in args[0].ntype))
        return ex.cast(rounded, result)
    if name == "abs":
        if all(is_float(t) for t in result):
            return ex.cast(ex.call_float("fabs", args, vec_map(widened, result)), result)
        spelled = "llabs" if all(t.bitwidth == 64 for t in result) else "abs"
        return CExpr(f"{spelled}({args[0].text})", ATOM, result, result)
    if name in ("min", "max"):
        compute = vec_map(widened, result)
        text = ex.cast(args[0], compute).text
        for other in args[1:]:
            text = f"{name}({text}, {ex.cast(other, compute).text})"
        return ex.cast(CExpr(text, ATOM, compute, compute), result)
    raise Untranslated(f"{name}() with these arguments", node)
