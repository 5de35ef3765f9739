"""Shared and local arrays: ``cuda.shared.array((2, SCAN), float64)`` is
``__shared__ double buf[2][SCAN];``, a dynamic one (shape 0) a typed pointer into the
launch's dynamic shared memory (numba starts every dynamic array at its offset 0). A
shape named by a module constant, ``A_TILES = (2, BM * SA)``, is spelled as its
assignment is (``[2][BM * SA]``), or as its numbers where that is not found."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from portkit.port.context import ArrayInfo, FunctionContext, Untranslated
from portkit.port.expressions import Expressions
from portkit.port.spelling import c_identifier


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
