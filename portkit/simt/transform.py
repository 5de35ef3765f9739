"""Rewrite a ``numba.cuda.jit`` function's source into the simulator's Python.

The kernel is not edited by hand and not copied: its source is parsed and rewritten,
keeping file and line numbers, so that tracebacks, pdb and error messages point at
the user's own lines. The rewrite does four things:

- a call that makes lanes wait for each other (``cuda.syncthreads()``, ``shfl_*_sync``,
  ``ballot_sync``, ``syncwarp``...) becomes ``yield (name, *args)``: each CUDA thread is
  a generator, and the machine resumes it once every thread the call waits for arrived;
- a call to a ``device=True`` function calls its rewritten copy (through ``yield from``
  when that copy waits too);
- ``cuda.shared.array``, ``cuda.local.array`` and ``cuda.const.array_like`` learn their
  call site and the variable they are assigned to (one shared array per site per block,
  named in error messages);
- number literals become int64 / float64 constants, as numba types them.

Which call is which is decided by resolving the called name against the function's
globals and closure, so ``cuda.syncthreads``, ``numba.cuda.syncthreads`` and a bare
``syncthreads`` imported from numba.cuda are all recognised.
"""

from __future__ import annotations

import ast
import copy
import math
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import portkit.simt.array_methods  # noqa: F401  (installs reshape/view/real/imag on SimArray)
from portkit.errors import KernelError
from portkit.simt.fp16 import simulated_fp16
from portkit.simt.intrinsics import WAITING_INTRINSICS
from portkit.simt.libdevice import is_libdevice_module, simulated_libdevice
from portkit.simt.literal_index import WRAP, wrap_index
from portkit.simt.mlir_names import as_numba_names
from portkit.simt.module_proxy import _is_namespace, _ModuleProxy
from portkit.simt.numba_forms import (
    bool_literal,
    is_bool,
    is_bool_call,
    is_called_kernel,
    power_call,
    without_alignment,
)
from portkit.simt.numba_rules import (
    FunctionFacts,
    captured,
    check_allocation,
    check_device_call,
    check_store,
    check_ufunc_call,
)
from portkit.simt.recursion import Recursion
from portkit.simt.scalars import (
    TYPED_BUILTINS,
    NumberCast,
    as_dtype,
    simulated_bf16,
    typed_constant,
)
from portkit.simt.source import own_nodes, parsed_definition, source_lines
from portkit.simt.typed_math import TYPED_MATH
from portkit.simt.vector_types import simulated_vector_type
from portkit.simt.xoroshiro import simulated_random

GRID_SYNC = "grid_sync"  # the request a grid group's sync() becomes


def _is_group_sync(node: ast.Call) -> bool:
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "sync"
        and not node.args
        and not node.keywords
    )


ALLOCATORS = {
    ("shared", "array"): "__pk_shared",
    ("local", "array"): "__pk_local",
    ("const", "array_like"): "__pk_const",
}
ALLOCATION_RULES = {"__pk_shared": "cuda.shared.array", "__pk_local": "cuda.local.array"}


@dataclass
class SimulatedFunction:
    """A rewritten kernel or device function."""

    name: str
    function: Callable[..., Any]
    waits: bool  # a generator: it yields at barriers and warp operations
    parameters: tuple[str, ...]
    filename: str
    grid_syncs: bool = False  # it (or a device function it calls) waits at a grid barrier
    # parameters that set an allocation's shape or dtype: calls must pass constants
    literal_parameters: dict[str, tuple[str, str]] = field(default_factory=dict)


def is_device_function(value: Any) -> bool:
    """A ``cuda.jit(device=True)`` function, or a ``numba.jit`` one a kernel calls (numba
    compiles those for the GPU too); not numba.cuda.random's, which the simulator has."""
    options = getattr(value, "targetoptions", None)
    if not (hasattr(value, "py_func") and isinstance(options, dict)):
        return False
    if options.get("device"):
        return True
    return type(value).__name__ == "CPUDispatcher" and simulated_random(value) is None


def _callable(value: Any) -> bool:
    return is_device_function(value) or is_called_kernel(value)


def _intrinsic_names() -> dict[int, str]:
    from numba import cuda

    table: dict[int, str] = {}
    for name in dir(cuda):
        value = getattr(cuda, name)
        # Some intrinsics are classes in numba-cuda (cuda.syncwarp): keep those we rewrite.
        if name in WAITING_INTRINSICS or not isinstance(
            value, (types.ModuleType, type, int, float, str)
        ):
            table.setdefault(id(value), name)
    return table


def visible_names(fn: Any) -> dict[str, Any]:
    """What a kernel's source can name: its module's globals and its closure's cells
    (numba-cuda-mlir's ``cuda`` names as numba-cuda's: ``mlir_names``)."""
    scope = dict(fn.__globals__)
    if fn.__closure__:
        scope.update(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__)))
    return as_numba_names(scope)


class Rewriter:
    """Rewrites the functions one simulator uses; each is rewritten once."""

    def __init__(
        self,
        simulated_cuda: Any,
        print_function: Callable[..., None],
        helpers: dict[str, Callable[..., Any]],
    ) -> None:
        from numba import cuda

        self._cuda = simulated_cuda
        self._print = print_function
        self._helpers = helpers
        self.files: set[str] = set()  # source files of rewritten functions
        self._done: dict[int, SimulatedFunction] = {}
        self._recursion = Recursion()
        self._numba_cuda = cuda
        self._intrinsics = _intrinsic_names()
        self._sites = 0
        self._constants = 0
        self._proxies: dict[int, Any] = {}
        self._captured: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def rewrite(self, dispatcher: Any) -> SimulatedFunction:
        key = id(dispatcher)
        if key not in self._done:
            stand_in = self._recursion.calling(dispatcher)
            if stand_in is not None:  # a recursive call (numba compiles recursion)
                (call, parameters), fn = stand_in, dispatcher.py_func
                filename = fn.__code__.co_filename
                return SimulatedFunction(fn.__name__, call, False, parameters, filename)
            with self._recursion.rewriting(dispatcher) as finish:
                done = self._rewrite(dispatcher)
            finish(done.function, done.waits)
            self._done[key] = done
        return self._done[key]

    # -- one function ------------------------------------------------------------------
    def _rewrite(self, dispatcher: Any) -> SimulatedFunction:
        fn = dispatcher.py_func
        filename = fn.__code__.co_filename
        try:
            lines, first = source_lines(fn)
        except (OSError, TypeError) as exc:
            raise KernelError(
                f"the simulator needs the source of {fn.__name__} and cannot read it: {exc}"
            ) from None
        tree = parsed_definition(fn, lines, first)
        definition = tree.body[0]
        if not isinstance(definition, ast.FunctionDef):
            raise KernelError(f"{fn.__name__}: the simulator can only run plain def functions")
        definition.decorator_list = []

        scope = visible_names(fn)
        namespace = dict(fn.__globals__, **{WRAP: wrap_index})
        namespace.update(self._helpers)
        facts = FunctionFacts.of(
            copy.deepcopy(definition), fn.__name__, filename, scope, _callable(dispatcher)
        )
        visitor = _Visitor(self, scope, namespace, facts)
        definition = visitor.visit(definition)
        ast.fix_missing_locations(tree)
        for name in visitor.loaded_names:
            if name in scope:
                namespace[name] = self.simulated_value(scope[name])
            elif name in TYPED_BUILTINS:
                namespace[name] = TYPED_BUILTINS[name]
            elif name == "print":
                namespace[name] = self._print
        code = compile(tree, filename, "exec")
        exec(code, namespace)  # defines the rewritten function in its private namespace
        function = namespace[definition.name]
        function.__defaults__ = tuple(self.simulated_value(d) for d in fn.__defaults__ or ())
        waits = any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in own_nodes(definition))
        parameters = tuple(a.arg for a in definition.args.args)
        self.files.add(filename)
        return SimulatedFunction(
            fn.__name__,
            function,
            waits,
            parameters,
            filename,
            visitor.grid_syncs,
            facts.literal_parameters,
        )

    # -- values a kernel's names refer to ----------------------------------------------
    def simulated_value(self, value: Any) -> Any:
        """What a global or closure value of a kernel is in the simulator."""
        import numba
        from numba.core import types as numba_types

        if value is self._numba_cuda:
            return self._cuda
        if value is math:
            return TYPED_MATH
        if value is numba or value is numba_types:
            return self._proxy(value)
        half = simulated_bf16(value) or simulated_fp16(value)  # numba.cuda.bf16 and fp16
        if half is not None:
            return half
        vector = simulated_vector_type(value)  # cuda.float32x4 imported by name
        if vector is not None:
            return vector
        draws = simulated_random(value)  # numba.cuda.random's device functions
        if draws is not None:
            return draws
        if is_libdevice_module(value):
            return self._proxy(value)
        libdevice = simulated_libdevice(value)  # numba.cuda.libdevice's stubs
        if libdevice is not None:
            return libdevice
        if isinstance(value, (numba_types.Number, numba_types.Boolean)):
            return NumberCast(as_dtype(value), str(value))
        if isinstance(value, (bool, int, float)):
            return typed_constant(value)
        if callable(value) and getattr(math, name := getattr(value, "__name__", ""), None) is value:
            return getattr(TYPED_MATH, name)
        if _callable(value):
            return self.rewrite(value).function
        if isinstance(value, np.ndarray):
            return self.captured(value)
        name = self._intrinsics.get(id(value)) if not isinstance(value, types.ModuleType) else None
        if name is not None:
            return getattr(self._cuda, name)
        return value

    def captured(self, array: np.ndarray) -> np.ndarray:
        """A global NumPy array as the kernels see it: frozen when first compiled, as numba
        freezes it (a later change on the host is not seen)."""
        if id(array) not in self._captured:
            self._captured[id(array)] = (array, captured(array))  # keeps the id alive
        return self._captured[id(array)][1]

    def _proxy(self, module: types.ModuleType) -> Any:
        if id(module) not in self._proxies:
            self._proxies[id(module)] = _ModuleProxy(module, self.simulated_value)
        return self._proxies[id(module)]

    def resolve(self, node: ast.AST, scope: dict[str, Any]) -> Any:
        """The object a dotted name (``cuda.shared.array``) refers to, or None."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in scope:
            return None
        value = scope[node.id]
        for part in reversed(parts):
            if not isinstance(value, (types.ModuleType, type)) and not _is_namespace(value):
                return None
            value = getattr(value, part, None)
        return value

    def intrinsic_name(self, value: Any) -> str | None:
        if value is None or isinstance(value, types.ModuleType):
            return None
        return self._intrinsics.get(id(value))

    def allocator(self, value: Any) -> str | None:
        cuda = self._numba_cuda
        for (space, method), helper in ALLOCATORS.items():
            if value is getattr(getattr(cuda, space), method, None):
                return helper
        return None

    def next_site(self) -> int:
        self._sites += 1
        return self._sites

    def next_constant(self) -> str:
        self._constants += 1
        return f"__pk_k{self._constants}"


class _Visitor(ast.NodeTransformer):
    def __init__(
        self, rewriter: Rewriter, scope: dict[str, Any], namespace: dict, facts: FunctionFacts
    ) -> None:
        self.rewriter = rewriter
        self.facts = facts
        self.scope = scope
        self.namespace = namespace
        self.loaded_names: set[str] = set()
        self._target: str | None = None  # variable an allocation is assigned to
        self.grid_syncs = False

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load):
            self.loaded_names.add(node.id)
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        value = typed_constant(node.value)
        if value is node.value:
            return node
        name = self.rewriter.next_constant()
        self.namespace[name] = value
        return ast.copy_location(ast.Name(id=name, ctx=ast.Load()), node)

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        return power_call(node, self.namespace)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        literal = bool_literal(node)  # before the literal becomes a typed constant's name
        self.generic_visit(node)
        return is_bool_call(node, literal, self.namespace, "__pk_is_bool", is_bool)

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        for each in node.targets:
            check_store(each, self.facts)
        target = node.targets[0] if len(node.targets) == 1 else None
        self._target = target.id if isinstance(target, ast.Name) else None
        self.generic_visit(node)
        self._target = None
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        check_store(node.target, self.facts)
        self.generic_visit(node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        rewriter = self.rewriter
        value = rewriter.resolve(node.func, self.scope)
        check_ufunc_call(node, value, self.facts)
        helper = rewriter.allocator(value)
        if helper is not None:
            node.keywords = without_alignment(node)
        if helper in ALLOCATION_RULES:
            check_allocation(node, ALLOCATION_RULES[helper], self.facts)
        if _callable(value):  # before the literals below become names
            callee = rewriter.rewrite(value)
            check_device_call(
                node, callee.name, callee.parameters, callee.literal_parameters, self.facts
            )
        target, self._target = self._target, None
        self.generic_visit(node)
        name = rewriter.intrinsic_name(value)
        if name in WAITING_INTRINSICS:
            if node.keywords:
                raise KernelError(
                    f"line {node.lineno}: pass cuda.{name}'s arguments by position in the simulator"
                )
            request = ast.Tuple(elts=[ast.Constant(name), *node.args], ctx=ast.Load())
            return ast.copy_location(ast.Yield(value=request), node)
        if _is_group_sync(node):  # cuda.cg.this_grid().sync(): the only .sync() numba has
            self.grid_syncs = True
            request = ast.Tuple(elts=[ast.Constant(GRID_SYNC)], ctx=ast.Load())
            return ast.copy_location(ast.Yield(value=request), node)
        if helper is not None:
            site = [ast.Constant(rewriter.next_site()), ast.Constant(target or "array")]
            call = ast.Call(
                func=ast.Name(id=helper, ctx=ast.Load()),
                args=site + node.args,
                keywords=node.keywords,
            )
            return ast.copy_location(call, node)
        if _callable(value):
            simulated = rewriter.rewrite(value)
            alias = f"__pk_device_{simulated.name}_{id(value)}"
            self.namespace[alias] = simulated.function
            call = ast.Call(
                func=ast.Name(id=alias, ctx=ast.Load()), args=node.args, keywords=node.keywords
            )
            self.grid_syncs |= simulated.grid_syncs
            if simulated.waits:
                return ast.copy_location(ast.YieldFrom(value=call), node)
            return ast.copy_location(call, node)
        return node
