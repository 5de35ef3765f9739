"""Does each twin kernel take what the launcher passes? Checked without a GPU.

The op's launchers run against kernels that only record (launch/trace.py) on every
case that is not GPU-only; each launch is then held against the twin's parsed
parameters (backends/twin/source.py). Errors, since each one changes results or
fails at run time on the GPU:

- a different number of arguments than the twin declares parameters;
- a tensor passed to a scalar parameter, or a scalar to a pointer;
- a tensor of another dtype than a fixed-type pointer (``double*``, ``int*``) takes;
- an integer value that does not fit the parameter's C type in some traced case;
- a 32-bit (or narrower) integer parameter (``int``, ``unsigned``, ``int32_t``...)
  that receives a 64-bit integer (a Python int, which numba types int64, or a
  ``numpy.int64``) that is a tensor size: in every traced launch the value is the
  element count, a dimension, or a product of leading or of trailing dimensions of a
  tensor passed to the same launch, and in some launch it is above 1. Past 2^31 such
  a parameter silently truncates on the GPU while the prototype keeps 64 bits.

Any other 64-bit integer passed to a 32-bit parameter is a warning: the prototype and
the twin see the same value only while it fits.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from portkit.build.finding import Finding, Severity
from portkit.errors import PortkitError

if TYPE_CHECKING:
    from portkit.backends.twin.source import TwinKernel, TwinParam
    from portkit.project.discovery import Op

SIGNATURE = "signature"  # the finding kind


def signature_findings(op: Op) -> list[Finding]:
    """Every mismatch between the op's twin kernels and the launches of its cases; []
    for an op without a twin, or whose twin cannot be read (the compile check says why)."""
    from portkit.backends.twin.instances import checked_twin_kernels
    from portkit.launch.trace import traced_launches

    if not op.has_twin:
        return []
    try:
        twins = checked_twin_kernels(op)
    except PortkitError:
        return []
    findings: dict[tuple, Finding] = {}  # the first case that shows each problem

    def report(severity: Severity, kernel: str, key: object, message: str, fix: str) -> None:
        where = f"{op.twin_path}:{twins[kernel].line}"
        finding = Finding(severity, SIGNATURE, op.name, kernel, where, message, fix)
        findings.setdefault((kernel, key), finding)

    integers: dict[tuple[str, int], list[tuple[Any, set[int]]]] = defaultdict(list)
    for case, launch in traced_launches(op):
        twin = twins.get(launch.kernel)
        if twin is None:
            continue
        if len(launch.args) != len(twin.params):
            names = ", ".join(p.name for p in twin.params)
            message = (
                f"twin kernel {twin.name} takes {len(twin.params)} parameter(s) ({names}); "
                f"the launcher passes {len(launch.args)} (case {case})"
            )
            fix = f"make the parameters of {twin.name} match the launch in the launcher"
            report(Severity.ERROR, twin.name, "count", message, fix)
            continue
        sizes = set().union(*(a.sizes for a in launch.args if hasattr(a, "sizes")))
        for index, (param, arg) in enumerate(zip(twin.params, launch.args)):
            problem = _mismatch(twin, param, arg, case)
            if problem is not None:
                report(Severity.ERROR, twin.name, index, *problem)
            elif _is_wide_integer(arg) and _narrow_integer(twin, param):
                integers[(twin.name, index)].append((arg, sizes))
    for (kernel, index), seen in integers.items():
        twin = twins[kernel]
        report(*_narrow_integer_finding(twin, twin.params[index], seen, index))
    return list(findings.values())


def _mismatch(twin: TwinKernel, param: TwinParam, arg: Any, case: str) -> tuple[str, str] | None:
    """(message, fix) when ``arg`` cannot be what ``param`` takes."""
    import numpy as np

    from portkit.launch.trace import TensorArg
    from portkit.runtime.launch_contract import DTYPE_OF_C_SCALAR, SCALAR_TYPES

    declared = f"`{param.ctype}{'*' if param.pointer else ''} {param.name}`"
    head = f"twin kernel {twin.name}: parameter {declared}"
    if param.pointer and not isinstance(arg, TensorArg):
        return (
            f"{head} is a pointer; the launcher passes a {type(arg).__name__} (case {case})",
            "pass a tensor there, or make the parameter a scalar",
        )
    if not param.pointer and isinstance(arg, TensorArg):
        return (
            f"{head} is a scalar; the launcher passes a {arg.dtype} tensor (case {case})",
            "make the parameter a pointer, or pass a scalar",
        )
    if param.pointer:
        expected = DTYPE_OF_C_SCALAR.get(param.ctype)
        if param.ctype not in twin.template_params and expected and arg.dtype != expected:
            return (
                f"{head} takes {expected} tensors; the launcher passes {arg.dtype} (case {case})",
                f"make it {arg.dtype} on both sides, or template the parameter",
            )
        return None
    if param.ctype in twin.template_params:
        return None  # a scalar of the instantiation's type (`A one`): the tensors decide it
    numpy_type = np.dtype(SCALAR_TYPES[param.ctype])
    if numpy_type.kind in "iu" and isinstance(arg, (int, np.integer)) and not isinstance(arg, bool):
        limits = np.iinfo(numpy_type)
        if not limits.min <= int(arg) <= limits.max:
            return (
                f"{head} receives {int(arg)} in case {case}, which does not fit a {param.ctype}",
                "declare it long long (int64_t), as the prototype sees it",
            )
    return None


def _is_wide_integer(arg: Any) -> bool:
    """A Python int (numba types it int64) or a 64-bit NumPy integer."""
    import numpy as np

    if isinstance(arg, bool):
        return False
    return isinstance(arg, int) or (isinstance(arg, np.integer) and arg.dtype.itemsize == 8)


def _narrow_integer(twin: TwinKernel, param: TwinParam) -> bool:
    import numpy as np

    from portkit.runtime.launch_contract import SCALAR_TYPES

    if param.pointer or param.ctype in twin.template_params:
        return False
    numpy_type = np.dtype(SCALAR_TYPES[param.ctype])
    return numpy_type.kind in "iu" and numpy_type.itemsize < 8


def _narrow_integer_finding(
    twin: TwinKernel, param: TwinParam, seen: list[tuple[Any, set[int]]], index: int
) -> tuple[Severity, str, int, str, str]:
    values = sorted({int(v) for v, _ in seen})
    shown = ", ".join(map(str, values[:4])) + (", ..." if len(values) > 4 else "")
    declared = f"twin kernel {twin.name}: parameter `{param.ctype} {param.name}`"
    if all(int(v) in sizes for v, sizes in seen) and max(values) > 1:
        return (
            Severity.ERROR,
            twin.name,
            index,
            f"{declared} receives a tensor size ({shown}) that the prototype sees as int64; "
            f"past 2^31 elements the twin truncates it",
            f"declare {param.name} long long (int64_t), as the prototype sees it",
        )
    return (
        Severity.WARNING,
        twin.name,
        index,
        f"{declared} receives a 64-bit Python int ({shown}); the twin sees the same value "
        f"only while it fits {param.ctype}",
        f"declare {param.name} long long, or pass numpy.int32(...) if 32 bits are intended",
    )
