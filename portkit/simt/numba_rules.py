"""numba's compile-time rules that a kernel's source must follow, applied when the
simulator rewrites it, so that what numba would refuse to compile fails at sim time too.

- ``cuda.shared.array`` / ``cuda.local.array``: numba types the shape as an integer
  *literal*: an int literal, a module-level (or closure) Python int, a tuple of those, or
  a local variable assigned once from one. It does not fold arithmetic on names
  (``TY + 2``), and a kernel's argument, a NumPy integer or a float is no shape. The
  dtype is a numba type, a NumPy dtype or type, a dtype name or ``x.dtype``; not a
  Python builtin type (``float``).
- A device function's parameter may be the shape or dtype: numba types the call with
  literal arguments first, so it compiles where every call passes a compile-time
  constant (a literal, a module-level int, a local assigned once from one, or the
  caller's own such parameter); a call passing anything else is refused at the call.
- A global NumPy array is a read-only constant in numba's compiled kernel: a store into
  it does not compile.
- A ufunc takes its output array by position (``np.sin(x, r)``); numba refuses ``out=``.

Each forbidden form is verified against ``numba.cuda.compile_ptx`` in
tests/simt/test_numba_rules.py. Forms this module cannot judge are let through.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from portkit.errors import KernelError
from portkit.results import FailureSite


@dataclass
class FunctionFacts:
    """What the rules need to know about the function being rewritten."""

    name: str
    filename: str
    scope: dict[str, Any]  # globals and closure
    parameters: tuple[str, ...]
    device: bool = False  # a device function: its callers may pass literals
    # local name -> the value of each store to it (None: not a plain ``name = value``)
    definitions: dict[str, list[ast.AST | None]] = field(default_factory=dict)
    # parameter -> ("shape" or "dtype", the allocation it sets: "cuda.shared.array in f
    # at line 41"): every call must pass a compile-time constant for it
    literal_parameters: dict[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        definition: ast.FunctionDef,
        name: str,
        filename: str,
        scope: dict,
        device: bool = False,
    ) -> FunctionFacts:
        parameters = tuple(a.arg for a in definition.args.args)
        facts = cls(name, filename, scope, parameters, device)
        for node in ast.walk(definition):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    facts._store(target, node.value if isinstance(target, ast.Name) else None)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.NamedExpr)):
                facts._store(node.target, None)
        return facts

    def _store(self, target: ast.AST, value: ast.AST | None) -> None:
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.definitions.setdefault(node.id, []).append(value)

    def is_local(self, name: str) -> bool:
        return name in self.parameters or name in self.definitions

    def fail(self, node: ast.AST, message: str) -> KernelError:
        line = getattr(node, "lineno", None)  # statements and expressions have one
        site = FailureSite(self.name, file=self.filename, line=line)
        return KernelError(f"kernel {self.name}, {self.filename}:{line or '?'}: {message}", site)


# -- allocations ---------------------------------------------------------------------------
def _not_literal(node: ast.AST, facts: FunctionFacts, needed: set[str]) -> str | None:
    """Why numba cannot type ``node`` as an integer literal (shape), None if it can or if
    this module cannot tell. A device function's parameters it rests on go in ``needed``:
    it is a literal where the calls pass literals."""
    if isinstance(node, ast.Constant):
        ok = isinstance(node.value, int) and not isinstance(node.value, bool)
        return None if ok else f"{node.value!r} is not an int"
    if isinstance(node, ast.Tuple):
        return next((r for e in node.elts if (r := _not_literal(e, facts, needed))), None)
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        operands = [n for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))]
        if not operands:
            return None  # literals only: Python folds them before numba sees the code
        return f"numba does not fold arithmetic on names ({ast.unparse(node)})"
    if isinstance(node, ast.Name):
        stores = facts.definitions.get(node.id, [])
        if node.id in facts.parameters:
            if not facts.device:
                return f"{node.id} is an argument, known only at launch"
            if stores:
                return f"{node.id} is a parameter assigned in the function"
            needed.add(node.id)
            return None
        if stores:
            if len(stores) > 1:
                return f"{node.id} is assigned more than once in the kernel"
            return None if stores[0] is None else _not_literal(stores[0], facts, needed)
        return _not_literal_value(facts.scope.get(node.id, 0), node.id)
    if isinstance(node, ast.Call):
        return f"numba does not evaluate a call ({ast.unparse(node)}) as a shape"
    if isinstance(node, (ast.Attribute, ast.Subscript)):
        root: ast.expr = node
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        if isinstance(root, ast.Name) and facts.is_local(root.id):
            return f"{ast.unparse(node)} is computed in the kernel"
    return None


def _not_literal_value(value: Any, name: str) -> str | None:
    if isinstance(value, tuple):
        return next((r for v in value if (r := _not_literal_value(v, name))), None)
    if isinstance(value, (bool, np.integer, float, np.floating)):
        return f"{name} is a {type(value).__name__}, not a Python int"
    return None


def _shape_hint(node: ast.AST) -> str:
    return (
        f"define SHAPE = {ast.unparse(node)} at module level and write the array's shape as SHAPE"
    )


def _not_dtype(node: ast.AST, facts: FunctionFacts, needed: set[str]) -> str | None:
    """Why numba refuses ``node`` as an allocation's dtype, None if it takes it or if
    this module cannot tell (a device function's parameter goes in ``needed``)."""
    if not isinstance(node, ast.Name):
        return None
    if node.id in facts.parameters and facts.device and node.id not in facts.definitions:
        needed.add(node.id)
        return None
    if facts.is_local(node.id):
        return None
    value = facts.scope.get(node.id, getattr(builtins, node.id, None))
    if value in (float, int, bool, complex):
        return (
            f"dtype {node.id} is a Python type, which numba refuses; "
            f"write a numba or NumPy type (float32, np.float32) or x.dtype"
        )
    return None


def _shape_refusal(what: str, why: str, shape: ast.AST) -> str:
    return (
        f"{what}'s shape must be a compile-time constant for numba (an int literal, a "
        f"module-level int, or a tuple of those): {why}; {_shape_hint(shape)}"
    )


def check_allocation(call: ast.Call, what: str, facts: FunctionFacts) -> None:
    """Raise KernelError where numba would refuse this ``cuda.shared/local.array`` call;
    note the device function's parameters its calls must pass as constants."""
    arguments = dict(zip(("shape", "dtype"), call.args))
    arguments.update({k.arg: k.value for k in call.keywords if k.arg})
    shape, dtype = arguments.get("shape"), arguments.get("dtype")
    where = f"{what} in {facts.name} at line {call.lineno}"
    needed: set[str] = set()
    if shape is not None and (why := _not_literal(shape, facts, needed)):
        raise facts.fail(call, _shape_refusal(what, why, shape))
    for name in sorted(needed):
        facts.literal_parameters.setdefault(name, ("shape", where))
    needed = set()
    if dtype is not None and (why := _not_dtype(dtype, facts, needed)):
        raise facts.fail(call, f"{what}'s {why}")
    for name in needed:
        facts.literal_parameters.setdefault(name, ("dtype", where))


def check_device_call(
    call: ast.Call,
    callee: str,
    parameters: tuple[str, ...],
    literal_parameters: dict[str, tuple[str, str]],
    facts: FunctionFacts,
) -> None:
    """Raise KernelError where a call passes a device function something numba cannot
    type as a constant for a parameter that sets an allocation's shape or dtype."""
    if any(isinstance(a, ast.Starred) for a in call.args):
        return  # which argument is which is known only at run time
    passed = dict(zip(parameters, call.args))
    passed.update({k.arg: k.value for k in call.keywords if k.arg})
    for name, (kind, where) in literal_parameters.items():
        argument = passed.get(name)  # None: the default, which this module cannot judge
        if argument is None:
            continue
        needed: set[str] = set()
        if kind == "dtype":
            why = _not_dtype(argument, facts, needed)
        else:
            why = _not_literal(argument, facts, needed)
            why = why and f"numba needs a compile-time constant there: {why}"
        if why:
            raise facts.fail(call, f"{callee}'s parameter {name} is the {kind} of {where}; {why}")
        for each in needed:
            facts.literal_parameters.setdefault(each, (kind, where))


# -- stores into captured globals, ufunc keywords -------------------------------------------
def check_store(target: ast.AST, facts: FunctionFacts) -> None:
    """Raise KernelError for a store into a global NumPy array (numba: read-only)."""
    if not isinstance(target, ast.Subscript):
        return
    root: ast.AST = target
    while isinstance(root, (ast.Subscript, ast.Attribute)):
        root = root.value
    if isinstance(root, ast.Name) and not facts.is_local(root.id):
        if isinstance(facts.scope.get(root.id), np.ndarray):
            raise facts.fail(
                target,
                f"writes to {root.id}, a global NumPy array; numba freezes it as a read-only "
                f"constant when it compiles the kernel and refuses the write: pass the "
                f"array as an argument",
            )


def check_ufunc_call(call: ast.Call, value: Any, facts: FunctionFacts) -> None:
    if isinstance(value, np.ufunc) and call.keywords:
        names = ", ".join(f"{k.arg}=" for k in call.keywords)
        raise facts.fail(
            call,
            f"numba refuses keyword arguments ({names}) to np.{value.__name__} in a kernel: "
            f"pass the output array by position, np.{value.__name__}(x, out)",
        )


def captured(value: np.ndarray) -> np.ndarray:
    """A global NumPy array as numba compiles it: its values now, read-only."""
    copy = np.array(value, copy=True)
    copy.flags.writeable = False
    return copy
