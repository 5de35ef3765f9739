"""The types of a function's parameters and variables across every signature it is
typed with, and which of them become template parameters.

numba types each signature the op's cases launch (portkit/lint/typed_ir.py); its
typemap names SSA versions (``m``, ``m.1``...), which are unified per variable, as a C
variable has one type. A parameter whose element type changes with the launch
(``float`` for one case, ``double`` for another) is a template parameter; a variable
whose type follows it is written with that parameter's name.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from portkit.lint.typed_ir import TypedFunction, is_ir
from portkit.port.ctype import Vec, c_name, is_array, unliteral
from portkit.port.gaps import Untranslated

TEMPLATE_NAMES = ("T", "U", "V", "W", "X", "Y")
_VERSION = re.compile(r"(\.\d+)+$")


@functools.cache
def typing_context() -> Any:
    """numba-cuda's typing context: the operator and math typing the kernels got."""
    from numba.cuda.descriptor import cuda_target

    context = cuda_target.typing_context
    context.refresh()
    return context


def unify(types_: list) -> Any:
    """One type for the values of ``types_`` (numba's unification), else the first."""
    found = list(dict.fromkeys(unliteral(t) for t in types_))
    if len(found) == 1:
        return found[0]
    unified = typing_context().unify_types(*found)
    return unified if unified is not None else found[0]


def _variables(spec: TypedFunction) -> dict[str, Any]:
    grouped: dict[str, list] = {}
    for name, t in spec.typemap.items():
        if name.startswith(("$", "arg.")) or "$" in name:
            continue
        grouped.setdefault(_VERSION.sub("", name), []).append(t)
    return {name: unify(ts) for name, ts in grouped.items()}


def _return_type(spec: TypedFunction) -> Any:
    from numba.core import types

    for block in spec.blocks.values():
        for stmt in block.body:
            if is_ir(stmt, "Return"):
                return spec.typemap.get(stmt.value.name, types.none)
    return types.none


def element(t: Any) -> Any:
    """An array's element type; a scalar's own type."""
    return t.dtype if is_array(t) else unliteral(t)


@dataclass
class FunctionTypes:
    """One kernel or device function, typed once per distinct argument types."""

    py_func: Any
    specs: list[TypedFunction]
    kernel: bool
    params: list[str] = field(default_factory=list)
    variables: dict[str, Vec] = field(default_factory=dict)
    returns: Vec = ()
    templates: dict[Vec, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.py_func.__name__

    def param_vec(self, index: int) -> Vec:
        return tuple(spec.args[index] for spec in self.specs)

    def type_name(self, vec: Vec) -> str | None:
        """C spelling of a vector of scalar types: its template parameter, or the fixed
        type; None when it varies with no parameter to follow."""
        vec = tuple(unliteral(t) for t in vec)
        if len(set(vec)) == 1:
            return c_name(vec[0])
        return self.templates.get(vec)


def function_types(py_func: Any, specs: list[TypedFunction], kernel: bool) -> FunctionTypes:
    import inspect

    ft = FunctionTypes(py_func, specs, kernel)
    ft.params = list(inspect.signature(py_func).parameters)
    per_spec = [_variables(spec) for spec in specs]
    names = dict.fromkeys(n for vs in per_spec for n in vs)
    for name in names:
        if all(name in vs for vs in per_spec):
            ft.variables[name] = tuple(vs[name] for vs in per_spec)
    for i, name in enumerate(ft.params):  # parameters keep their declared types
        ft.variables[name] = ft.param_vec(i)
    ft.returns = tuple(_return_type(spec) for spec in specs)
    _name_templates(ft)
    return ft


def _name_templates(ft: FunctionTypes) -> None:
    """Template parameters: a kernel's from its array parameters (the twin decides each
    from the first tensor bound to it), a device function's from any parameter (C++
    deduces them from the arguments)."""
    free = iter(TEMPLATE_NAMES)
    order = sorted(range(len(ft.params)), key=lambda i: not is_array(ft.param_vec(i)[0]))
    for i in order:
        vec = tuple(unliteral(element(t)) for t in ft.param_vec(i))
        if len(set(vec)) == 1 or vec in ft.templates:
            continue
        if ft.kernel and not is_array(ft.param_vec(i)[0]):
            ft.problems.append(
                f"scalar parameter {ft.params[i]} changes type with the launch "
                f"({', '.join(sorted(set(map(str, vec))))}) and no array parameter has "
                "the same element types"
            )
            continue
        ft.templates[vec] = next(free)


def resolved(fn: Any, *vecs: Vec) -> Vec:
    """numba's result type of ``fn(*args)`` for each signature's argument types."""
    out = []
    for args in zip(*vecs):
        sig = typing_context().resolve_function_type(fn, tuple(unliteral(a) for a in args), {})
        if sig is None:
            raise Untranslated(f"{getattr(fn, '__name__', fn)} of {', '.join(map(str, args))}")
        out.append(unliteral(sig.return_type))
    return tuple(out)
