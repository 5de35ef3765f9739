"""One kernel (``__global__``) or device function (``__device__``) of the draft: its
template header, parameters (``const`` where the function never writes an array) and
body, from the Python source of the prototype's function."""

from __future__ import annotations

import ast
import inspect
import io
import textwrap
import tokenize
from collections.abc import Callable
from pathlib import Path
from typing import Any

from portkit.port.context import ArrayInfo, DraftNeeds, FunctionContext, Untranslated, resolve
from portkit.port.ctype import is_array, unliteral
from portkit.port.declarations import plan
from portkit.port.expressions import Expressions
from portkit.port.layout import dimension_parameter
from portkit.port.spelling import c_identifier
from portkit.port.statements import Statements, tuple_type
from portkit.port.vartypes import FunctionTypes, element

_WRITES_ATOMIC = "cuda.atomic."


def parsed(py_func: Any) -> tuple[ast.FunctionDef, list[str], int, str]:
    """(the function's AST, its source lines, its first line, its file's name)."""
    lines, first = inspect.getsourcelines(py_func)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    return node, lines, first, Path(inspect.getsourcefile(py_func) or "?").name


def comments(lines: list[str], first: int) -> dict[int, str]:
    """Absolute line -> its Python comment (portkit's lint pragmas left out)."""
    found: dict[int, str] = {}
    try:
        tokens = list(
            tokenize.generate_tokens(io.StringIO(textwrap.dedent("".join(lines))).readline)
        )
    except (tokenize.TokenError, IndentationError):
        return found
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            if text and not text.startswith("portkit:"):
                found[first + tok.start[0] - 1] = text.split("# portkit:")[0].strip()
    return found


def written(node: ast.FunctionDef, ctx: FunctionContext, device_writes: dict) -> set[str]:
    """Names of the arrays the function stores into, atomically updates, or passes to a
    device function that writes its parameter."""
    names: set[str] = set()
    for n in ast.walk(node):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(
            n, ast.AugAssign) else []  # fmt: skip
        for t in targets:
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                names.add(t.value.id)
        if isinstance(n, ast.Call):
            name, value = resolve(n.func, ctx)
            if name and name.startswith(_WRITES_ATOMIC) and n.args:
                if isinstance(n.args[0], ast.Name):
                    names.add(n.args[0].id)
            callee = getattr(value, "py_func", None)
            for i, arg in enumerate(n.args):
                if isinstance(arg, ast.Name) and i in device_writes.get(callee, ()):
                    names.add(arg.id)
    return names


def emit_function(
    types: FunctionTypes,
    needs: DraftNeeds,
    device: dict[Any, FunctionTypes],
    device_writes: dict[Any, set[int]],
    dimension: Callable[[str, int | None], str | None],
) -> list[str]:
    """The C text of one function; records the indices of the array parameters it
    writes in ``device_writes`` (for its callers' ``const``)."""
    node, lines, first, file = parsed(types.py_func)
    if not types.kernel:
        dimension = _passed_dimension(types)
    ctx = FunctionContext(
        types, file, types.py_func.__globals__, needs, device=device, dimension=dimension,
        source_lines=[line.rstrip("\n") for line in textwrap.dedent("".join(lines)).splitlines()],
        first_line=first,
    )  # fmt: skip
    params = []
    for i, name in enumerate(types.params):
        vec = types.param_vec(i)
        if is_array(vec[0]):
            ndim = vec[0].ndim
            ctx.arrays[name] = ArrayInfo(
                "param", ndim, tuple(element(t) for t in vec), [None] * ndim
            )
    writes = written(node, ctx, device_writes)
    device_writes[types.py_func] = {i for i, p in enumerate(types.params) if p in writes}
    out: list[str] = []
    doc = ast.get_docstring(node)
    if doc:
        out += [f"// {line}".rstrip() for line in doc.splitlines()]
    for problem in types.problems:
        gap_stmt = Untranslated(problem)
        statements = Statements(ctx, plan([], set()), {}, types.kernel)
        statements.gap(0, gap_stmt, node)
        out += statements.lines
    try:
        for i, name in enumerate(types.params):
            vec = types.param_vec(i)
            if is_array(vec[0]):
                const = "" if name in writes else "const "
                elem = ctx.type_name(tuple(element(t) for t in vec))
                params.append(f"{const}{elem}* {c_identifier(name)}")
                if not types.kernel:  # its row lengths, which the launch gives a kernel
                    params += [
                        f"long long {dimension_parameter(name, d)}" for d in range(1, vec[0].ndim)
                    ]
            else:
                params.append(
                    f"{ctx.type_name(tuple(unliteral(t) for t in vec))} {c_identifier(name)}"
                )
        returns = "void" if types.kernel else return_type(ctx)
    except Untranslated as problem:
        statements = Statements(ctx, plan([], set()), {}, types.kernel)
        statements.gap(0, problem, node)
        return out + statements.lines
    if types.templates:
        out.append(f"template <{', '.join(f'typename {t}' for t in types.templates.values())}>")
    qualifier = "__global__" if types.kernel else "__device__"
    if types.kernel:
        returns += launch_bounds(node, ctx)
    header = f"{qualifier} {returns} {types.name}({', '.join(params)}) {{"
    statements = Statements(ctx, plan(node.body, set(types.params)), comments(lines, first),
                            types.kernel)  # fmt: skip
    statements.know(node.body)
    statements.emit(0, header, node)
    statements.block(node.body, 1)
    statements.lines.append("}")
    return out + statements.lines


def launch_bounds(node: ast.FunctionDef, ctx: FunctionContext) -> str:
    """`` __launch_bounds__(MAX_THREADS)`` for ``@cuda.jit(launch_bounds=MAX_THREADS)``
    (a tuple: its 1-3 values), else ``""``. A value whose C spelling has parentheses,
    which the twin's kernel parser does not read there, is written as its number."""
    for decorator in node.decorator_list:
        keywords = decorator.keywords if isinstance(decorator, ast.Call) else []
        for keyword in (k for k in keywords if k.arg == "launch_bounds"):
            value = keyword.value
            items = value.elts if isinstance(value, ast.Tuple) else [value]
            texts = [_bound(item, ctx) for item in items]
            return f" __launch_bounds__({', '.join(texts)})"
    return ""


def _bound(node: ast.expr, ctx: FunctionContext) -> str:
    try:
        text = Expressions(ctx)(node).text
    except Untranslated:
        text = "("
    if "(" not in text:
        return text
    return str(eval(compile(ast.Expression(node), "launch_bounds", "eval"), ctx.globals))


def _passed_dimension(types: FunctionTypes) -> Callable[[str, int | None], str | None]:
    """A device function's array lengths: past the first, its own parameters."""
    ndims = {p: types.param_vec(i)[0].ndim for i, p in enumerate(types.params)
             if is_array(types.param_vec(i)[0])}  # fmt: skip

    def dimension(array: str, dim: int | None) -> str | None:
        if dim is None or not 0 < dim < ndims.get(array, 0):
            return None
        return dimension_parameter(array, dim)

    return dimension


def return_type(ctx: FunctionContext) -> str:
    from numba.core import types

    returns = ctx.types.returns
    if all(r == types.none for r in returns):
        return "void"
    if isinstance(returns[0], types.BaseTuple):
        fields = [tuple(r.types[i] for r in returns) for i in range(len(returns[0]))]
        return tuple_type(ctx, fields)
    return ctx.type_name(tuple(unliteral(r) for r in returns))


def placeholder(name: str, reason: str, needs: DraftNeeds, file: str, line: int) -> list[str]:
    """A kernel the draft cannot type at all: its ``#error`` alone."""
    from portkit.port.context import Gap

    gap = Gap(f"kernel {name} ({reason})", file, line)
    needs.gaps.append(gap)
    return [gap.directive()]
