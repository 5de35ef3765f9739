"""Static findings from numba's typed IR for one ``cuda.jit`` kernel and signature.

The kernel is typed (and lowered, but never compiled to PTX) for sm_90 with
``numba.cuda.compiler.compile_cuda``; the findings come from the type annotation
that pipeline keeps: the IR blocks right after type inference, the type of every
variable and the signature chosen for every operation. ``device=True`` functions
the kernel calls are inspected too, typed with the argument types of each call.

Two kinds of finding:

``float64`` (an error: it changes results; findings.py drops the lines whose PTX
has no float64 instruction, where LLVM folded the promotion away)
    Arithmetic (``+ - * / // % **``, their in-place forms, unary minus, calls of
    ``math`` functions, ``abs``, ``min``, ``max``, ``pow``) that consumes or
    produces a float64 value. A Python float literal (``x[i] * 2.5``), an integer
    meeting a float32 (``1 + z`` is float64 in numba), ``math.inf`` or a float64
    array is the usual cause. Comparisons are not arithmetic and are not reported.
    ``ir_findings`` reports these only for kernels with no float64 input.
``int64-index`` (a warning: it costs speed only)
    Integer arithmetic typed int64 inside a loop whose result indexes an array.

Nothing here needs a GPU.
"""

from __future__ import annotations

import inspect
import linecache
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from portkit.build.finding import Severity
from portkit.lint.float64 import FLOAT64, float64_in
from portkit.lint.int64_index import INT64_INDEX, int64_index_in
from portkit.lint.typed_ir import RawFinding, TypedFunction, typed_functions, unique

SEVERITY = {FLOAT64: Severity.ERROR, INT64_INDEX: Severity.WARNING}


@dataclass(frozen=True)
class IRFinding:
    kind: str  # "float64" or "int64-index"
    severity: Severity  # SEVERITY[kind]
    kernel: str  # the kernel being linted
    function: str  # the function the line is in (kernel or device function name)
    path: str  # source file
    line: int
    source: str  # that source line, stripped
    message: str  # what happens, e.g. "float32 * float64 -> float64 (Python float literal 2.5)"
    fix: str  # how to fix it


# --------------------------------------------------------------------------------------
# Public entry points


def ir_findings(kernel_name: str, dispatcher: Any, signature: tuple[Any, ...]) -> list[IRFinding]:
    """All findings for the kernel compiled with ``signature`` (a tuple of numba types,
    as produced by ``portkit.launch.trace.record_launches(...)[i].signature``). float64
    findings only when no floating input in ``signature`` is float64. Sorted by
    (path, line), one finding per (kind, path, line).

    A kernel numba cannot type raises numba's own error (the compile check reports those).
    """
    functions = typed_functions(dispatcher, signature)
    raw: list[RawFinding] = []
    if not has_float64_input(signature):
        raw.extend(float64_in(functions))
    raw.extend(int64_index_in(functions))
    return _merge(kernel_name, raw)


def float64_findings(
    kernel_name: str, dispatcher: Any, signature: tuple[Any, ...]
) -> list[IRFinding]:
    """The raw float64 finder: every float64 arithmetic line, whatever the inputs are."""
    return _merge(kernel_name, float64_in(typed_functions(dispatcher, signature)))


def int64_index_findings(
    kernel_name: str, dispatcher: Any, signature: tuple[Any, ...]
) -> list[IRFinding]:
    """The raw int64-index finder: int64 arithmetic in a loop that indexes an array."""
    return _merge(kernel_name, int64_index_in(typed_functions(dispatcher, signature)))


def has_float64_input(signature: Iterable) -> bool:
    """Whether any argument is, or is an array or tuple of, float64 or complex128."""
    from numba.core import types

    for t in signature:
        if isinstance(t, types.BaseTuple):
            if has_float64_input(t.types):
                return True
            continue
        dtype = getattr(t, "dtype", t) if isinstance(t, types.ArrayCompatible) else t
        if dtype in (types.float64, types.complex128):
            return True
    return False


# --------------------------------------------------------------------------------------
# Findings


def _merge(kernel_name: str, raw: Iterable[RawFinding]) -> list[IRFinding]:
    """One finding per (kind, path, line): messages and fixes of a line are joined."""
    grouped: dict[tuple, dict] = {}
    for r in raw:
        path = r.loc.filename
        function = _function_at(r.function, path, r.loc.line)
        key = (r.kind, path, r.loc.line)
        entry = grouped.setdefault(key, {"function": function, "messages": [], "fixes": []})
        entry["messages"].append(r.message)
        entry["fixes"].extend(r.fixes)
    findings = [
        IRFinding(
            kind=kind,
            severity=SEVERITY[kind],
            kernel=kernel_name,
            function=entry["function"],
            path=path,
            line=line,
            source=linecache.getline(path, line).strip(),
            message="; ".join(unique(entry["messages"])),
            fix="; ".join(unique(f for f in entry["fixes"] if f)),
        )
        for (kind, path, line), entry in grouped.items()
    ]
    order = {FLOAT64: 0, INT64_INDEX: 1}
    return sorted(findings, key=lambda f: (f.path, f.line, order.get(f.kind, 2)))


def _function_at(fn: TypedFunction, path: str, line: int) -> str:
    """The function a line is in: ``fn`` itself, or a device function numba inlined
    into it (``inline="always"``) found among ``fn``'s globals."""
    if _source_range_contains(fn.py_func, path, line):
        return fn.name
    for value in list(getattr(fn.py_func, "__globals__", {}).values()):
        py_func = getattr(value, "py_func", None)
        if py_func is not None and _source_range_contains(py_func, path, line):
            return py_func.__name__
    return fn.name


def _source_range_contains(py_func: Any, path: str, line: int) -> bool:
    code = getattr(py_func, "__code__", None)
    if code is None or code.co_filename != path:
        return False
    try:
        lines, start = inspect.getsourcelines(py_func)
    except (OSError, TypeError):
        return False
    return start <= line < start + len(lines)
