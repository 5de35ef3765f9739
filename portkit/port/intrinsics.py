"""numba.cuda's names in C: thread and block indices, ``cuda.grid``, barriers, warp
shuffles and votes, atomics, and calls of the op's device functions."""

from __future__ import annotations

import ast
from typing import Any

from portkit.port.context import ADD, ATOM, CExpr, Translator, TupleExpr, Untranslated
from portkit.port.ctype import c_name, is_array, is_float, unliteral
from portkit.port.spelling import c_identifier
from portkit.port.vartypes import FunctionTypes

_INDEX = ("threadIdx", "blockIdx", "blockDim", "gridDim")
_SYNC = {
    "cuda.syncthreads": ("__syncthreads", None),
    "cuda.syncthreads_count": ("__syncthreads_count", "int32"),
    "cuda.syncthreads_and": ("__syncthreads_and", "int32"),
    "cuda.syncthreads_or": ("__syncthreads_or", "int32"),
    "cuda.syncwarp": ("__syncwarp", None),
    "cuda.threadfence": ("__threadfence", None),
    "cuda.threadfence_block": ("__threadfence_block", None),
    "cuda.threadfence_system": ("__threadfence_system", None),
    "cuda.activemask": ("__activemask", "uint32"),
    "cuda.all_sync": ("__all_sync", "int32"),
    "cuda.any_sync": ("__any_sync", "int32"),
    "cuda.eq_sync": ("__uni_sync", "int32"),
    "cuda.ballot_sync": ("__ballot_sync", "uint32"),
    "cuda.match_any_sync": ("__match_any_sync", "uint32"),
}
_SHUFFLES = {
    "cuda.shfl_sync": "__shfl_sync",
    "cuda.shfl_up_sync": "__shfl_up_sync",
    "cuda.shfl_down_sync": "__shfl_down_sync",
    "cuda.shfl_xor_sync": "__shfl_xor_sync",
}
_ATOMICS = {
    "add": "atomicAdd", "sub": "atomicSub", "max": "atomicMax", "min": "atomicMin",
    "exch": "atomicExch", "and_": "atomicAnd", "or_": "atomicOr", "xor": "atomicXor",
    "inc": "atomicInc", "dec": "atomicDec", "cas": "atomicCAS", "compare_and_swap": "atomicCAS",
}  # fmt: skip


def _t(name: str) -> Any:
    from numba.core import types

    return getattr(types, name)


def attribute(ex: Translator, name: str, node: ast.AST) -> CExpr:
    parts = name.split(".")
    if len(parts) == 3 and parts[1] in _INDEX and parts[2] in "xyz":
        # numba types them int32; C's are unsigned
        return CExpr(
            f"{parts[1]}.{parts[2]}", ATOM, ex.ctx.same(_t("int32")), ex.ctx.same(_t("uint32"))
        )
    if name == "cuda.warpsize":
        t = ex.ctx.same(_t("int32"))
        return CExpr("warpSize", ATOM, t, t)
    raise Untranslated(name, node)


def grid_items(ex: Translator, dims: int, size: bool) -> list[CExpr]:
    t = ex.ctx.same(_t("int64"))
    items = []
    for axis in "xyz"[:dims]:
        if size:
            text = f"(long long)gridDim.{axis} * blockDim.{axis}"
        else:
            text = f"(long long)blockIdx.{axis} * blockDim.{axis} + threadIdx.{axis}"
        items.append(CExpr(text, ADD, t, t))
    return items


def call(ex: Translator, name: str, node: ast.Call) -> CExpr | TupleExpr:
    if name in ("cuda.grid", "cuda.gridsize"):
        first = node.args[0] if len(node.args) == 1 else None
        count = first.value if isinstance(first, ast.Constant) else None
        if not isinstance(count, int):
            raise Untranslated(f"{name} without a constant dimension count", node)
        items = grid_items(ex, count, name == "cuda.gridsize")
        return items[0] if len(items) == 1 else TupleExpr(tuple(items))
    args = [ex(a) for a in node.args] if name not in _ATOMIC_PREFIXES else []
    kwargs = {k.arg: ex(k.value) for k in node.keywords} if name not in _ATOMIC_PREFIXES else {}
    if name in _SYNC:
        spelled, result = _SYNC[name]
        values = [a.text for a in args] + [kwargs[k].text for k in kwargs]
        t = ex.ctx.same(_t(result or "none"))
        return CExpr(f"{spelled}({', '.join(values)})", ATOM, t, t)
    if name in _SHUFFLES:
        value = args[1]
        rest = [a.text for a in args[2:]] + [kwargs[k].text for k in kwargs]
        text = f"{_SHUFFLES[name]}({args[0].text}, {value.text}, {', '.join(rest)})"
        return CExpr(text, ATOM, value.ntype, value.ctype)
    if name.startswith("cuda.atomic."):
        return atomic(ex, name.rsplit(".", 1)[1], node)
    if name == "cuda.fma":
        return ex.call_float("fma", args, args[0].ntype)
    raise Untranslated(f"call of {name}", node)


_ATOMIC_PREFIXES = tuple(f"cuda.atomic.{n}" for n in _ATOMICS) + ("cuda.atomic.nanmax",)


def atomic(ex: Translator, op: str, node: ast.Call) -> CExpr:
    """``cuda.atomic.add(arr, idx, val)`` -> ``atomicAdd(&arr[idx], val)``; its value is
    the old element, as numba's."""
    from numba.core import types

    if op not in _ATOMICS or len(node.args) < 3 or node.keywords:
        raise Untranslated(f"cuda.atomic.{op}", node)
    array = node.args[0]
    if not (isinstance(array, ast.Name) and array.id in ex.ctx.arrays):
        raise Untranslated(f"cuda.atomic.{op} on {ast.unparse(array)}", node)
    info = ex.ctx.arrays[array.id]
    element = tuple(unliteral(t) for t in info.element)
    if op in ("max", "min") and any(is_float(t) for t in element):
        raise Untranslated(f"cuda.atomic.{op} on a float array (CUDA has no float atomicMax)")
    if len(set(element)) != 1:
        raise Untranslated(f"cuda.atomic.{op} on an array whose type follows the launch")
    address = f"&{ex.element(array.id, node.args[1])}"
    values = [ex.cast(ex(v), element) for v in node.args[2:]]
    spelled = _ATOMICS[op]
    if op == "sub" and is_float(element[0]):
        spelled, values = "atomicAdd", [CExpr(f"-{values[0].at(15)}", 15, element, element)]
    if element[0] == types.int64:  # CUDA's 64-bit atomics take unsigned long long
        address = f"(unsigned long long*){address}"
        texts = [f"(unsigned long long){v.at(15)}" for v in values]
        text = f"(long long){spelled}({address}, {', '.join(texts)})"
        return CExpr(text, 15, element, element)
    if c_name(element[0]) is None:
        raise Untranslated(f"cuda.atomic.{op} on {element[0]}", node)
    text = f"{spelled}({address}, {', '.join(v.text for v in values)})"
    return CExpr(text, ATOM, element, element)


def passed_array(ex: Translator, array: str, node: ast.AST) -> str:
    """An array argument of a device function: a flat pointer (``&ta[0][0]`` for a
    shared or local C array), then each length past the first, which C's pointer
    loses (the callee's ``ta_dim1``)."""
    info = ex.ctx.arrays[array]
    pointer = c_identifier(array)
    if info.kind != "param" and info.ndim > 1:
        pointer = f"&{pointer}{'[0]' * info.ndim}"
    lengths = [ex.dimension(array, d, node) for d in range(1, info.ndim)]
    return ", ".join([pointer, *lengths])


def device_call(ex: Translator, callee: FunctionTypes, node: ast.Call) -> CExpr | TupleExpr:
    """A call of a ``device=True`` function: each argument converted to the type the
    callee was typed with for it, so C++ deduces the same template arguments."""
    from numba.core import types

    if node.keywords:
        raise Untranslated(f"keyword arguments to {callee.name}", node)
    texts: list[CExpr | str] = []  # str: an array, passed as a pointer and its lengths
    arg_types = []
    for arg in node.args:
        if isinstance(arg, ast.Name) and arg.id in ex.ctx.arrays:
            texts.append(passed_array(ex, arg.id, node))
            arg_types.append(tuple(ex.ctx.types.variables[arg.id]))
            continue
        translated = ex(arg)
        texts.append(translated)
        arg_types.append(translated.ntype)
    by_args = {tuple(unliteral(t) if not is_array(t) else t for t in s.args): i
               for i, s in enumerate(callee.specs)}  # fmt: skip
    chosen = []
    for spec in range(ex.ctx.nspecs):
        key = tuple(unliteral(a[spec]) if not is_array(a[spec]) else a[spec] for a in arg_types)
        if key not in by_args:
            raise Untranslated(f"call of {callee.name} with types numba did not type", node)
        chosen.append(by_args[key])
    values = []
    for k, e in enumerate(texts):
        if isinstance(e, str):
            values.append(e)
            continue
        wanted = tuple(unliteral(callee.specs[j].args[k]) for j in chosen)
        values.append(ex.cast(e, wanted).text if e.ctype != wanted else e.text)
    returns = tuple(callee.returns[j] for j in chosen)
    text = f"{callee.name}({', '.join(values)})"
    if isinstance(returns[0], types.BaseTuple):
        fields = tuple(tuple(r.types[i] for r in returns) for i in range(len(returns[0])))
        t = ex.ctx.same(types.none)
        return TupleExpr(call=CExpr(text, ATOM, t, t), fields=fields)
    returns = tuple(unliteral(r) for r in returns)
    return CExpr(text, ATOM, returns, returns)
