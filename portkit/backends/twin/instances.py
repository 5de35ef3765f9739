"""Which instantiations of each twin kernel are compiled, for every consumer of the twin
(NVRTC on the GPU, g++ for twin-cpu, ``portkit compile``, ``portkit export``):

- a kernel without a template: once;
- a kernel with one template parameter: once per dtype the op accepts, so a template
  that cannot take one of them is said at compile time ("drop its dtype");
- a kernel with several (``template <typename T, typename A>``, storage and compute
  type): once per combination the op's launches use, found by running its launchers on
  every case that is not GPU-only against kernels that only record (launch/trace.py,
  as the signature check does). Every combination of the op's dtypes would include
  ones no launch makes (T=__half, A=__half) and that need not compile.

A launch of a combination that was not compiled is refused in one line
(``launch_contract.not_compiled``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from portkit.backends.twin.source import TwinKernel, parse_twin
from portkit.errors import DtypeError, InputError, OpDefinitionError, TwinSignatureError

# Which C type each dtype instantiates, and which instantiation a launch needs, are the
# launch contract's: the exported runtime picks instantiations by the same rule.
from portkit.runtime.launch_contract import C_SCALAR_OF_DTYPE, Instantiation, template_types

if TYPE_CHECKING:
    from portkit.project.discovery import Op

HALF_HEADERS = {"float16": "cuda_fp16.h", "bfloat16": "cuda_bf16.h"}


def checked_twin_kernels(op: Op) -> dict[str, TwinKernel]:
    """The twin's kernels, after checking it declares every kernel the prototype has."""
    assert op.twin_path is not None
    declared = parse_twin(op.twin_path)
    missing = sorted(set(op.kernels) - set(declared))
    if missing:
        raise OpDefinitionError(
            f"twin {op.twin_path} lacks kernel(s) {', '.join(missing)} that the prototype "
            f"{op.prototype_path} defines; twins use the same kernel names"
        )
    return {name: declared[name] for name in op.kernels}


def twin_instantiations(op: Op) -> dict[str, list[Instantiation]]:
    """Each kernel's instantiations, in a fixed order (the module's docstring)."""
    kernels = checked_twin_kernels(op)
    scalars = [C_SCALAR_OF_DTYPE[d] for d in op.definition.dtypes]
    launched = (
        _launched(op, kernels) if any(len(k.template_params) > 1 for k in kernels.values()) else {}
    )
    found: dict[str, list[Instantiation]] = {}
    for name, kernel in kernels.items():
        if not kernel.template_params:
            found[name] = [None]
        elif len(kernel.template_params) == 1:
            found[name] = [(s,) for s in scalars]
        else:
            found[name] = [*sorted(launched.get(name, set()))]
    return found


def _launched(op: Op, kernels: dict[str, TwinKernel]) -> dict[str, dict[tuple[str, ...], str]]:
    """Per kernel with several template parameters, the instantiations its traced
    launches need, each with the dtype of the first case that launches it. A launch
    that cannot decide one is left to the signature check and to the launch itself,
    which say why."""
    from portkit.launch.trace import TensorArg, traced_launches

    launched: dict[str, dict[tuple[str, ...], str]] = {}
    for case, launch in traced_launches(op):
        kernel = kernels.get(launch.kernel)
        if kernel is None or len(kernel.template_params) < 2:
            continue
        dtypes = [a.dtype if isinstance(a, TensorArg) else None for a in launch.args]
        try:
            instantiation = template_types(kernel, dtypes)
        except InputError:
            continue
        assert instantiation is not None
        launched.setdefault(kernel.name, {}).setdefault(instantiation, op.case(case).dtype)
    return launched


def instantiation_for(op: Op, kernel: TwinKernel, dtype: str) -> Instantiation:
    """The instantiation a case of ``dtype`` launches ``kernel`` with (what the resource
    report measures), or None when no such case launches it."""
    if len(kernel.template_params) < 2:
        return (C_SCALAR_OF_DTYPE[dtype],) if kernel.template_params else None
    launched = _launched(op, {kernel.name: kernel}).get(kernel.name, {})
    return next((i for i, d in launched.items() if d == dtype), None)


def twin_expressions(op: Op) -> list[str]:
    """NVRTC name expressions for every instantiation of every kernel of ``op``."""
    kernels = checked_twin_kernels(op)
    if any(k.template_params for k in kernels.values()):
        _require_half_headers(op)
    return [
        kernels[name].expression(instantiation)
        for name, instantiations in twin_instantiations(op).items()
        for instantiation in instantiations
    ]


def _require_half_headers(op: Op) -> None:
    """A template instantiated with __half or __nv_bfloat16 needs its header; NVRTC's own
    error ("identifier __half is undefined" in a name map) does not say so."""
    assert op.twin_path is not None
    source = op.twin_path.read_text()
    for dtype, header in HALF_HEADERS.items():
        if dtype in op.definition.dtypes and header not in source:
            raise DtypeError(
                f"twin {op.twin_path}: op {op.name} accepts {dtype}, so its templates are "
                f"instantiated with {C_SCALAR_OF_DTYPE[dtype]}; add #include <{header}>"
            )


def readable_twin(
    op: Op, syntax_check: Callable[[Path], None]
) -> tuple[dict[str, TwinKernel], list[str]]:
    """The twin's kernels and name expressions. When portkit cannot read a kernel's
    signature, the compiler (``syntax_check``, which raises TwinCompileError) speaks
    first: a syntax error in a parameter list is its to report, in its words."""
    try:
        return checked_twin_kernels(op), twin_expressions(op)
    except TwinSignatureError:
        assert op.twin_path is not None
        syntax_check(op.twin_path)
        raise
