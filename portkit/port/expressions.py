"""Python expressions of a kernel as C expressions, typed per signature.

numba's typing context gives the type of each operation (``int32 + int64`` is int64,
``float16 * float16`` float16, ``int / int`` float64); C's usual arithmetic conversions
give the type of the emitted text. Where they differ an operand is cast, so the draft
computes in numba's types: ``(long long)blockIdx.y * TILE``, ``(double)a / b``. Half
precision is read through ``widen`` (float) and rounded once where numba's result is
half: ``(T)(widen(a) * widen(b))``.
"""

from __future__ import annotations

import ast
import operator

from portkit.port import calls, intrinsics
from portkit.port.context import (
    ADD,
    AND,
    ATOM,
    BAND,
    BOR,
    BXOR,
    COND,
    EQ,
    MUL,
    OR,
    REL,
    SHIFT,
    UNARY,
    CExpr,
    FunctionContext,
    TupleExpr,
    Untranslated,
    resolve,
)
from portkit.port.ctype import (
    Vec,
    c_name,
    c_promote,
    has_half,
    is_array,
    is_float,
    is_integer,
    unliteral,
    vec_map,
    widened,
)
from portkit.port.spelling import NO_SUFFIX, c_identifier, float_text, int_text, literal_number
from portkit.port.vartypes import resolved, unify

BINOPS = {
    ast.Add: (operator.add, "+", ADD),
    ast.Sub: (operator.sub, "-", ADD),
    ast.Mult: (operator.mul, "*", MUL),
    ast.Div: (operator.truediv, "/", MUL),
    ast.FloorDiv: (operator.floordiv, "/", MUL),
    ast.Mod: (operator.mod, "%", MUL),
    ast.LShift: (operator.lshift, "<<", SHIFT),
    ast.RShift: (operator.rshift, ">>", SHIFT),
    ast.BitAnd: (operator.and_, "&", BAND),
    ast.BitXor: (operator.xor, "^", BXOR),
    ast.BitOr: (operator.or_, "|", BOR),
    ast.Pow: (operator.pow, "pow", ATOM),
}
_COMPARE = {
    ast.Lt: ("<", REL), ast.LtE: ("<=", REL), ast.Gt: (">", REL), ast.GtE: (">=", REL),
    ast.Eq: ("==", EQ), ast.NotEq: ("!=", EQ),
}  # fmt: skip
MATH_CONSTANTS = {"math.pi": "CUDART_PI", "math.inf": "CUDART_INF", "math.nan": "CUDART_NAN"}


class Expressions:
    def __init__(self, ctx: FunctionContext) -> None:
        self.ctx = ctx

    # ---------------------------------------------------------------- helpers
    def widen(self, e: CExpr) -> CExpr:
        if not has_half(e.ctype):
            return e
        self.ctx.needs.helpers.add("widen")
        return CExpr(f"widen({e.text})", ATOM, e.ntype, vec_map(widened, e.ctype))

    def cast(self, e: CExpr, vec: Vec) -> CExpr:
        """``e`` as a value of type ``vec``, by an explicit conversion if it differs."""
        vec = tuple(unliteral(t) for t in vec)
        e = self.widen(e) if not has_half(vec) or e.ctype != vec else e
        if e.ctype == vec:
            return CExpr(e.text, e.prec, vec, vec, e.literal)
        name = self.ctx.type_name(vec)
        number = literal_number(e)
        if number is not None and len(set(vec)) == 1 and name in ("float", "double"):
            text = repr(float(number)) + ("f" if name == "float" else "")
            return CExpr(text, ATOM, vec, vec, True)
        return CExpr(f"({name}){e.at(UNARY)}", UNARY, vec, vec)

    def convert(self, e: CExpr, vec: Vec) -> CExpr:
        """``e`` stored into a ``vec``: explicit where half precision is involved (the
        C conversion would be ambiguous), implicit otherwise, as numba's store."""
        vec = tuple(unliteral(t) for t in vec)
        if e.ctype == vec or not (has_half(vec) or has_half(e.ctype)):
            return e
        return self.cast(e, vec)

    def __call__(self, node: ast.AST) -> CExpr:
        result = self.any(node)
        if isinstance(result, TupleExpr):
            raise Untranslated("a tuple value outside an unpacking assignment", node)
        return result

    def any(self, node: ast.AST) -> CExpr | TupleExpr:
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            raise Untranslated(f"{type(node).__name__.lower()} expression", node)
        return method(node)

    # ---------------------------------------------------------------- leaves
    def _Constant(self, node: ast.Constant) -> CExpr:
        from numba.core import types

        value = node.value
        if isinstance(value, bool):
            t = self.ctx.same(types.boolean)
            return CExpr("true" if value else "false", ATOM, t, t, True)
        if isinstance(value, int):
            small = -(2**31) <= value < 2**31
            text = str(value)
            source = ast.get_source_segment("\n".join(self.ctx.source_lines), node)
            if source and source.lower().startswith("0x") and "_" not in source:
                text = source
            ctype = types.int32 if small else types.int64
            if not small:
                text += "LL"
            return CExpr(text, ATOM, self.ctx.same(types.int64), self.ctx.same(ctype), True)
        if isinstance(value, float):
            text = repr(value)
            if value != value or value in (float("inf"), float("-inf")):
                self.ctx.needs.helpers.add("math_constants")
                text = {"nan": "CUDART_NAN", "inf": "CUDART_INF", "-inf": "-CUDART_INF"}[text]
            t = self.ctx.same(types.float64)
            return CExpr(text, ATOM if text[0] != "-" else UNARY, t, t, True)
        raise Untranslated(f"constant {value!r}", node)

    def _Name(self, node: ast.Name) -> CExpr:
        from numba.core import types

        ctx = self.ctx
        if node.id in ctx.arrays:
            raise Untranslated(f"array {node.id} used as a value", node)
        if node.id in ctx.types.variables:
            vec = tuple(unliteral(t) for t in ctx.types.variables[node.id])
            if any(is_array(t) for t in vec):
                raise Untranslated(f"array {node.id} used as a value", node)
            return CExpr(c_identifier(node.id), ATOM, vec, vec)
        value = ctx.globals.get(node.id)
        if isinstance(value, bool):
            t = ctx.same(types.boolean)
            ctx.needs.constants.setdefault(node.id, ("bool", "true" if value else "false"))
        elif isinstance(value, int):
            t = ctx.same(types.int64)
            ctx.needs.constants.setdefault(node.id, ("long long", int_text(value)))
        elif isinstance(value, float):
            t = ctx.same(types.float64)
            ctx.needs.constants.setdefault(node.id, ("double", float_text(value, ctx)))
        else:
            raise Untranslated(f"name {node.id}", node)
        return CExpr(node.id, ATOM, t, t)

    def _Attribute(self, node: ast.Attribute) -> CExpr:
        from numba.core import types

        name, value = resolve(node, self.ctx)
        if name in MATH_CONSTANTS:
            self.ctx.needs.helpers.add("math_constants")
            t = self.ctx.same(types.float64)
            return CExpr(MATH_CONSTANTS[name], ATOM, t, t)
        if name is not None and name.startswith("math.") and isinstance(value, float):
            t = self.ctx.same(types.float64)
            return CExpr(repr(value), ATOM, t, t, True)
        if name is not None and name.startswith("cuda."):
            return intrinsics.attribute(self, name, node)
        if isinstance(node.value, ast.Name) and node.value.id in self.ctx.arrays:
            return self._array_attribute(node.value.id, node.attr, node)
        raise Untranslated(f"attribute {ast.unparse(node)}", node)

    def _array_attribute(self, array: str, attr: str, node: ast.AST) -> CExpr:
        from numba.core import types

        info = self.ctx.arrays[array]
        t = self.ctx.same(types.int64)
        if attr == "itemsize":
            return CExpr(f"(long long)sizeof({self.ctx.type_name(info.element)})", UNARY, t, t)
        if attr == "ndim":
            return CExpr(str(info.ndim), ATOM, t, t, True)
        if attr == "size":
            return CExpr(self.dimension(array, None, node), ATOM, t, t)
        raise Untranslated(f"attribute {attr} of array {array}", node)

    def dimension(self, array: str, dim: int | None, node: ast.AST) -> str:
        info = self.ctx.arrays[array]
        if info.kind != "param":
            if dim is None or dim >= len(info.dims) or info.dims[dim] is None:
                raise Untranslated(f"size of local array {array}", node)
            return str(info.dims[dim])
        text = self.ctx.dimension(array, dim)
        if text is None:
            what = "element count" if dim is None else f"dimension {dim}"
            if not self.ctx.types.kernel:
                raise Untranslated(f"{what} of {array} in a device function, which sees no launch")
            raise Untranslated(
                f"{what} of {array}, which no scalar parameter or launch dimension equals "
                "in every launch",
                node,
            )
        return text

    # ---------------------------------------------------------------- indexing
    def _Subscript(self, node: ast.Subscript) -> CExpr:
        from numba.core import types

        base = node.value
        if isinstance(base, ast.Attribute) and base.attr == "shape":
            if isinstance(base.value, ast.Name) and base.value.id in self.ctx.arrays:
                if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
                    t = self.ctx.same(types.int64)
                    text = self.dimension(base.value.id, node.slice.value, node)
                    return CExpr(text, ATOM, t, t)
        if not (isinstance(base, ast.Name) and base.id in self.ctx.arrays):
            raise Untranslated(f"subscript of {ast.unparse(base)}", node)
        info = self.ctx.arrays[base.id]
        return CExpr(self.element(base.id, node.slice), ATOM, info.element, info.element)

    def element(self, array: str, index: ast.AST) -> str:
        """``array[index]`` in C: flat for a parameter, ``[i][j]`` for a C array."""
        info = self.ctx.arrays[array]
        items = index.elts if isinstance(index, ast.Tuple) else [index]
        if any(isinstance(i, ast.Slice) for i in items) or len(items) != info.ndim:
            raise Untranslated(f"slice or partial index of {array}", index)
        exprs = [self(i) for i in items]
        for e, item in zip(exprs, items):
            if not all(is_integer(t) for t in e.ntype):
                raise Untranslated(f"non-integer index of {array}", item)
        if info.kind != "param" or info.ndim == 1:
            return c_identifier(array) + "".join(f"[{e.text}]" for e in exprs)
        flat = exprs[0].at(MUL)
        for dim in range(1, info.ndim):
            length = self.dimension(array, dim, index)
            flat = f"{flat} * {length} + {exprs[dim].at(ADD)}"
            if dim + 1 < info.ndim:
                flat = f"({flat})"
        return f"{c_identifier(array)}[{flat}]"

    # ---------------------------------------------------------------- operators
    def _BinOp(self, node: ast.BinOp) -> CExpr:
        if type(node.op) not in BINOPS:
            raise Untranslated(f"operator {type(node.op).__name__}", node)
        fn, text, prec = BINOPS[type(node.op)]
        left, right = self(node.left), self(node.right)
        result = resolved(fn, left.ntype, right.ntype)
        floats = all(is_float(t) for t in result)
        if isinstance(node.op, ast.Pow):
            if not floats:
                raise Untranslated("integer power", node)
            return self.call_float("pow", [left, right], result)
        if isinstance(node.op, ast.FloorDiv) and floats:
            quotient = self.arith("/", MUL, left, right, result)
            return self.call_float("floor", [quotient], result)
        if isinstance(node.op, ast.Mod) and floats:
            return self.call_float("fmod", [left, right], result)
        return self.arith(text, prec, left, right, result)

    def arith(self, op: str, prec: int, left: CExpr, right: CExpr, result: Vec) -> CExpr:
        left, right = self.widen(left), self.widen(right)
        if has_half(result):  # compute in float, round once, as numba's half arithmetic
            name = self.ctx.type_name(result)
            text = f"({name})({left.at(prec)} {op} {right.at(prec + 1)})"
            return CExpr(text, UNARY, result, result)
        if vec_map(c_promote, left.ctype, right.ctype) != result:
            if not left.literal and left.ctype != result:
                left = self.cast(left, result)
            if not right.literal and right.ctype != result:
                right = self.cast(right, result)
        ctype = vec_map(c_promote, left.ctype, right.ctype)
        return CExpr(f"{left.at(prec)} {op} {right.at(prec + 1)}", prec, result, ctype)

    def call_float(self, name: str, args: list[CExpr], result: Vec) -> CExpr:
        """A C math function on floats: ``expf`` where every signature computes in
        float32, the overloaded ``exp`` where the type follows a template parameter."""
        from numba.core import types

        compute = tuple(
            types.float32 if all(widened(a.ntype[i]) == types.float32 for a in args)
            else types.float64
            for i in range(self.ctx.nspecs)
        )  # fmt: skip
        converted = [self.cast(a, compute) if a.ctype != compute else a for a in args]
        if all(t == types.float32 for t in compute) and name not in NO_SUFFIX:
            name += "f"
        e = CExpr(f"{name}({', '.join(a.text for a in converted)})", ATOM, compute, compute)
        return e if compute == result else self.cast(CExpr(e.text, ATOM, result, compute), result)

    def _UnaryOp(self, node: ast.UnaryOp) -> CExpr:
        from numba.core import types

        operand = self(node.operand)
        if isinstance(node.op, ast.Not):
            t = self.ctx.same(types.boolean)
            return CExpr(f"!{operand.at(UNARY)}", UNARY, t, t)
        if isinstance(node.op, ast.UAdd):
            return operand
        fn, op = (operator.neg, "-") if isinstance(node.op, ast.USub) else (operator.invert, "~")
        result = resolved(fn, operand.ntype)
        if operand.ctype != result and not has_half(result) and not operand.literal:
            operand = self.cast(operand, result)
        text = f"{op}{operand.at(UNARY)}"
        return CExpr(text, UNARY, result, result, operand.literal)

    def _Compare(self, node: ast.Compare) -> CExpr:
        from numba.core import types

        parts = []
        left = self(node.left)
        for op, right_node in zip(node.ops, node.comparators):
            if type(op) not in _COMPARE:
                raise Untranslated(f"comparison {type(op).__name__}", node)
            text, prec = _COMPARE[type(op)]
            right = self(right_node)
            a, b = self.widen(left), self.widen(right)
            numba_side = vec_map(lambda x, y: unify([x, y]), a.ntype, b.ntype)
            c_side = vec_map(c_promote, a.ctype, b.ctype)
            if c_side != numba_side and all(is_integer(t) for t in numba_side):
                a = a if a.literal or a.ctype == a.ntype else self.cast(a, a.ntype)
                b = b if b.literal or b.ctype == b.ntype else self.cast(b, b.ntype)
            parts.append(f"{a.at(prec)} {text} {b.at(prec + 1)}")
            left = right
        t = self.ctx.same(types.boolean)
        if len(parts) == 1:
            return CExpr(parts[0], _COMPARE[type(node.ops[0])][1], t, t)
        return CExpr(" && ".join(f"({p})" for p in parts), AND, t, t)

    def _BoolOp(self, node: ast.BoolOp) -> CExpr:
        from numba.core import types

        op, prec = ("&&", AND) if isinstance(node.op, ast.And) else ("||", OR)
        values = [self(v).at(prec + 1) for v in node.values]
        t = self.ctx.same(types.boolean)
        return CExpr(f" {op} ".join(values), prec, t, t)

    def _IfExp(self, node: ast.IfExp) -> CExpr:
        test, body, orelse = self(node.test), self(node.body), self(node.orelse)
        result = vec_map(lambda a, b: unify([a, b]), body.ntype, orelse.ntype)
        body, orelse = self.branch(body, result), self.branch(orelse, result)
        text = f"{test.at(OR)} ? {body.at(COND + 1)} : {orelse.at(COND)}"
        return CExpr(text, COND, result, vec_map(c_promote, body.ctype, orelse.ctype))

    def branch(self, e: CExpr, result: Vec) -> CExpr:
        if has_half(result) or has_half(e.ctype) or (e.ctype != result and not e.literal):
            return self.cast(e, result)
        return e

    # ---------------------------------------------------------------- calls
    def _Call(self, node: ast.Call) -> CExpr | TupleExpr:
        from numba.core import types

        name, value = resolve(node.func, self.ctx)
        if isinstance(value, types.Type) and c_name(value) is not None:
            if len(node.args) != 1 or node.keywords:
                raise Untranslated(f"conversion {ast.unparse(node.func)} with these arguments")
            return self.cast(self(node.args[0]), self.ctx.same(unliteral(value)))
        if name is not None and name.startswith("cuda."):
            return intrinsics.call(self, name, node)
        if name is not None and name.startswith("math."):
            return calls.math_call(self, name, value, node)
        if name in ("abs", "min", "max", "int", "float", "bool", "len", "round"):
            return calls.builtin(self, name, value, node)
        py_func = getattr(value, "py_func", None)
        if py_func is not None and py_func in self.ctx.device:
            return intrinsics.device_call(self, self.ctx.device[py_func], node)
        raise Untranslated(f"call of {ast.unparse(node.func)}", node)
