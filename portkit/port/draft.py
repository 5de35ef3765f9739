"""The draft twin of an op: its kernels typed for every signature the op's cases
launch, their device functions (callees first), the constants and helpers they use."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from portkit.errors import PortkitError
from portkit.port.context import DraftNeeds, Gap
from portkit.port.ctype import is_array
from portkit.port.functions import emit_function, parsed, placeholder
from portkit.port.vartypes import FunctionTypes, function_types
from portkit.simt.numba_reasons import why_not

if TYPE_CHECKING:
    from portkit.project.discovery import Op

_WIDEN = {
    "float16": "__device__ inline float widen(__half v) { return __half2float(v); }",
    "bfloat16": "__device__ inline float widen(__nv_bfloat16 v) { return __bfloat162float(v); }",
}


class UnknownKernel(PortkitError):
    """``--kernel`` names no kernel of the op."""


@dataclass
class Draft:
    op: str
    text: str
    gaps: list[Gap]
    kernels: list[str]


def _line(py_func: Any) -> int:
    return inspect.getsourcelines(py_func)[1]


def _typed(
    kernels: Mapping[str, Any], launches: dict[str, list[Any]]
) -> tuple[dict[str, FunctionTypes], dict[Any, FunctionTypes], dict[str, tuple[str, str, int]]]:
    """(kernel FunctionTypes by name, device FunctionTypes by py_func, the kernels that
    have no types: why, file name, line)."""
    from portkit.lint.typed_ir import typed_functions

    typed: dict[str, FunctionTypes] = {}
    device_specs: dict[Any, dict[tuple, Any]] = {}
    untyped: dict[str, tuple[str, str, int]] = {}
    for name, dispatcher in kernels.items():
        signatures = list(dict.fromkeys(launch.signature for launch in launches.get(name, [])))
        if not signatures:
            file = inspect.getsourcefile(dispatcher.py_func) or "?"
            why = "no case launches it, so numba has no types for it"
            untyped[name] = (why, file.rsplit("/", 1)[-1], _line(dispatcher.py_func))
            continue
        specs: list[Any] = []
        found: dict[Any, dict[tuple, Any]] = {}
        try:
            for signature in signatures:
                functions = typed_functions(dispatcher, signature)
                specs.append(functions[0])
                for fn in functions[1:]:
                    found.setdefault(fn.py_func, {}).setdefault(fn.args, fn)
        except Exception as exc:  # numba refuses the kernel: its #error, not a traceback
            reason, file, line = why_not(dispatcher.py_func, exc)
            why = f"numba cannot compile it: {reason}"
            untyped[name] = (why, file.rsplit("/", 1)[-1], line)
            continue
        for py_func, by_args in found.items():
            for args, fn in by_args.items():
                device_specs.setdefault(py_func, {}).setdefault(args, fn)
        typed[name] = function_types(dispatcher.py_func, specs, kernel=True)
    device = {
        py_func: function_types(py_func, list(specs.values()), kernel=False)
        for py_func, specs in device_specs.items()
    }
    return typed, device, untyped


def _callees_first(device: dict[Any, FunctionTypes]) -> list[FunctionTypes]:
    order: list[FunctionTypes] = []
    done: set = set()

    def visit(py_func: Any) -> None:
        if py_func in done:
            return
        done.add(py_func)
        node = parsed(py_func)[0]
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                target = getattr(py_func.__globals__.get(n.id), "py_func", None)
                if target in device and target is not py_func:
                    visit(target)
        order.append(device[py_func])

    for py_func in sorted(device, key=_line):
        visit(py_func)
    return order


def draft_op(op: Op, kernel_names: Sequence[str] = ()) -> Draft:
    """The draft of ``op``'s twin (of the kernels named, default all), typed for the
    launches of every case that is not GPU-only."""
    from portkit.launch.trace import traced_launches

    unknown = [n for n in kernel_names if n not in op.kernels]
    if unknown:
        raise UnknownKernel(
            f"op {op.name} has no kernel {unknown[0]}; its kernels: {', '.join(sorted(op.kernels))}"
        )
    launches: dict[str, list] = {}
    for _, launch in traced_launches(op):
        launches.setdefault(launch.kernel, []).append(launch)
    chosen = {n: op.kernels[n] for n in kernel_names or op.kernels}
    return draft_kernels(op.name, op.prototype_path.name, chosen, launches)


def draft_kernels(
    name: str, source: str, kernels: dict[str, Any], launches: dict[str, list]
) -> Draft:
    """The draft of ``kernels`` (numba dispatchers by name) typed for ``launches``
    (``portkit.launch.trace.Launch`` records by kernel name); ``source`` names the
    prototype in the header."""
    from portkit.port.layout import dimension

    order = sorted(kernels, key=lambda n: _line(kernels[n].py_func))
    typed, device, untyped = _typed(kernels, launches)
    needs = DraftNeeds()
    writes: dict[Any, set[int]] = {}
    body: list[str] = []
    no_dims = lambda array, dim: None  # noqa: E731 - a device function sees no launch
    for ft in _callees_first(device):
        body += emit_function(ft, needs, device, writes, no_dims) + [""]
    for kernel in order:
        if kernel in untyped:
            reason, file, line = untyped[kernel]
            body += placeholder(kernel, reason, needs, file, line)
            body.append("")
            continue
        ft = typed[kernel]

        def dims(
            array: str, dim: int | None, ft: FunctionTypes = ft, kernel: str = kernel
        ) -> str | None:
            return dimension(ft.params, launches[kernel], array, dim)

        body += emit_function(ft, needs, device, writes, dims) + [""]
    text = _preamble(name, source, [*typed.values(), *device.values()], needs) + "\n".join(body)
    return Draft(name, text.rstrip("\n") + "\n", needs.gaps, order)


def _preamble(name: str, source: str, functions: list[FunctionTypes], needs: DraftNeeds) -> str:
    halves = set()
    for ft in functions:
        for vec in [*ft.variables.values(), *ft.returns]:
            for t in vec if isinstance(vec, tuple) else (vec,):
                t = t.dtype if is_array(t) else t
                if str(t) == "float16":
                    halves.add("float16")
                elif str(t) == "__nv_bfloat16":
                    halves.add("bfloat16")
    lines = [
        f"// Draft twin of {source}, written by `portkit port {name}`: a",
        "// faithful port of the prototype, not yet a fast one (docs/port.md says what a",
        "// person does next). Each statement ends with the prototype line it comes from.",
    ]
    includes = [
        h for h, k in (("cuda_fp16.h", "float16"), ("cuda_bf16.h", "bfloat16")) if k in halves
    ]
    if "math_constants" in needs.helpers:
        includes.append("math_constants.h")
    lines += [f"#include <{h}>" for h in includes]
    if needs.constants:
        lines.append("")
        lines += [f"constexpr {t} {n} = {v};" for n, (t, v) in needs.constants.items()]
    if "widen" in needs.helpers:
        lines += ["", "// float16 and bfloat16 are read in float, as the prototype computes them."]
        lines += [_WIDEN[k] for k in ("float16", "bfloat16") if k in halves]
        lines.append("template <typename V> __device__ inline V widen(V v) { return v; }")
    for n in sorted(int(h[5:]) for h in needs.helpers if h.startswith("tuple")):
        params = ", ".join(f"typename A{i}" for i in range(n))
        fields = " ".join(f"A{i} v{i};" for i in range(n))
        lines += ["", f"// A device function's tuple of {n} values.",
                  f"template <{params}> struct Tuple{n} {{ {fields} }};"]  # fmt: skip
    return "\n".join(lines) + "\n\n"
