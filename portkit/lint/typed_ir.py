"""numba's typed IR of a kernel and the device functions it calls, and the small
queries over it that the float64 and int64-index finders share (assignments,
definitions, loops, variable types). Nothing here needs a GPU."""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from portkit import numba_internals
from portkit.backends.ptx import COMPUTE_CAPABILITY

# numba IR: the statements assigning each variable (by its versioned name)
Defs = dict[str, list[Any]]


@dataclass(frozen=True)
class TypedFunction:
    """One function of a kernel's call tree, as numba typed it."""

    name: str
    py_func: Any
    args: tuple  # the numba types it was typed with
    blocks: dict  # label -> IR block (numba's type annotation copy of the IR)
    typemap: dict  # variable name -> numba type
    calltypes: dict  # IR expression/statement -> numba signature


def typed_functions(dispatcher: Any, signature: tuple[Any, ...]) -> list[TypedFunction]:
    """The kernel typed with ``signature``, then every device function it calls
    (transitively), each once per distinct argument types."""
    from numba.core import types

    py_func = getattr(dispatcher, "py_func", dispatcher)
    args = tuple(signature)
    with numba_internals.device_compute_capability(COMPUTE_CAPABILITY):
        cres = numba_internals.compile_typed(py_func, types.void, args, COMPUTE_CAPABILITY)
        kernel = _typed(py_func, args, cres)
        functions = [kernel]
        seen: set = set()
        todo = [kernel]
        while todo:
            fn = todo.pop(0)
            for disp, sig in _device_calls(fn):
                key = (id(disp), tuple(sig.args))
                if key in seen:
                    continue
                seen.add(key)
                callee = _typed_device(disp, sig)
                functions.append(callee)
                todo.append(callee)
    return functions


# --------------------------------------------------------------------------------------
# Typing the call tree


def _typed(py_func: Any, args: tuple[Any, ...], cres: Any) -> TypedFunction:
    ann = cres.type_annotation
    return TypedFunction(
        name=py_func.__name__,
        py_func=py_func,
        args=args,
        blocks=ann.blocks,
        typemap=ann.typemap,
        calltypes=ann.calltypes,
    )


def _typed_device(disp: Any, sig: Any) -> TypedFunction:
    args = tuple(sig.args)
    cres = getattr(disp, "overloads", {}).get(args)
    if cres is None or getattr(cres, "type_annotation", None) is None:
        cres = numba_internals.compile_typed(
            disp.py_func, sig.return_type, args, COMPUTE_CAPABILITY
        )
    return _typed(disp.py_func, args, cres)


def _device_calls(fn: TypedFunction) -> Iterator[tuple[Any, Any]]:
    for _, expr in assignments(fn, ops=("call",)):
        disp = getattr(fn.typemap.get(expr.func.name), "dispatcher", None)
        sig = fn.calltypes.get(expr)
        if disp is not None and hasattr(disp, "py_func") and sig is not None:
            yield disp, sig


# --------------------------------------------------------------------------------------
# IR helpers (numba-cuda 0.30 keeps its own copy of numba's IR classes)


def is_ir(obj: Any, cls: str) -> bool:
    modules = numba_internals.ir_modules()
    return any(isinstance(obj, getattr(m, cls)) for m in modules if hasattr(m, cls))


def assignments(
    fn: TypedFunction, ops: tuple[str, ...] | None = None, labels: Container[int] | None = None
) -> Iterator[tuple[Any, Any]]:
    """(statement, expression) for each ``x = <expr>`` whose op is in ``ops``."""
    for label, block in fn.blocks.items():
        if labels is not None and label not in labels:
            continue
        for stmt in block.body:
            if is_ir(stmt, "Assign") and is_ir(stmt.value, "Expr"):
                if ops is None or stmt.value.op in ops:
                    yield stmt, stmt.value


def definitions(fn: TypedFunction) -> Defs:
    defs: dict[str, list] = {}
    for block in fn.blocks.values():
        for stmt in block.body:
            if is_ir(stmt, "Assign"):
                defs.setdefault(stmt.target.name, []).append(stmt)
    return defs


def loop_blocks(blocks: dict) -> set:
    return numba_internals.loop_body_labels(blocks)


def var_name(var: Any) -> str:
    """A variable's source name: ``m.3`` -> ``m``; temporaries stay as they are."""
    name = getattr(var, "unversioned_name", var.name)
    return re.sub(r"\.\d+$", "", name)


def unliteral(t: Any) -> Any:
    from numba.core import types

    return types.unliteral(t) if t is not None else t


def is_f64(t: Any) -> bool:
    from numba.core import types

    return unliteral(t) == types.float64


def is_int(t: Any) -> bool:
    from numba.core import types

    return isinstance(unliteral(t), types.Integer)


@dataclass(frozen=True)
class RawFinding:
    kind: str
    function: TypedFunction
    loc: Any
    message: str
    fixes: tuple[str, ...]


def unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
