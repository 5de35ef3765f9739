"""Shared and local arrays: ``cuda.shared.array((2, SCAN), float64)`` is
``__shared__ double buf[2][SCAN];``, a dynamic one (shape 0) a typed pointer into the
launch's dynamic shared memory (numba starts every dynamic array at its offset 0). A
shape named by a module constant, ``A_TILES = (2, BM * SA)``, is spelled as its
assignment is (``[2][BM * SA]``), or as its numbers where that is not found. An array
made as a call's argument, ``row_sum(v, cuda.shared.array(32, float32))``, is named and
declared before its statement (C has no array expression)."""

from __future__ import annotations

import ast
import copy
from collections.abc import Sequence

from portkit.port.context import ArrayInfo, FunctionContext, Untranslated, resolve
from portkit.port.ctype import Vec, is_array
from portkit.port.expressions import Expressions
from portkit.port.spelling import c_identifier

ARRAY_KINDS = ("cuda.shared.array", "cuda.local.array")


def declare_array(
    ctx: FunctionContext, ex: Expressions, name: str, kind: str, call: ast.Call
) -> list[str]:
    """The C declaration(s) of ``name = cuda.<kind>(...)``; records the array."""
    arguments = dict(zip(("shape", "dtype"), call.args))
    arguments.update({k.arg: k.value for k in call.keywords if k.arg})
    if "shape" not in arguments:
        raise Untranslated(f"{kind} without a shape", call)
    vec = ctx.types.variables.get(name)
    if vec is None:
        raise Untranslated(f"array {name}, which numba did not type", call)
    element = tuple(t.dtype for t in vec)
    ctype = ctx.type_name(element)
    shape = arguments["shape"]
    if isinstance(shape, ast.Name) and isinstance(ctx.globals.get(shape.id), tuple):
        shape = _global_shape(ctx, shape.id)
    dims = shape.elts if isinstance(shape, ast.Tuple) else [shape]
    texts = [ex(d) for d in dims]
    ident = c_identifier(name)
    if kind == "cuda.shared.array" and _is_zero(dims, ctx):
        ctx.arrays[name] = ArrayInfo("dynamic", 1, element, [None])
        return [
            "extern __shared__ __align__(16) unsigned char dynamic_smem[];",
            f"{ctype}* {ident} = reinterpret_cast<{ctype}*>(dynamic_smem);",
        ]
    ctx.arrays[name] = ArrayInfo(kind.split(".")[1], len(dims), element, [t.text for t in texts])
    prefix = "__shared__ " if kind == "cuda.shared.array" else ""
    return [f"{prefix}{ctype} {ident}{''.join(f'[{t.text}]' for t in texts)};"]


def _is_zero(dims: Sequence[ast.AST], ctx: FunctionContext) -> bool:
    if len(dims) != 1:
        return False
    node = dims[0]
    if isinstance(node, ast.Constant):
        return node.value == 0
    return isinstance(node, ast.Name) and ctx.globals.get(node.id) == 0


def _global_shape(ctx: FunctionContext, name: str) -> ast.Tuple:
    """The tuple constant ``name`` as its module's assignment spells it, when that
    evaluates to its value; else its numbers. The nodes carry no source position."""
    import inspect

    value = ctx.globals[name]
    numbers = ast.Tuple([ast.Constant(v) for v in value], ast.Load())
    source_module = inspect.getmodule(ctx.types.py_func)
    if source_module is None:
        return numbers
    try:
        module = ast.parse(inspect.getsource(source_module))
    except (OSError, TypeError, SyntaxError):
        return numbers
    for stmt in reversed(module.body):  # the last assignment is the value
        if (
            isinstance(stmt, ast.Assign)
            and [ast.unparse(t) for t in stmt.targets] == [name]
            and isinstance(stmt.value, ast.Tuple)
        ):
            spelled = ast.parse(ast.unparse(stmt.value), mode="eval").body
            assert isinstance(spelled, ast.Tuple)  # the unparsed tuple parses as one
            for node in ast.walk(spelled):  # positions in the module, not in the function
                for attr in ("lineno", "end_lineno", "col_offset", "end_col_offset"):
                    if hasattr(node, attr):
                        delattr(node, attr)
            try:
                found = eval(compile(ast.Expression(stmt.value), name, "eval"), ctx.globals)
            except Exception:  # noqa: BLE001 - anything: fall back to the numbers
                found = None
            return spelled if found == value else numbers
    return numbers


def hoist_inline_arrays(
    ctx: FunctionContext, stmt: ast.stmt
) -> tuple[ast.stmt, list[tuple[str, str, ast.Call]]]:
    """``stmt`` with each array made as a call's argument replaced by a fresh name
    (``shared_array_0``), and (name, kind, call) for each, to declare before it; its type
    comes from the call's ``dtype=`` (numba types the argument, not a name)."""
    if not any(
        isinstance(node, ast.Call) and any(_kind(ctx, arg) for arg in node.args)
        for node in ast.walk(stmt)
    ):
        return stmt, []
    hoisted: list[tuple[str, str, ast.Call]] = []

    class Hoist(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.Call:
            self.generic_visit(node)
            for i, arg in enumerate(node.args):
                kind = _kind(ctx, arg)
                if kind is not None and isinstance(arg, ast.Call):
                    name = _fresh(ctx, kind)
                    ctx.types.variables[name] = _array_type(ctx, kind, arg)
                    hoisted.append((name, kind, arg))
                    node.args[i] = ast.copy_location(ast.Name(name, ast.Load()), arg)
            return node

    return Hoist().visit(copy.deepcopy(stmt)), hoisted


def _kind(ctx: FunctionContext, node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    name, _ = resolve(node.func, ctx)
    return name if name in ARRAY_KINDS else None


def _fresh(ctx: FunctionContext, kind: str) -> str:
    stem = f"{kind.split('.')[1]}_array"
    n = 0
    while f"{stem}_{n}" in ctx.types.variables or f"{stem}_{n}" in ctx.globals:
        n += 1
    return f"{stem}_{n}"


def _array_type(ctx: FunctionContext, kind: str, call: ast.Call) -> Vec:
    """numba's type of the array ``call`` makes, per signature: its element from
    ``dtype=`` (a parameter's ``.dtype`` or a numba type), its dimensions from the shape."""
    from numba.core import types

    arguments = dict(zip(("shape", "dtype"), call.args))
    arguments.update({k.arg: k.value for k in call.keywords if k.arg})
    dtype, shape = arguments.get("dtype"), arguments.get("shape")
    if dtype is None or shape is None:
        raise Untranslated(f"{kind} without a shape and a dtype", call)
    elements = _elements(ctx, dtype)
    if elements is None:
        raise Untranslated(
            f"{kind} as an argument with dtype={ast.unparse(dtype)}: name the array first",
            call,
        )
    if isinstance(shape, ast.Name) and isinstance(ctx.globals.get(shape.id), tuple):
        ndim = len(ctx.globals[shape.id])
    else:
        ndim = len(shape.elts) if isinstance(shape, ast.Tuple) else 1
    return tuple(types.Array(e, ndim, "C") for e in elements)


def _elements(ctx: FunctionContext, dtype: ast.AST) -> Vec | None:
    """The element type per signature that ``dtype`` names, or None."""
    from numba.core import types

    if isinstance(dtype, ast.Attribute) and dtype.attr == "dtype":
        owner = dtype.value
        vec = ctx.types.variables.get(owner.id) if isinstance(owner, ast.Name) else None
        if vec is not None and is_array(vec[0]):
            return tuple(t.dtype for t in vec)
        return None
    _, found = resolve(dtype, ctx)
    return ctx.same(found) if isinstance(found, types.Type) else None
