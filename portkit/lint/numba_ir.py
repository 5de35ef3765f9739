"""Static findings from numba's typed IR for one ``cuda.jit`` kernel and signature.

The kernel is typed (and lowered, but never compiled to PTX) for sm_90 with
``numba.cuda.compiler.compile_cuda``; the findings come from the type annotation
that pipeline keeps: the IR blocks right after type inference, the type of every
variable and the signature chosen for every operation. ``device=True`` functions
the kernel calls are inspected too, typed with the argument types of each call.

Two kinds of finding, both warnings:

``float64``
    Arithmetic (``+ - * / // % **``, their in-place forms, unary minus, calls of
    ``math`` functions, ``abs``, ``min``, ``max``, ``pow``) that consumes or
    produces a float64 value. A Python float literal (``x[i] * 2.5``), an integer
    meeting a float32 (``1 + z`` is float64 in numba), ``math.inf`` or a float64
    array is the usual cause. Comparisons are not arithmetic and are not reported.
    ``ir_findings`` reports these only for kernels with no float64 input.
``int64-index``
    Integer arithmetic typed int64 inside a loop whose result indexes an array.

Nothing here needs a GPU.
"""

from __future__ import annotations

import functools
import inspect
import linecache
import math
import operator
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from portkit.lint.compile import COMPUTE_CAPABILITY, device_compute_capability

FLOAT64 = "float64"
INT64_INDEX = "int64-index"
WARNING = "warning"

INT64_INDEX_MESSAGE = (
    "int64 index math in a loop: 64-bit integer multiply/add costs 2+ instructions on the GPU"
)
INT64_INDEX_FIX = (
    "if sizes fit in 32 bits, compute the index in int32 (numba.int32(...)); note that numba "
    "types int32 op int32 as int64, so wrap the whole index expression, not only its operands"
)


@dataclass(frozen=True)
class IRFinding:
    kind: str  # "float64" or "int64-index"
    severity: str  # "warning" for both
    kernel: str  # the kernel being linted
    function: str  # the function the line is in (kernel or device function name)
    path: str  # source file
    line: int
    source: str  # that source line, stripped
    message: str  # what happens, e.g. "float32 * float64 -> float64 (Python float literal 2.5)"
    fix: str  # how to fix it


@dataclass(frozen=True)
class TypedFunction:
    """One function of a kernel's call tree, as numba typed it."""

    name: str
    py_func: Any
    args: tuple  # the numba types it was typed with
    blocks: dict  # label -> IR block (numba's type annotation copy of the IR)
    typemap: dict  # variable name -> numba type
    calltypes: dict  # IR expression/statement -> numba signature


# --------------------------------------------------------------------------------------
# Public entry points


def ir_findings(kernel_name: str, dispatcher, signature: tuple) -> list[IRFinding]:
    """All findings for the kernel compiled with ``signature`` (a tuple of numba types,
    as produced by ``portkit.launch.trace.record_launches(...)[i].signature``). float64
    findings only when no floating input in ``signature`` is float64. Sorted by
    (path, line), one finding per (kind, path, line).

    A kernel numba cannot type raises numba's own error (the compile check reports those).
    """
    functions = typed_functions(dispatcher, signature)
    raw: list[_RawFinding] = []
    if not has_float64_input(signature):
        raw.extend(_float64_in(functions))
    raw.extend(_int64_index_in(functions))
    return _merge(kernel_name, raw)


def float64_findings(kernel_name: str, dispatcher, signature: tuple) -> list[IRFinding]:
    """The raw float64 finder: every float64 arithmetic line, whatever the inputs are."""
    return _merge(kernel_name, _float64_in(typed_functions(dispatcher, signature)))


def int64_index_findings(kernel_name: str, dispatcher, signature: tuple) -> list[IRFinding]:
    """The raw int64-index finder: int64 arithmetic in a loop that indexes an array."""
    return _merge(kernel_name, _int64_index_in(typed_functions(dispatcher, signature)))


def has_float64_input(signature: Iterable) -> bool:
    """Whether any argument is, or is an array or tuple of, float64 or complex128."""
    from numba.core import types

    for t in signature:
        if isinstance(t, types.BaseTuple):
            if has_float64_input(t.types):
                return True
            continue
        dtype = getattr(t, "dtype", t) if isinstance(t, types.ArrayCompatible) else t
        if dtype in (types.float64, types.complex128):
            return True
    return False


def typed_functions(dispatcher, signature: tuple) -> list[TypedFunction]:
    """The kernel typed with ``signature``, then every device function it calls
    (transitively), each once per distinct argument types."""
    from numba.core import types
    from numba.cuda.compiler import compile_cuda

    py_func = getattr(dispatcher, "py_func", dispatcher)
    args = tuple(signature)
    with device_compute_capability(COMPUTE_CAPABILITY):
        cres = compile_cuda(py_func, types.void, args, cc=COMPUTE_CAPABILITY)
        kernel = _typed(py_func, args, cres)
        functions = [kernel]
        seen: set = set()
        todo = [kernel]
        while todo:
            fn = todo.pop(0)
            for disp, sig in _device_calls(fn):
                key = (id(disp), tuple(sig.args))
                if key in seen:
                    continue
                seen.add(key)
                callee = _typed_device(disp, sig, compile_cuda)
                functions.append(callee)
                todo.append(callee)
    return functions


# --------------------------------------------------------------------------------------
# Typing the call tree


def _typed(py_func, args: tuple, cres) -> TypedFunction:
    ann = cres.type_annotation
    return TypedFunction(
        name=py_func.__name__,
        py_func=py_func,
        args=args,
        blocks=ann.blocks,
        typemap=ann.typemap,
        calltypes=ann.calltypes,
    )


def _typed_device(disp, sig, compile_cuda) -> TypedFunction:
    args = tuple(sig.args)
    cres = getattr(disp, "overloads", {}).get(args)
    if cres is None or getattr(cres, "type_annotation", None) is None:
        cres = compile_cuda(disp.py_func, sig.return_type, args, cc=COMPUTE_CAPABILITY)
    return _typed(disp.py_func, args, cres)


def _device_calls(fn: TypedFunction) -> Iterator[tuple[Any, Any]]:
    for _, expr in _assignments(fn, ops=("call",)):
        disp = getattr(fn.typemap.get(expr.func.name), "dispatcher", None)
        sig = fn.calltypes.get(expr)
        if disp is not None and hasattr(disp, "py_func") and sig is not None:
            yield disp, sig


# --------------------------------------------------------------------------------------
# IR helpers (numba-cuda 0.30 keeps its own copy of numba's IR classes)


@functools.cache
def _ir_modules() -> tuple:
    modules = []
    for name in ("numba.cuda.core.ir", "numba.core.ir"):
        try:
            modules.append(__import__(name, fromlist=["Assign"]))
        except ImportError:  # pragma: no cover - depends on the numba-cuda version
            pass
    return tuple(modules)


def _is(obj: Any, cls: str) -> bool:
    return any(isinstance(obj, getattr(m, cls)) for m in _ir_modules() if hasattr(m, cls))


def _assignments(fn: TypedFunction, ops: tuple[str, ...] | None = None, labels=None):
    """(statement, expression) for each ``x = <expr>`` whose op is in ``ops``."""
    for label, block in fn.blocks.items():
        if labels is not None and label not in labels:
            continue
        for stmt in block.body:
            if _is(stmt, "Assign") and _is(stmt.value, "Expr"):
                if ops is None or stmt.value.op in ops:
                    yield stmt, stmt.value


def _definitions(fn: TypedFunction) -> dict[str, list]:
    defs: dict[str, list] = {}
    for block in fn.blocks.values():
        for stmt in block.body:
            if _is(stmt, "Assign"):
                defs.setdefault(stmt.target.name, []).append(stmt)
    return defs


def _cfg_loops_blocks(blocks: dict) -> set:
    try:
        from numba.cuda.core.analysis import compute_cfg_from_blocks
    except ImportError:  # pragma: no cover - older numba-cuda
        from numba.core.analysis import compute_cfg_from_blocks
    in_loop: set = set()
    for loop in compute_cfg_from_blocks(blocks).loops().values():
        in_loop |= set(loop.body)
    return in_loop


def _name(var) -> str:
    """A variable's source name: ``m.3`` -> ``m``; temporaries stay as they are."""
    name = getattr(var, "unversioned_name", var.name)
    return re.sub(r"\.\d+$", "", name)


def _unliteral(t):
    from numba.core import types

    return types.unliteral(t) if t is not None else t


def _is_f64(t) -> bool:
    from numba.core import types

    return _unliteral(t) == types.float64


def _is_int(t) -> bool:
    from numba.core import types

    return isinstance(_unliteral(t), types.Integer)


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
_ARITHMETIC_BUILTINS = {abs: "abs", min: "min", max: "max", pow: "pow"}
_MATH_CONSTANTS = ("inf", "nan", "pi", "e", "tau")


@dataclass(frozen=True)
class _RawFinding:
    kind: str
    function: TypedFunction
    loc: Any
    message: str
    fixes: tuple[str, ...]


def _float64_in(functions: list[TypedFunction]) -> Iterator[_RawFinding]:
    for fn in functions:
        defs = _definitions(fn)
        for stmt, expr in _assignments(fn, ops=("binop", "inplace_binop", "unary", "call")):
            found = _float64_op(fn, defs, stmt, expr)
            if found is not None:
                message, fixes = found
                yield _RawFinding(FLOAT64, fn, stmt.loc, message, fixes)


def _float64_op(fn: TypedFunction, defs, stmt, expr) -> tuple[str, tuple[str, ...]] | None:
    typemap = fn.typemap
    result = _unliteral(typemap.get(stmt.target.name))
    sig = fn.calltypes.get(expr)
    sig_types = [*sig.args, sig.return_type] if sig is not None else []
    if expr.op in ("binop", "inplace_binop"):
        symbol = _BINOPS.get(expr.fn)
        if symbol is None:  # comparisons, bitwise operators
            return None
        operands = [expr.lhs, expr.rhs]
        types_ = [_unliteral(typemap.get(v.name)) for v in operands]
        text = f"{types_[0]} {symbol} {types_[1]} -> {result}"
        callee = None
    elif expr.op == "unary":
        if expr.fn not in (operator.neg, "-"):
            return None
        operands = [expr.value]
        types_ = [_unliteral(typemap.get(expr.value.name))]
        text = f"-{types_[0]} -> {result}"
        callee = None
    else:
        label = _arithmetic_callee(typemap.get(expr.func.name))
        if label is None:
            return None
        operands = list(expr.args) + [v for _, v in expr.kws]
        types_ = [_unliteral(typemap.get(v.name)) for v in operands]
        text = f"{label}({', '.join(str(t) for t in types_)}) -> {result}"
        callee = label
    if not any(_is_f64(t) for t in [*types_, result, *sig_types]):
        return None

    reasons: list[str] = []
    fixes: list[str] = []
    unexplained = False
    result_f64 = _is_f64(result)
    if expr.op in ("binop", "inplace_binop") and all(_is_int(t) for t in types_):
        reasons.append("true division of integers gives float64")
        fixes.append(
            "use // for an integer quotient, or divide float32 values: "
            "numba.float32(a) / numba.float32(b)"
        )
    else:
        for var, t in zip(operands, types_):
            if _is_f64(t):
                why = _explain_float64(fn, defs, var, stmt.loc.line, set())
            elif _is_int(t) and result_f64:
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
        text += f" ({'; '.join(_unique(reasons))})"
    if unexplained or not reasons:
        fixes.append(
            "keep this arithmetic in float32: convert the float64 operand with "
            "numba.float32(...) or make its source float32"
        )
    return text, tuple(fixes)


def _arithmetic_callee(ftype) -> str | None:
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


def _explain_int(fn: TypedFunction, defs, var, callee: str | None) -> tuple[str, str]:
    """Why an integer operand makes arithmetic float64 (``callee``: a function, like
    ``math.exp``, that it is an argument of; None for an operator)."""
    t = _unliteral(fn.typemap.get(var.name))
    const = _const_value(defs, var)
    if isinstance(const, int) and not isinstance(const, bool):
        if callee is None:
            return f"int literal {const} promotes to float64", f"write numba.float32({const})"
        return f"{callee} of int literal {const} is float64", f"write numba.float32({const})"
    name = _name(var)
    if var.is_temp:
        return f"{t} operand promotes to float64", "convert it with numba.float32(...)"
    return f"{t} {name} promotes to float64", f"convert it: numba.float32({name})"


def _const_value(defs, var, depth: int = 0):
    if depth > 8:
        return None
    for stmt in defs.get(var.name, ()):
        value = stmt.value
        if _is(value, "Const"):
            return value.value
        if _is(value, "Var"):
            found = _const_value(defs, value, depth + 1)
            if found is not None:
                return found
    return None


def _explain_float64(
    fn: TypedFunction, defs, var, line: int, visited: set
) -> tuple[str, str | None] | None:
    """Why ``var`` is float64, and how to avoid it, from the statements defining it."""
    if var.name in visited or len(visited) > 16:
        return None
    visited.add(var.name)
    fallback = None
    for stmt in defs.get(var.name, ()):
        value = stmt.value
        found = None
        if _is(value, "Const") and isinstance(value.value, float):
            literal = _literal(value.value)
            found = (
                f"Python float literal {literal}",
                f"use a typed constant: numba.float32({literal})",
            )
        elif _is(value, "Global") or _is(value, "FreeVar"):
            if isinstance(value.value, float):
                found = (
                    f"global {value.name} = {_literal(value.value)} is a Python float (float64)",
                    f"use numba.float32({value.name})",
                )
        elif _is(value, "Var"):
            found = _explain_float64(fn, defs, value, line, visited)
        elif _is(value, "Arg"):
            found = (
                f"argument {value.name} is float64 as called",
                f"pass a float32 to {fn.name}",
            )
        elif _is(value, "Expr"):
            found = _explain_float64_expr(fn, defs, stmt, value, line, visited)
        if found is not None:
            if found[1]:
                return found
            fallback = fallback or found
    return fallback


def _explain_float64_expr(fn, defs, stmt, expr, line: int, visited: set):
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
        if _is_f64(getattr(typemap.get(array.name), "dtype", None)):
            name = _name(array)
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


def _from_arithmetic(fn, defs, stmt, operands, what: str, line: int, visited: set):
    """A float64 value computed by arithmetic. On the line being explained, that
    arithmetic is a finding of its own (its fix is already there): say so, fix "".
    On another line, explain it by that arithmetic's own float64 operands."""
    if stmt.loc.line == line:
        return f"float64 from {what} on this line", ""
    for var in operands:
        if _is_f64(fn.typemap.get(var.name)):
            found = _explain_float64(fn, defs, var, stmt.loc.line, visited)
        elif _is_int(fn.typemap.get(var.name)) and what == "the arithmetic":
            found = _explain_int(fn, defs, var, None)
        else:
            continue
        if found is not None and found[1]:
            return f"{found[0]}, line {stmt.loc.line}", found[1]
    return f"float64 from {what} on line {stmt.loc.line}", None


def _global_value(defs, var):
    for stmt in defs.get(var.name, ()):
        if _is(stmt.value, "Global") or _is(stmt.value, "FreeVar"):
            return stmt.value.value
        if _is(stmt.value, "Var"):
            return _global_value(defs, stmt.value)
    return None


def _literal(value: float) -> str:
    return repr(value) if math.isfinite(value) else f"float({str(value)!r})"


# --------------------------------------------------------------------------------------
# int64 index arithmetic in loops


def _int64_index_in(functions: list[TypedFunction]) -> Iterator[_RawFinding]:
    for fn in functions:
        in_loop = _cfg_loops_blocks(fn.blocks)
        if not in_loop:
            continue
        block_of: dict[int, Any] = {}
        for label, block in fn.blocks.items():
            for stmt in block.body:
                block_of[id(stmt)] = label
        defs = _definitions(fn)
        seen: set = set()
        for array, index in _index_uses(fn):
            for stmt, expr, direct in _int64_index_math(fn, defs, index, set()):
                if block_of.get(id(stmt)) not in in_loop or id(stmt) in seen:
                    continue
                seen.add(id(stmt))
                lhs = _unliteral(fn.typemap.get(expr.lhs.name))
                rhs = _unliteral(fn.typemap.get(expr.rhs.name))
                result = _unliteral(fn.typemap.get(stmt.target.name))
                symbol = _INT_INDEX_OPS[expr.fn]
                use = "indexes" if direct else "feeds an index of"
                message = (
                    f"{INT64_INDEX_MESSAGE} ({lhs} {symbol} {rhs} -> {result}, "
                    f"{use} {_name(array)})"
                )
                yield _RawFinding(INT64_INDEX, fn, stmt.loc, message, (INT64_INDEX_FIX,))


def _index_uses(fn: TypedFunction) -> Iterator[tuple[Any, Any]]:
    """(array variable, index variable) for every array getitem/setitem."""
    from numba.core import types

    def is_array(var) -> bool:
        return isinstance(fn.typemap.get(var.name), types.Buffer)

    for block in fn.blocks.values():
        for stmt in block.body:
            if _is(stmt, "SetItem") and is_array(stmt.target):
                yield stmt.target, stmt.index
            elif _is(stmt, "StaticSetItem") and is_array(stmt.target):
                if stmt.index_var is not None:
                    yield stmt.target, stmt.index_var
            elif _is(stmt, "Assign") and _is(stmt.value, "Expr"):
                expr = stmt.value
                if expr.op == "getitem" and is_array(expr.value):
                    yield expr.value, expr.index
                elif expr.op == "static_getitem" and is_array(expr.value):
                    if expr.index_var is not None:
                        yield expr.value, expr.index_var


def _int64_index_math(
    fn: TypedFunction, defs, var, visited: set, direct: bool = True
) -> Iterator[tuple]:
    """(statement, expression, direct) for the int64 arithmetic an index value is
    computed by, following copies, casts, index tuples and the operands of that
    arithmetic; ``direct`` when its result is the index itself, not an operand."""
    from numba.core import types

    if var.name in visited:
        return
    visited.add(var.name)
    for stmt in defs.get(var.name, ()):
        value = stmt.value
        if _is(value, "Var"):
            yield from _int64_index_math(fn, defs, value, visited, direct)
        elif _is(value, "Expr"):
            if value.op == "cast":
                yield from _int64_index_math(fn, defs, value.value, visited, direct)
            elif value.op == "build_tuple":
                for item in value.items:
                    yield from _int64_index_math(fn, defs, item, visited, direct)
            elif value.op in ("binop", "inplace_binop") and value.fn in _INT_INDEX_OPS:
                result = _unliteral(fn.typemap.get(stmt.target.name))
                if isinstance(result, types.Integer) and result.bitwidth == 64:
                    yield stmt, value, direct
                    yield from _int64_index_math(fn, defs, value.lhs, visited, False)
                    yield from _int64_index_math(fn, defs, value.rhs, visited, False)


# --------------------------------------------------------------------------------------
# Findings


def _merge(kernel_name: str, raw: Iterable[_RawFinding]) -> list[IRFinding]:
    """One finding per (kind, path, line): messages and fixes of a line are joined."""
    grouped: dict[tuple, dict] = {}
    for r in raw:
        path = r.loc.filename
        function = _function_at(r.function, path, r.loc.line)
        key = (r.kind, path, r.loc.line)
        entry = grouped.setdefault(key, {"function": function, "messages": [], "fixes": []})
        entry["messages"].append(r.message)
        entry["fixes"].extend(r.fixes)
    findings = [
        IRFinding(
            kind=kind,
            severity=WARNING,
            kernel=kernel_name,
            function=entry["function"],
            path=path,
            line=line,
            source=linecache.getline(path, line).strip(),
            message="; ".join(_unique(entry["messages"])),
            fix="; ".join(_unique(f for f in entry["fixes"] if f)),
        )
        for (kind, path, line), entry in grouped.items()
    ]
    order = {FLOAT64: 0, INT64_INDEX: 1}
    return sorted(findings, key=lambda f: (f.path, f.line, order.get(f.kind, 2)))


def _function_at(fn: TypedFunction, path: str, line: int) -> str:
    """The function a line is in: ``fn`` itself, or a device function numba inlined
    into it (``inline="always"``) found among ``fn``'s globals."""
    if _source_range_contains(fn.py_func, path, line):
        return fn.name
    for value in list(getattr(fn.py_func, "__globals__", {}).values()):
        py_func = getattr(value, "py_func", None)
        if py_func is not None and _source_range_contains(py_func, path, line):
            return py_func.__name__
    return fn.name


def _source_range_contains(py_func, path: str, line: int) -> bool:
    code = getattr(py_func, "__code__", None)
    if code is None or code.co_filename != path:
        return False
    try:
        lines, start = inspect.getsourcelines(py_func)
    except (OSError, TypeError):
        return False
    return start <= line < start + len(lines)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
