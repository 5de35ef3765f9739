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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from portkit.simt.fp16 import simulated_fp16
from portkit.simt.libdevice import is_libdevice, is_libdevice_module
from portkit.simt.literal_index import WRAP, wrap_index
from portkit.simt.lockstep.bfloat16 import LaneCast, simulated_lane_bf16
from portkit.simt.lockstep.expressions import Expressions, Unsupported
from portkit.simt.lockstep.syntax import assign_to, ctx_call, has_node, name_node
from portkit.simt.lockstep.unwritten import unwritten_parameters
from portkit.simt.scalars import as_dtype, typed_constant
from portkit.simt.source import parsed_definition
from portkit.simt.transform import (
    WAITING_INTRINSICS,
    _ModuleProxy,
    is_device_function,
    visible_names,
)
from portkit.simt.xoroshiro import simulated_random

UNUSED_ATOMICS = "__pk_atomic_unused"  # cuda.atomic for statements that drop the old value

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


@dataclass
class VectorFunction:
    name: str
    function: Callable[..., Any]
    parameters: tuple[str, ...]
    # Parameters only read element by element, with their subscripts' index counts
    # (unwritten.py): unwritten in a launch where each count is the array's dimensions.
    unwritten: dict[str, frozenset[int]] = field(default_factory=dict)


class Vectorizer:
    """Rewrites kernels and the device functions they call, each once."""

    def __init__(self, rewriter: Any, ctx: Any, helpers: dict[str, Any]) -> None:
        self._rewriter = rewriter  # the per-thread Rewriter: name resolution, files
        self._ctx = ctx
        self._helpers = helpers  # vector builtins, math, cuda
        self._done: dict[int, VectorFunction] = {}
        self._count = 0
        self._namespaces: list[dict[str, Any]] = []  # of every rewritten function

    def bind(self, ctx: Any) -> None:
        """Make ``ctx`` (the chunk running now, or the engine's proxy between chunks) what
        every rewritten function calls ``__pk_ctx``: the chunk itself spares each call of
        the rewritten code the proxy's lookup."""
        for namespace in self._namespaces:
            namespace["__pk_ctx"] = ctx

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
        tree = parsed_definition(fn, *inspect.getsourcelines(fn))
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
        scope = visible_names(fn)
        namespace = dict(fn.__globals__, **{WRAP: wrap_index})
        namespace.update(self._helpers)
        parameters = tuple(a.arg for a in definition.args.args)
        unwritten = unwritten_parameters(definition, parameters, scope)
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
        self._namespaces.append(namespace)
        function = namespace[definition.name]
        function.__defaults__ = tuple(self.vector_value(d) for d in fn.__defaults__ or ())
        return VectorFunction(fn.__name__, function, parameters, unwritten)

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
        bf16 = simulated_lane_bf16(self._helpers["__pk_cuda"].bf16, value)
        if bf16 is not None:  # numba.cuda.bf16, its functions, its bfloat16 type
            return bf16
        if isinstance(value, numba_types.Number):
            return LaneCast(as_dtype(value), str(value))
        if isinstance(value, (bool, int, float)):
            return typed_constant(value)
        if callable(value) and getattr(math, name := getattr(value, "__name__", ""), None) is value:
            return getattr(self._helpers["__pk_math"], name)
        if is_libdevice(value) or is_libdevice_module(value):
            raise Unsupported("numba.cuda.libdevice functions run per thread")
        draws = simulated_random(value, lanes=True)
        if draws is not None:
            return draws
        half = simulated_fp16(value)
        if half is not None:
            return half
        if is_device_function(value):
            return self.rewrite(value, device=True).function
        if isinstance(value, np.ndarray):
            return self._rewriter.captured(value)  # the per-thread engine's frozen copy
        name = self._rewriter.intrinsic_name(value)
        if name is not None:
            if name in WAITING_INTRINSICS:
                raise Unsupported(f"cuda.{name} reached through an alias")
            return getattr(self._helpers["__pk_cuda"], name)
        return value


class _Body:
    """Statements and expressions of one function, rewritten for lanes."""

    def __init__(self, owner: Vectorizer, scope: dict, namespace: dict, device: bool) -> None:
        self.owner = owner
        self.scope = scope
        self.namespace = namespace
        self.device = device
        self.loaded: set[str] = set()
        self.loops: list[str] = []  # names of the enclosing loops' frames
        self.last_loop: ast.stmt | None = None  # a loop that is the kernel's last statement

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
            assign_to("__pk_F", ctx_call("enter")),
            assign_to("__pk_rv", name_node("__pk_U")),
        ]
        prologue += [assign_to(name, name_node("__pk_U")) for name in assigned]
        leave = ast.Return(value=ctx_call("leave", name_node("__pk_F"), name_node("__pk_rv")))
        if not self.device and isinstance(definition.body[-1], (ast.While, ast.For)):
            self.last_loop = definition.body[-1]
        body = self.block(definition.body, escape=leave)
        return [ast.copy_location(s, definition) for s in prologue] + body + [leave]

    # -- statements ----------------------------------------------------------------------
    def block(self, statements: list[ast.stmt], escape: ast.stmt | None) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for statement in statements:
            out += [ast.copy_location(s, statement) for s in self.statement(statement)]
            exits = (ast.Return,) + ((ast.Break, ast.Continue) if self.loops else ())
            if escape is not None and has_node(statement, exits, into_loops=False):
                check = ast.If(
                    test=ast.UnaryOp(op=ast.Not(), operand=ctx_call("active")),
                    body=[copy.deepcopy(escape)],
                    orelse=[],
                )
                out.append(ast.copy_location(check, statement))
            if escape is not None and has_node(statement, (ast.Return,)) and self.loops:
                pass  # a return inside a loop leaves the lanes dead; the loop test sees it
        return out or [ast.Pass()]

    def statement(self, node: ast.stmt) -> list[ast.stmt]:
        if isinstance(node, ast.Expr):
            if isinstance(node.value, ast.Constant):
                return []  # a docstring
            call = node.value
            value = self.expr(call)
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and self.unused_atomic(call)
                and isinstance(value, ast.Call)
            ):
                # Its old value is dropped: the atomic may run unordered (unordered.py).
                value.func = ast.Attribute(
                    value=name_node(UNUSED_ATOMICS), attr=call.func.attr, ctx=ast.Load()
                )
            return [ast.Expr(value=value)]
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
            # The test rewritten too: a subscript, ``and``/``or`` per lane.
            return self.loop(self.expr(node.test), None, node.body, node is self.last_loop)
        if isinstance(node, ast.For):
            return self.for_range(node)
        if isinstance(node, ast.Return):
            value = self.expr(node.value) if node.value is not None else ast.Constant(None)
            return [assign_to("__pk_rv", ctx_call("ret", name_node("__pk_rv"), value))]
        if isinstance(node, ast.Break):
            return [ast.Expr(value=ctx_call("brk", name_node(self.loops[-1])))]
        if isinstance(node, ast.Continue):
            return [ast.Expr(value=ctx_call("cont", name_node(self.loops[-1])))]
        raise Unsupported(f"line {node.lineno}: {type(node).__name__} is not vectorised")

    def unused_atomic(self, node: ast.expr) -> bool:
        """Whether ``node`` is a call of ``cuda.atomic.<op>`` (a statement: its value is
        dropped)."""
        from numba import cuda

        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            return False
        value = self.owner._rewriter.resolve(node.func, self.scope)
        atomic = getattr(cuda.atomic, node.func.attr, None)
        return atomic is not None and value is atomic

    def assign(self, target: ast.expr, value: ast.expr) -> list[ast.stmt]:
        if isinstance(target, ast.Name):
            return [assign_to(target.id, ctx_call("sel", value, name_node(target.id)))]
        if isinstance(target, ast.Subscript):
            return [
                ast.Expr(
                    value=ctx_call(
                        "store", self.expr(target.value), self.index(target.slice), value
                    )
                )
            ]
        if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
            temp = self.owner.fresh("t")
            count = ast.Constant(len(target.elts))
            out: list[ast.stmt] = [assign_to(temp, ctx_call("unpack", value, count))]
            for k, element in enumerate(target.elts):
                item = ast.Subscript(value=name_node(temp), slice=ast.Constant(k), ctx=ast.Load())
                out += self.assign(element, item)
            return out
        raise Unsupported(f"line {target.lineno}: assignment to {type(target).__name__}")

    def augmented(self, node: ast.AugAssign) -> list[ast.stmt]:
        target = node.target
        if isinstance(target, ast.Name):
            combined = ast.BinOp(left=name_node(target.id), op=node.op, right=self.expr(node.value))
            self.loaded.add(target.id)
            return self.assign(target, combined)
        if isinstance(target, ast.Subscript):
            array, index = self.owner.fresh("a"), self.owner.fresh("i")
            old = ctx_call("load", name_node(array), name_node(index))
            combined = ast.BinOp(left=old, op=node.op, right=self.expr(node.value))
            return [
                assign_to(array, self.expr(target.value)),
                assign_to(index, self.index(target.slice)),
                ast.Expr(value=ctx_call("store", name_node(array), name_node(index), combined)),
            ]
        raise Unsupported(f"line {node.lineno}: augmented assignment to this target")

    def branch(self, node: ast.If) -> list[ast.stmt]:
        test, saved = self.owner.fresh("c"), self.owner.fresh("s")
        body = self.block(node.body, None)
        orelse: list[ast.stmt] = self.block(node.orelse, None) if node.orelse else [ast.Pass()]
        uniform = ast.If(test=name_node(test), body=body, orelse=orelse)
        active = ctx_call("active")
        masked = [
            assign_to(saved, ctx_call("branch", name_node(test))),
            ast.If(test=active, body=copy.deepcopy(body), orelse=[]),
            ast.Expr(value=ctx_call("orelse", name_node(saved), name_node(test))),
            ast.If(test=copy.deepcopy(active), body=copy.deepcopy(orelse), orelse=[]),
            ast.Expr(value=ctx_call("endif", name_node(saved))),
        ]
        return [
            assign_to(test, self.expr(node.test)),
            ast.If(test=ctx_call("uniform", name_node(test)), body=[uniform], orelse=masked),
        ]

    def loop(
        self,
        test: ast.expr,
        prelude: list[ast.stmt] | None,
        body: list[ast.stmt],
        last: bool = False,
    ) -> list[ast.stmt]:
        frame = self.owner.fresh("L")
        self.loops.append(frame)
        inner = (prelude or []) + self.block(body, ast.Continue())
        self.loops.pop()
        condition = ast.BoolOp(
            op=ast.And(),
            values=[
                ctx_call("loop_top", name_node(frame)),
                ctx_call("loop_test", name_node(frame), test),
            ],
        )
        return [
            assign_to(frame, ctx_call("loop_enter", *([ast.Constant(True)] if last else []))),
            ast.While(test=condition, body=inner, orelse=[]),
            ast.Expr(value=ctx_call("loop_exit", name_node(frame))),
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
        if not is_range or not isinstance(call, ast.Call) or not isinstance(node.target, ast.Name):
            raise Unsupported(f"line {node.lineno}: for over something other than range()")
        counter = self.owner.fresh("it")
        start = assign_to(counter, ctx_call("range_start", *[self.expr(a) for a in call.args]))
        step = self.assign(node.target, ctx_call("range_next", name_node(counter)))
        test = ctx_call("range_test", name_node(counter))
        return [start] + self.loop(test, step, node.body, node is self.last_loop)

    # -- expressions ---------------------------------------------------------------------
    def expr(self, node: ast.expr) -> ast.expr:
        return ast.copy_location(Expressions(self).visit(node), node)

    def index(self, node: ast.expr) -> ast.expr:
        return self.expr(node)


def builtin_namespace() -> dict[str, Any]:
    return {"__pk_slice": builtins.slice}
