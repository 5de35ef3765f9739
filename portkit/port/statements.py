"""Python statements of a kernel as C statements, each with its prototype line.

Every statement's first line ends in ``// file.py:LINE`` (and the Python comment of
that line, if any); a statement that cannot be translated becomes an ``#error``
naming the construct and the line, at its place, and is listed as a gap.
"""

from __future__ import annotations

import ast

from portkit.port.context import (
    CExpr,
    FunctionContext,
    Gap,
    TupleExpr,
    Untranslated,
    resolve,
)
from portkit.port.ctype import has_half, unliteral
from portkit.port.declarations import Declarations
from portkit.port.expressions import BINOPS, Expressions
from portkit.port.spelling import c_identifier
from portkit.port.vartypes import resolved

INDENT = "    "


class Statements:
    def __init__(
        self,
        ctx: FunctionContext,
        declarations: Declarations,
        comments: dict[int, str],
        kernel: bool,
    ) -> None:
        self.ctx, self.ex = ctx, Expressions(ctx)
        self.declarations, self.comments, self.kernel = declarations, comments, kernel
        self.lines: list[str] = []
        self.assigned: dict[str, list[ast.AST | None]] = {}  # name -> values (None: unknown)

    def know(self, body: list[ast.stmt]) -> None:
        """Note what each variable of the function is assigned (for ``positive``)."""
        for node in (n for stmt in body for n in ast.walk(stmt)):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name):
                    self.assigned.setdefault(target.id, []).append(node.value)
                for item in target.elts if isinstance(target, ast.Tuple) else ():
                    if isinstance(item, ast.Name):
                        self.assigned.setdefault(item.id, []).append(None)
            elif isinstance(node, (ast.AugAssign, ast.For)) and isinstance(node.target, ast.Name):
                self.assigned.setdefault(node.target.id, []).append(None)

    # ---------------------------------------------------------------- output
    def line_of(self, node: ast.AST) -> int:
        # statements and expressions carry a position; ast.AST itself declares none
        return self.ctx.first_line + getattr(node, "lineno", 1) - 1

    def emit(self, depth: int, text: str, node: ast.AST | None = None) -> None:
        if node is None:
            self.lines.append(INDENT * depth + text)
            return
        line = self.line_of(node)
        note = self.comments.get(line)
        comment = f"// {self.ctx.file}:{line}" + (f": {note}" if note else "")
        self.lines.append(f"{INDENT * depth}{text}  {comment}")

    def gap(self, depth: int, problem: Untranslated, node: ast.AST) -> None:
        found = problem.node
        where = found if found is not None and getattr(found, "lineno", None) else node
        kind = "kernel" if self.ctx.types.kernel else "device function"
        inside = f"{kind} {self.ctx.types.py_func.__name__}"
        gap = Gap(problem.construct, self.ctx.file, self.line_of(where), inside)
        self.ctx.needs.gaps.append(gap)
        self.lines.append(INDENT * depth + gap.directive())

    def block(self, stmts: list[ast.stmt], depth: int) -> None:
        for stmt in stmts:
            for name in self.declarations.before.get(id(stmt), ()):
                self.declare(depth, name, stmt)
            try:
                self.statement(self.hoisted(stmt, depth), depth)
            except Untranslated as problem:
                self.gap(depth, problem, stmt)

    def hoisted(self, stmt: ast.stmt, depth: int) -> ast.stmt:
        """``stmt`` with the arrays it makes as call arguments declared before it."""
        from portkit.port.arrays import declare_array, hoist_inline_arrays

        if not isinstance(stmt, (ast.Expr, ast.Assign, ast.AugAssign, ast.Return)):
            return stmt
        named, arrays = hoist_inline_arrays(self.ctx, stmt)
        for name, kind, call in arrays:
            for text in declare_array(self.ctx, self.ex, name, kind, call):
                self.emit(depth, text, stmt)
        if named is not stmt and id(stmt) in self.declarations.inline:  # `T top = ...` stays
            self.declarations.inline[id(named)] = self.declarations.inline[id(stmt)]
        return named

    def declare(self, depth: int, name: str, stmt: ast.stmt) -> None:
        try:
            vec = self.ctx.types.variables.get(name)
            if vec is None:
                raise Untranslated(f"variable {name}, which numba did not type")
            self.emit(depth, f"{self.ctx.type_name(vec)} {c_identifier(name)};", stmt)
        except Untranslated as problem:
            self.gap(depth, problem, stmt)

    # ---------------------------------------------------------------- statements
    def statement(self, stmt: ast.stmt, depth: int) -> None:
        method = getattr(self, f"_{type(stmt).__name__}", None)
        if method is None:
            raise Untranslated(f"{type(stmt).__name__.lower()} statement", stmt)
        method(stmt, depth)

    def _Pass(self, stmt: ast.Pass, depth: int) -> None:
        pass

    def _Break(self, stmt: ast.Break, depth: int) -> None:
        self.emit(depth, "break;", stmt)

    def _Continue(self, stmt: ast.Continue, depth: int) -> None:
        self.emit(depth, "continue;", stmt)

    def _Expr(self, stmt: ast.Expr, depth: int) -> None:
        if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            return  # a docstring
        self.emit(depth, f"{self.ex(stmt.value).text};", stmt)

    def _Return(self, stmt: ast.Return, depth: int) -> None:
        if stmt.value is None or self.kernel:
            if stmt.value is not None:
                raise Untranslated("a kernel returning a value", stmt)
            self.emit(depth, "return;", stmt)
            return
        returns = self.ctx.types.returns
        from numba.core import types

        if isinstance(returns[0], types.BaseTuple):
            if not isinstance(stmt.value, ast.Tuple):
                raise Untranslated("return of a tuple variable", stmt)
            fields = [tuple(r.types[i] for r in returns) for i in range(len(returns[0]))]
            values = [self.ex.convert(self.ex(v), f) for v, f in zip(stmt.value.elts, fields)]
            name = tuple_type(self.ctx, fields)
            self.emit(depth, f"return {name}{{{', '.join(v.text for v in values)}}};", stmt)
            return
        value = self.ex.convert(self.ex(stmt.value), tuple(unliteral(r) for r in returns))
        self.emit(depth, f"return {value.text};", stmt)

    def _If(self, stmt: ast.If, depth: int, keyword: str = "if") -> None:
        self.emit(depth, f"{keyword} ({self.ex(stmt.test).text}) {{", stmt)
        self.block(stmt.body, depth + 1)
        orelse = stmt.orelse
        if len(orelse) == 1 and isinstance(orelse[0], ast.If):
            self._If(orelse[0], depth, "} else if")
            return
        if orelse:
            self.lines.append(INDENT * depth + "} else {")
            self.block(orelse, depth + 1)
        self.lines.append(INDENT * depth + "}")

    def _While(self, stmt: ast.While, depth: int) -> None:
        if stmt.orelse:
            raise Untranslated("while ... else", stmt)
        self.emit(depth, f"while ({self.ex(stmt.test).text}) {{", stmt)
        self.block(stmt.body, depth + 1)
        self.lines.append(INDENT * depth + "}")

    def _For(self, stmt: ast.For, depth: int) -> None:
        it = stmt.iter
        name, _ = resolve(it.func, self.ctx) if isinstance(it, ast.Call) else (None, None)
        if (
            name != "range"
            or not isinstance(it, ast.Call)
            or stmt.orelse
            or not isinstance(stmt.target, ast.Name)
        ):
            raise Untranslated("for loop over anything but range()", stmt)
        args = list(it.args)
        start = args[0] if len(args) > 1 else ast.Constant(0)
        stop = args[1] if len(args) > 1 else args[0]
        step = args[2] if len(args) > 2 else ast.Constant(1)
        changed = {
            t.id for s in stmt.body for t in ast.walk(s)
            if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)
        }  # fmt: skip
        used = {n.id for part in (stop, step) for n in ast.walk(part) if isinstance(n, ast.Name)}
        if changed & used:
            raise Untranslated(f"range() bound changed in the loop ({', '.join(changed & used)})")
        var = c_identifier(stmt.target.id)
        stop_e = self.ex(stop)
        vec = self.ctx.types.variables.get(stmt.target.id, stop_e.ntype)
        ctype = self.ctx.type_name(vec)
        first = self.ex.convert(self.ex(start), vec).text
        step_value = _constant(step, self.ctx.globals)
        if step_value is None and self.positive(step):
            step_value = 1 << 62  # a grid stride: only its sign matters here
        if step_value == 1 and _constant(step, self.ctx.globals) == 1:
            test, advance = f"{var} < {stop_e.text}", f"++{var}"
        else:
            step_e = self.ex(step)
            advance = f"{var} += {step_e.text}"
            if step_value is None:
                test = f"{step_e.at(4)} > 0 ? {var} < {stop_e.text} : {var} > {stop_e.text}"
            else:
                test = f"{var} {'<' if step_value > 0 else '>'} {stop_e.text}"
        self.emit(depth, f"for ({ctype} {var} = {first}; {test}; {advance}) {{", stmt)
        self.block(stmt.body, depth + 1)
        self.lines.append(INDENT * depth + "}")

    def positive(self, node: ast.AST) -> bool:
        """Whether ``node`` is known to be positive: a launch dimension, ``cuda.gridsize``,
        a positive constant, a product of those, or a variable only ever set to one."""
        if (constant := _constant(node, self.ctx.globals)) is not None:
            return constant > 0
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            return self.positive(node.left) and self.positive(node.right)
        if isinstance(node, ast.Name) and node.id in self.ctx.types.variables:
            values = self.assigned.get(node.id, [])
            return (
                bool(values)
                and all(v is not node and self.positive(v) for v in values if v is not None)
                and None not in values
            )
        target = node.func if isinstance(node, ast.Call) else node
        name, _ = resolve(target, self.ctx)
        return name in _POSITIVE or (name or "").startswith(("cuda.blockDim.", "cuda.gridDim."))

    def _Assign(self, stmt: ast.Assign, depth: int) -> None:
        if len(stmt.targets) != 1:
            raise Untranslated("chained assignment", stmt)
        target = stmt.targets[0]
        if isinstance(target, ast.Tuple):
            return self.unpack(target, stmt, depth)
        if isinstance(target, ast.Name) and isinstance(stmt.value, ast.Call):
            name, _ = resolve(stmt.value.func, self.ctx)
            if name in ("cuda.shared.array", "cuda.local.array"):
                from portkit.port.arrays import declare_array

                for text in declare_array(self.ctx, self.ex, target.id, name, stmt.value):
                    self.emit(depth, text, stmt)
                return
        value = self.ex(stmt.value)
        if isinstance(target, ast.Subscript):
            element = self.ex(target)
            text = f"{element.text} = {self.ex.convert(value, element.ntype).text};"
            self.emit(depth, text, stmt)
            return
        if not isinstance(target, ast.Name):
            raise Untranslated(f"assignment to {ast.unparse(target)}", stmt)
        self.assign(target.id, value, stmt, depth)

    def assign(self, name: str, value: CExpr, stmt: ast.stmt, depth: int) -> None:
        vec = self.ctx.types.variables.get(name)
        if vec is None:
            raise Untranslated(f"variable {name}, which numba did not type", stmt)
        text = f"{c_identifier(name)} = {self.ex.convert(value, vec).text};"
        if name in self.declarations.inline.get(id(stmt), ()):
            text = f"{self.ctx.type_name(vec)} {text}"
        self.emit(depth, text, stmt)

    def unpack(self, target: ast.Tuple, stmt: ast.Assign, depth: int) -> None:
        names = [t.id for t in target.elts if isinstance(t, ast.Name)]
        if len(names) != len(target.elts):
            raise Untranslated("unpacking into something but names", stmt)
        value = self.ex.any(stmt.value) if not isinstance(stmt.value, ast.Tuple) else None
        if isinstance(stmt.value, ast.Tuple):  # a, b = b, a: every value first, then the stores
            items = [self.ex(v) for v in stmt.value.elts]
        elif isinstance(value, TupleExpr) and value.call is None:
            items = list(value.items)
        elif isinstance(value, TupleExpr) and value.call is not None:
            temp = f"{names[0]}_{'_'.join(names[1:])}"
            name = tuple_type(self.ctx, list(value.fields))
            self.emit(depth, f"const {name} {temp} = {value.call.text};", stmt)
            items = [CExpr(f"{temp}.v{i}", 17, f, f) for i, f in enumerate(value.fields)]
            items = [CExpr(e.text, e.prec, tuple(map(unliteral, e.ntype)),
                           tuple(map(unliteral, e.ctype))) for e in items]  # fmt: skip
        else:
            raise Untranslated("unpacking of a value that is not a tuple", stmt)
        if len(items) != len(names):
            raise Untranslated("unpacking of a tuple of another length", stmt)
        if value is None and set(names) & _names(stmt.value):
            for i, e in enumerate(items):
                self.emit(depth, f"const auto {names[i]}_new = {e.text};", stmt)
            items = [CExpr(f"{n}_new", 17, e.ntype, e.ctype) for n, e in zip(names, items)]
        for name, e in zip(names, items):
            self.assign(name, e, stmt, depth)

    def _AugAssign(self, stmt: ast.AugAssign, depth: int) -> None:
        if type(stmt.op) not in BINOPS or isinstance(stmt.op, ast.Pow):
            raise Untranslated(f"augmented {type(stmt.op).__name__}", stmt)
        fn, op, prec = BINOPS[type(stmt.op)]
        target = self.ex(stmt.target)
        value = self.ex(stmt.value)
        result = resolved(fn, target.ntype, value.ntype)
        simple = not isinstance(stmt.op, ast.FloorDiv) or all("float" not in str(t) for t in result)
        if result == target.ntype and not has_half(result) and simple:
            self.emit(depth, f"{target.text} {op}= {value.text};", stmt)
            return
        combined = ast.BinOp(stmt.target, stmt.op, stmt.value)
        ast.copy_location(combined, stmt)
        new = self.ex.convert(self.ex(combined), target.ntype)
        self.emit(depth, f"{target.text} = {new.text};", stmt)


_POSITIVE = ("cuda.gridsize", "cuda.warpsize")


def _constant(node: ast.AST, names: dict) -> int | None:
    """The value of an int literal or global int constant, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name) and type(names.get(node.id)) is int:
        return names[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _constant(node.operand, names)
        return -inner if inner is not None else None
    return None


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def tuple_type(ctx: FunctionContext, fields: list) -> str:
    """``Tuple2<T, float>``: the struct a device function returns a tuple in."""
    ctx.needs.helpers.add(f"tuple{len(fields)}")
    names = [ctx.type_name(tuple(unliteral(t) for t in f)) for f in fields]
    return f"Tuple{len(fields)}<{', '.join(names)}>"
