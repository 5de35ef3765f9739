"""numba's verdict on a kernel before the simulator runs it: what numba's CUDA compiler
refuses is red here too, never green on the CPU and an error on the GPU.

The simulator runs any Python, so a kernel numba cannot compile (``cuda.selp`` of an
int32 and an int64, a list, ``cuda.atomic.add`` on a float16 array) would pass. Before a
launch runs, the kernel is compiled to PTX for ``ARCH`` with numba (``compile_ptx``: no
GPU, no CUDA driver) for the numba types of the launch's own arguments; a refusal raises
``NumbaRejects``, one line naming the kernel, its file and line and numba's reason
(``numba_reasons.why_not``). Without NVVM there is no verdict and the launch runs.

Two callers: ``simulate()`` (simt/launcher.py; ``typecheck=False`` turns it off), verdicts
kept in memory per kernel object and argument types; and ``portkit sim``'s op backend
(backends/numba_types.py), which keeps them by content and on disk beside ``portkit
compile``'s PTX. ``simulated_cuda()`` and ``pytest --portkit-simt`` do not ask: there the
kernel's globals are the switch's simulated objects, which numba cannot type.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from portkit.errors import KernelError
from portkit.numba_internals import device_compute_capability
from portkit.simt.numba_reasons import why_not

COMPUTE_CAPABILITY = (9, 0)
ARCH = f"sm_{COMPUTE_CAPABILITY[0]}{COMPUTE_CAPABILITY[1]}"


class NumbaRejects(KernelError):
    """numba's CUDA compiler refuses a kernel for the argument types it is launched with."""


# kernel (numba dispatcher) -> {argument types: None (compiles) or the one-line refusal}
_VERDICTS: weakref.WeakKeyDictionary[Any, dict[tuple, str | None]] = weakref.WeakKeyDictionary()


def compile_for_arch(
    py_func: Any, argtypes: tuple, lineinfo: bool = False, ask_driver: bool = False
) -> str:
    """The PTX numba makes of ``py_func`` for ``argtypes`` on ``ARCH``; raises numba's error
    where it refuses. ``ask_driver=False``: no CUDA driver call, GPU or not."""
    from numba.cuda import compiler  # numba's own compile_ptx, even under simulated_cuda()

    with device_compute_capability(COMPUTE_CAPABILITY, ask_driver):
        ptx, _ = compiler.compile_ptx(py_func, argtypes, cc=COMPUTE_CAPABILITY, lineinfo=lineinfo)
    return ptx


def launch_types(args: Sequence[Any]) -> tuple | None:
    """The numba types of a simulated launch's host arguments, as a GPU launch would type
    them (the simulator's bfloat16 arrays: numba-cuda's bfloat16 arrays); None where one
    has no numba type a GPU launch could take (a Python object): no verdict then."""
    import numba

    from portkit.simt.scalars import BFloat16Bits

    types = []
    for a in args:
        a = getattr(a, "_ary", a)  # a simulated device array: its host memory
        try:
            if isinstance(a, BFloat16Bits):
                from numba.cuda import bf16

                t = numba.types.Array(bf16.bfloat16, a.ndim, "C" if a.flags.c_contiguous else "A")
            else:
                t = numba.typeof(a)
        except (ValueError, TypeError):
            return None
        if "pyobject" in str(t):
            return None
        types.append(t)
    return tuple(types)


def check_launch(name: str, dispatcher: Any, argtypes: tuple | None) -> None:
    """Raise ``NumbaRejects`` if numba cannot compile ``dispatcher`` for ``argtypes`` (None:
    an argument numba gives no type, so no verdict)."""
    if argtypes is None:
        return
    try:
        seen = _VERDICTS.setdefault(dispatcher, {})
    except TypeError:  # not weak-referenceable: asked every launch
        seen = {}
    if argtypes not in seen:
        seen[argtypes] = _verdict(name, dispatcher.py_func, argtypes)
    refusal = seen[argtypes]
    if refusal is not None:
        raise NumbaRejects(refusal)


def _verdict(name: str, py_func: Any, argtypes: tuple) -> str | None:
    try:
        compile_for_arch(py_func, argtypes)
    except Exception as exc:  # numba's refusal, or numba failing on the kernel
        if no_compiler(exc):  # no NVVM or CUDA toolkit here: no verdict, simulate
            return None
        return rejection(name, py_func, ", ".join(map(str, argtypes)), exc)
    return None


def no_compiler(exc: Exception) -> bool:
    """Whether numba failed for want of NVVM or the CUDA toolkit (numba's
    ``NvvmSupportError``, a missing library file), not on the kernel: an ImportError a
    kernel's own call raises while numba types it (``np.linalg`` without SciPy) is a
    rejection, as it is on a GPU."""
    if isinstance(exc, OSError):
        return True
    return isinstance(exc, ImportError) and "nvvm" in f"{type(exc).__name__} {exc}".lower()


def rejection(name: str, py_func: Any, types: str, exc: BaseException) -> str:
    """numba's error as one line: the kernel, the prototype's file and line, the reason."""
    reason, file, line = why_not(py_func, exc)
    return (
        f"kernel {name} ({file}:{line}): numba cannot compile it for {ARCH} with "
        f"arguments ({types}): {reason}"
    )


def forget() -> None:
    """Drop the verdicts kept in memory (tests)."""
    _VERDICTS.clear()
