"""What translating one function needs to know: its types, the Python names it sees,
its arrays, and the draft's shared needs (helpers, constants, gaps).

A translated expression is a ``CExpr``: its C text and precedence, numba's type of the
Python expression (``ntype``) and the type C gives the text (``ctype``), one per typed
signature. The two differ where C's rules are not numba's (``threadIdx.x`` is unsigned
in C, ``int32 + int64`` is int64 in numba but a literal ``1`` is an int in C); the
translator inserts casts where the difference would change a result.
"""

from __future__ import annotations

import ast
import math
import types as pytypes
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from portkit.port.ctype import Vec
from portkit.port.gaps import Gap, Untranslated
from portkit.port.vartypes import FunctionTypes

# C operator precedence, higher binds tighter.
ATOM, UNARY, MUL, ADD, SHIFT, REL, EQ, BAND, BXOR, BOR, AND, OR, COND = (
    17, 15, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3,
)  # fmt: skip


@dataclass(frozen=True)
class CExpr:
    text: str
    prec: int
    ntype: Vec
    ctype: Vec
    literal: bool = False

    def at(self, prec: int) -> str:
        """The text, parenthesised if it binds looser than ``prec``."""
        return self.text if self.prec >= prec else f"({self.text})"


@dataclass(frozen=True)
class TupleExpr:
    """A tuple-valued expression: its elements, or one call whose fields they are."""

    items: tuple[CExpr, ...] = ()
    call: CExpr | None = None
    fields: tuple[Vec, ...] = ()


@dataclass
class ArrayInfo:
    """An array a function indexes: a pointer parameter (flat, with the C expression
    of each dimension's length past the first) or a shared/local C array."""

    kind: str  # "param", "shared", "local", "dynamic"
    ndim: int
    element: Vec
    dims: list[str | None]


@dataclass
class DraftNeeds:
    """What the draft file must provide beyond the functions."""

    helpers: set[str] = field(default_factory=set)  # "widen", "tuple2", "math_constants"
    constants: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (type, value)
    gaps: list[Gap] = field(default_factory=list)


@dataclass
class FunctionContext:
    types: FunctionTypes
    file: str  # the prototype file's name, for comments and gaps
    globals: dict[str, Any]
    needs: DraftNeeds
    arrays: dict[str, ArrayInfo] = field(default_factory=dict)
    # py_func of a device function -> its FunctionTypes (for calls and return types)
    device: dict[Any, FunctionTypes] = field(default_factory=dict)
    # a parameter's dimension as a C expression: (array, dim or None for the size)
    dimension: Callable[[str, int | None], str | None] = lambda a, d: None
    source_lines: list[str] = field(default_factory=list)
    first_line: int = 1

    @property
    def nspecs(self) -> int:
        return len(self.types.specs)

    def same(self, t: Any) -> Vec:
        return (t,) * self.nspecs

    def type_name(self, vec: Vec) -> str:
        name = self.types.type_name(vec)
        if name is None:
            kinds = ", ".join(sorted(set(map(str, vec))))
            raise Untranslated(f"a value whose type ({kinds}) follows no template parameter")
        return name


def canonical_names() -> dict[int, str]:
    """id of an object a kernel may name -> its canonical dotted name."""
    import builtins

    from numba import cuda

    names: dict[int, str] = {id(cuda): "cuda", id(math): "math"}

    def add(holder: Any, prefix: str) -> None:
        for name in dir(holder):
            value = getattr(holder, name)
            # numbers and strings share ids with a prototype's own constants
            if not name.startswith("_") and not isinstance(value, (int, float, str)):
                names.setdefault(id(value), f"{prefix}.{name}")

    for group in ("atomic", "shared", "local", "const"):
        add(getattr(cuda, group), f"cuda.{group}")
    add(cuda, "cuda")
    add(math, "math")
    for name in ("abs", "min", "max", "int", "float", "bool", "len", "range", "round"):
        names[id(getattr(builtins, name))] = name
    return names


_CANONICAL: dict[int, str] = {}


def resolve(node: ast.AST, ctx: FunctionContext) -> tuple[str | None, Any]:
    """(canonical dotted name or None, the Python object) of a global name or attribute
    chain (``cuda.threadIdx.x``, ``math.exp``, ``float32``); (None, None) otherwise."""
    if not _CANONICAL:
        _CANONICAL.update(canonical_names())
    chain: list[str] = []
    while isinstance(node, ast.Attribute):
        chain.insert(0, node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id in ctx.types.variables:
        return None, None
    if node.id not in ctx.globals:
        import builtins

        if not hasattr(builtins, node.id):
            return None, None
        obj: Any = getattr(builtins, node.id)
    else:
        obj = ctx.globals[node.id]
    name = _CANONICAL.get(id(obj)) or (
        obj.__name__ if isinstance(obj, pytypes.ModuleType) else None
    )
    for attr in chain:
        obj = getattr(obj, attr, None)
        name = _CANONICAL.get(id(obj)) or (f"{name}.{attr}" if name else None)
    return name, obj


class Translator(Protocol):
    """What the call translators (calls.py, intrinsics.py) use of the expression
    translator (expressions.py), which dispatches to them."""

    ctx: FunctionContext

    def __call__(self, node: ast.AST) -> CExpr: ...
    def widen(self, e: CExpr) -> CExpr: ...
    def cast(self, e: CExpr, vec: Vec) -> CExpr: ...
    def element(self, array: str, index: ast.AST) -> str: ...
    def dimension(self, array: str, dim: int | None, node: ast.AST) -> str: ...
    def call_float(self, name: str, args: list[CExpr], result: Vec) -> CExpr: ...
