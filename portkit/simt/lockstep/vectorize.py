"""Rewrite a kernel's source so that it runs over all lanes at once.

The rewritten function runs once per chunk of lanes, not once per thread. What
changes (file and line numbers are kept, so a frame names the user's own line):

- ``if c:`` runs as before when ``c`` is one value for every lane (a NumPy scalar);
  when it is an array, both branches run under masks (``ctx.branch/orelse/endif``);
- ``while`` and ``for ... in range(...)`` loop while any lane still loops, each lane's
  mask narrowing as its condition fails; ``break``, ``continue`` and ``return`` take the
  lanes that ran them out of the mask until the loop or function ends;
- ``x = v`` keeps the old value in the lanes that are masked off (``ctx.sel``);
- subscripts become ``ctx.load`` / ``ctx.store`` (checked gathers and scatters);
- ``and``/``or``/``not``/``a if c else b`` evaluate per lane, the right side only in the
  lanes that need it, as Python's short circuit does per thread;
- barriers and warp operations become ``ctx.wait(...)``; shared, local and constant
  allocations ``ctx.shared/local/const`` with their call site.

Anything else (``with``, ``try``, nested functions, comprehensions, ``print``, ``for``
over something other than ``range``) makes the kernel *unsupported*: it runs in the
per-thread engine, and ``portkit sim --verbose`` says why.
"""

from __future__ import annotations

import ast
import builtins
import copy
import inspect
import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from portkit.simt.scalars import NumberCast, as_dtype, typed_constant
from portkit.simt.transform import ALLOCATORS, WAITING_INTRINSICS, _ModuleProxy, is_device_function

UNSUPPORTED_NODES = (
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.Raise,
    ast.Assert,
    ast.Global,
    ast.Nonlocal,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Lambda,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.Delete,
    ast.Import,
    ast.ImportFrom,
    ast.NamedExpr,
    ast.Yield,
    ast.YieldFrom,
    ast.Await,
    ast.Starred,
    ast.Match,
)


class Unsupported(Exception):
    """The lockstep engine cannot run this (construct, value or fault); the per-thread
    engine runs the launch instead. The message says why."""


@dataclass
class VectorFunction:
    name: str
    function: Callable[..., Any]
    parameters: tuple[str, ...]


class Vectorizer:
    """Rewrites kernels and the device functions they call, each once."""

    def __init__(self, rewriter: Any, ctx: Any, helpers: dict[str, Any]) -> None:
        self._rewriter = rewriter  # the per-thread Rewriter: name resolution, files
        self._ctx = ctx
        self._helpers = helpers  # vector builtins, math, cuda
        self._done: dict[int, VectorFunction] = {}
        self._count = 0

    def rewrite(self, dispatcher: Any, device: bool = False) -> VectorFunction:
        key = id(dispatcher)
        if key not in self._done:
            self._done[key] = self._rewrite(dispatcher, device)
        return self._done[key]

    def fresh(self, stem: str) -> str:
        self._count += 1
        return f"__pk_{stem}{self._count}"

    def _rewrite(self, dispatcher: Any, device: bool) -> VectorFunction:
        fn = dispatcher.py_func
        lines, first = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
        ast.increment_lineno(tree, first - 1)
        definition = tree.body[0]
        if not isinstance(definition, ast.FunctionDef):
            raise Unsupported(f"{fn.__name__} is not a plain def function")
        for node in ast.walk(definition):
            if node is not definition and isinstance(node, UNSUPPORTED_NODES):
                raise Unsupported(f"line {node.lineno}: {type(node).__name__} is not vectorised")
            if isinstance(node, (ast.While, ast.For)) and node.orelse:
                raise Unsupported(f"line {node.lineno}: a loop with an else clause")
            if isinstance(node, ast.Compare) and len(node.ops) > 1:
                raise Unsupported(f"line {node.lineno}: a chained comparison")
            if isinstance(node, ast.Name) and node.id == "print":
                raise Unsupported(f"line {node.lineno}: print (its order is per thread)")
        definition.decorator_list = []
        scope = dict(fn.__globals__)
        if fn.__closure__:
            scope.update(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__)))
        namespace = dict(fn.__globals__)
        namespace.update(self._helpers)
        parameters = tuple(a.arg for a in definition.args.args)
        body = _Body(self, scope, namespace, device)
        definition.body = body.function_body(definition, parameters)
        ast.fix_missing_locations(tree)
        for name in body.loaded:
            if name in scope:
                namespace[name] = self.vector_value(scope[name])
            elif name in self._helpers:
                namespace[name] = self._helpers[name]
        code = compile(tree, fn.__code__.co_filename, "exec")
        exec(code, namespace)
        function = namespace[definition.name]
        function.__defaults__ = tuple(self.vector_value(d) for d in fn.__defaults__ or ())
        return VectorFunction(fn.__name__, function, parameters)

    def vector_value(self, value: Any) -> Any:
        """What a global or closure value of a kernel is in the lockstep engine."""
        import numba
        from numba import cuda
        from numba.core import types as numba_types

        if value is cuda:
            return self._helpers["__pk_cuda"]
        if value is math:
            return self._helpers["__pk_math"]
        if value is numba or value is numba_types:
            return _ModuleProxy(value, self.vector_value)
        if isinstance(value, numba_types.Number):
            return NumberCast(as_dtype(value), str(value))
        if isinstance(value, (bool, int, float)):
            return typed_constant(value)
        if callable(value) and getattr(math, getattr(value, "__name__", ""), None) is value:
            return getattr(self._helpers["__pk_math"], value.__name__)
        if is_device_function(value):
            return self.rewrite(value, device=True).function
        name = self._rewriter.intrinsic_name(value)
        if name is not None:
            if name in WAITING_INTRINSICS:
                raise Unsupported(f"cuda.{name} reached through an alias")
            return getattr(self._helpers["__pk_cuda"], name)
        return value


def _name(identifier: str, store: bool = False) -> ast.Name:
    return ast.Name(id=identifier, ctx=ast.Store() if store else ast.Load())


def _ctx_call(method: str, *args: ast.expr) -> ast.Call:
    return ast.Call(
        func=ast.Attribute(value=_name("__pk_ctx"), attr=method, ctx=ast.Load()),
        args=list(args),
        keywords=[],
    )


def _assign(target: str, value: ast.expr) -> ast.Assign:
    return ast.Assign(targets=[_name(target, store=True)], value=value)


def _lambda(body: ast.expr) -> ast.Lambda:
    arguments = ast.arguments(
        posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
    )
    return ast.Lambda(args=arguments, body=body)


def _has(node: ast.AST, kinds: tuple[type, ...], into_loops: bool = True) -> bool:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, kinds):
            return True
        for child in ast.iter_child_nodes(current):
            if into_loops or not isinstance(child, (ast.While, ast.For)):
                stack.append(child)
    return False


class _Body:
    """Statements and expressions of one function, rewritten for lanes."""

    def __init__(self, owner: Vectorizer, scope: dict, namespace: dict, device: bool) -> None:
        self.owner = owner
        self.scope = scope
        self.namespace = namespace
        self.device = device
        self.loaded: set[str] = set()
        self.loops: list[str] = []  # names of the enclosing loops' frames

    def function_body(self, definition: ast.FunctionDef, parameters: tuple[str, ...]) -> list:
        assigned = sorted(
            {
                n.id
                for n in ast.walk(definition)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
            - set(parameters)
        )
        prologue: list[ast.stmt] = [
            _assign("__pk_F", _ctx_call("enter")),
            _assign("__pk_rv", _name("__pk_U")),
        ]
        prologue += [_assign(name, _name("__pk_U")) for name in assigned]
        leave = ast.Return(value=_ctx_call("leave", _name("__pk_F"), _name("__pk_rv")))
        body = self.block(definition.body, escape=leave)
        return [ast.copy_location(s, definition) for s in prologue] + body + [leave]

    # -- statements ----------------------------------------------------------------------
    def block(self, statements: list[ast.stmt], escape: ast.stmt | None) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for statement in statements:
            out += [ast.copy_location(s, statement) for s in self.statement(statement)]
            exits = (ast.Return,) + ((ast.Break, ast.Continue) if self.loops else ())
            if escape is not None and _has(statement, exits, into_loops=False):
                check = ast.If(
                    test=ast.UnaryOp(op=ast.Not(), operand=_ctx_call("active")),
                    body=[copy.deepcopy(escape)],
                    orelse=[],
                )
                out.append(ast.copy_location(check, statement))
            if escape is not None and _has(statement, (ast.Return,)) and self.loops:
                pass  # a return inside a loop leaves the lanes dead; the loop test sees it
        return out or [ast.Pass()]

    def statement(self, node: ast.stmt) -> list[ast.stmt]:
        if isinstance(node, ast.Expr):
            if isinstance(node.value, ast.Constant):
                return []  # a docstring
            return [ast.Expr(value=self.expr(node.value))]
        if isinstance(node, ast.Pass):
            return [node]
        if isinstance(node, ast.Assign):
            if len(node.targets) != 1:
                raise Unsupported(f"line {node.lineno}: chained assignment")
            return self.assign(node.targets[0], self.expr(node.value))
        if isinstance(node, ast.AnnAssign):
            return self.assign(node.target, self.expr(node.value)) if node.value else []
        if isinstance(node, ast.AugAssign):
            return self.augmented(node)
        if isinstance(node, ast.If):
            return self.branch(node)
        if isinstance(node, ast.While):
            return self.loop(node.test, None, node.body)
        if isinstance(node, ast.For):
            return self.for_range(node)
        if isinstance(node, ast.Return):
            value = self.expr(node.value) if node.value is not None else ast.Constant(None)
            return [_assign("__pk_rv", _ctx_call("ret", _name("__pk_rv"), value))]
        if isinstance(node, ast.Break):
            return [ast.Expr(value=_ctx_call("brk", _name(self.loops[-1])))]
        if isinstance(node, ast.Continue):
            return [ast.Expr(value=_ctx_call("cont", _name(self.loops[-1])))]
        raise Unsupported(f"line {node.lineno}: {type(node).__name__} is not vectorised")

    def assign(self, target: ast.expr, value: ast.expr) -> list[ast.stmt]:
        if isinstance(target, ast.Name):
            return [_assign(target.id, _ctx_call("sel", value, _name(target.id)))]
        if isinstance(target, ast.Subscript):
            return [
                ast.Expr(
                    value=_ctx_call("store", self.expr(target.value), self.index(target.slice), value)
                )
            ]
        if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
            temp = self.owner.fresh("t")
            count = ast.Constant(len(target.elts))
            out: list[ast.stmt] = [_assign(temp, _ctx_call("unpack", value, count))]
            for k, element in enumerate(target.elts):
                item = ast.Subscript(value=_name(temp), slice=ast.Constant(k), ctx=ast.Load())
                out += self.assign(element, item)
            return out
        raise Unsupported(f"line {target.lineno}: assignment to {type(target).__name__}")

    def augmented(self, node: ast.AugAssign) -> list[ast.stmt]:
        target = node.target
        if isinstance(target, ast.Name):
            combined = ast.BinOp(left=_name(target.id), op=node.op, right=self.expr(node.value))
            self.loaded.add(target.id)
            return self.assign(target, combined)
        if isinstance(target, ast.Subscript):
            array, index = self.owner.fresh("a"), self.owner.fresh("i")
            old = _ctx_call("load", _name(array), _name(index))
            combined = ast.BinOp(left=old, op=node.op, right=self.expr(node.value))
            return [
                _assign(array, self.expr(target.value)),
                _assign(index, self.index(target.slice)),
                ast.Expr(value=_ctx_call("store", _name(array), _name(index), combined)),
            ]
        raise Unsupported(f"line {node.lineno}: augmented assignment to this target")

    def branch(self, node: ast.If) -> list[ast.stmt]:
        test, saved = self.owner.fresh("c"), self.owner.fresh("s")
        body = self.block(node.body, None)
        orelse = self.block(node.orelse, None) if node.orelse else [ast.Pass()]
        uniform = ast.If(test=_name(test), body=body, orelse=orelse)
        active = _ctx_call("active")
        masked = [
            _assign(saved, _ctx_call("branch", _name(test))),
            ast.If(test=active, body=copy.deepcopy(body), orelse=[]),
            ast.Expr(value=_ctx_call("orelse", _name(saved), _name(test))),
            ast.If(test=copy.deepcopy(active), body=copy.deepcopy(orelse), orelse=[]),
            ast.Expr(value=_ctx_call("endif", _name(saved))),
        ]
        return [
            _assign(test, self.expr(node.test)),
            ast.If(test=_ctx_call("uniform", _name(test)), body=[uniform], orelse=masked),
        ]

    def loop(
        self, test: ast.expr, prelude: list[ast.stmt] | None, body: list[ast.stmt]
    ) -> list[ast.stmt]:
        frame = self.owner.fresh("L")
        self.loops.append(frame)
        inner = (prelude or []) + self.block(body, ast.Continue())
        self.loops.pop()
        condition = ast.BoolOp(
            op=ast.And(),
            values=[_ctx_call("loop_top", _name(frame)), _ctx_call("loop_test", _name(frame), test)],
        )
        return [
            _assign(frame, _ctx_call("loop_enter")),
            ast.While(test=condition, body=inner, orelse=[]),
            ast.Expr(value=_ctx_call("loop_exit", _name(frame))),
        ]

    def for_range(self, node: ast.For) -> list[ast.stmt]:
        call = node.iter
        is_range = (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "range"
            and "range" not in self.scope
            and not call.keywords
        )
        if not is_range or not isinstance(node.target, ast.Name):
            raise Unsupported(f"line {node.lineno}: for over something other than range()")
        counter = self.owner.fresh("it")
        start = _assign(counter, _ctx_call("range_start", *[self.expr(a) for a in call.args]))
        step = self.assign(node.target, _ctx_call("range_next", _name(counter)))
        test = _ctx_call("range_test", _name(counter))
        return [start] + self.loop(test, step, node.body)

    # -- expressions ---------------------------------------------------------------------
    def expr(self, node: ast.expr) -> ast.expr:
        return ast.copy_location(_Expressions(self).visit(node), node)

    def index(self, node: ast.expr) -> ast.expr:
        return self.expr(node)


class _Expressions(ast.NodeTransformer):
    def __init__(self, body: _Body) -> None:
        self.body = body

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load):
            self.body.loaded.add(node.id)
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        value = typed_constant(node.value)
        if value is node.value:
            return node
        name = self.body.owner.fresh("k")
        self.body.namespace[name] = value
        return ast.copy_location(_name(name), node)

    def visit_Slice(self, node: ast.Slice) -> ast.AST:
        self.generic_visit(node)
        parts = [p if p is not None else ast.Constant(None) for p in (node.lower, node.upper, node.step)]
        return ast.copy_location(ast.Call(func=_name("__pk_slice"), args=parts, keywords=[]), node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        return ast.copy_location(_ctx_call("load", node.value, node.slice), node)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        method = "and_" if isinstance(node.op, ast.And) else "or_"
        result = node.values[-1]
        for value in reversed(node.values[:-1]):
            result = _ctx_call(method, value, _lambda(result))
        return ast.copy_location(result, node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_ctx_call("not_", node.operand), node)
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self.generic_visit(node)
        call = _ctx_call("ifexp", node.test, _lambda(node.body), _lambda(node.orelse))
        return ast.copy_location(call, node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        body = self.body
        rewriter = body.owner._rewriter
        value = rewriter.resolve(node.func, body.scope)
        target = None
        self.generic_visit(node)
        name = rewriter.intrinsic_name(value)
        if name in WAITING_INTRINSICS:
            if node.keywords:
                raise Unsupported(f"line {node.lineno}: cuda.{name} with keyword arguments")
            return ast.copy_location(_ctx_call("wait", ast.Constant(name), *node.args), node)
        helper = rewriter.allocator(value)
        if helper is not None:
            kind = {v: k[0] for k, v in ALLOCATORS.items()}[helper]
            site = rewriter.next_site()
            call = _ctx_call(kind, ast.Constant(site), ast.Constant(target or "array"), *node.args)
            call.keywords = node.keywords
            return ast.copy_location(call, node)
        if is_device_function(value):
            function = body.owner.rewrite(value, device=True)
            alias = body.owner.fresh(f"device_{function.name}_")
            body.namespace[alias] = function.function
            return ast.copy_location(
                ast.Call(func=_name(alias), args=node.args, keywords=node.keywords), node
            )
        return node


def builtin_namespace() -> dict[str, Any]:
    return {"__pk_slice": builtins.slice}
