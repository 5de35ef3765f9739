"""Run an unmodified ``numba.cuda.jit`` kernel in numba's CUDA simulator, in-process.

numba picks its simulator with an environment variable read at import; portkit
needs the real target and the simulator side by side. So each kernel's ``py_func``
is rebuilt with a private copy of its globals in which every ``cuda.jit`` function
it refers to (kernels and ``device=True`` helpers, found in globals and closures)
is replaced by its simulated twin. The user's module is never modified.
"""

from __future__ import annotations

import bdb
import math
import pdb
import sys
import threading
import traceback
import types
import warnings
from collections.abc import Sequence
from typing import Any

from portkit.errors import KernelError
from portkit.launch.kernel_set import LaunchConfig, LaunchTarget
from portkit.project.dtypes import prototype_view
from portkit.results import FailureSite
from portkit.simt.debug import Breakpoint
from portkit.simt.transform import is_device_function as _is_device_function


def _is_math_function(value: Any) -> bool:
    name = getattr(value, "__name__", None)
    return callable(value) and name is not None and getattr(math, name, None) is value


def _typed_math_function(function: Any) -> Any:
    """``function`` returning the NumPy float type of its float arguments, as numba types
    it: ``math.exp(float32)`` is float32 on the GPU. Python's math returns a Python
    float, which NumPy 2 lets a float32 operand absorb (``float32(1) + exp(v)`` would
    be float32 for a float64 ``v``), so the simulator would lose precision the GPU keeps."""
    import numpy as np

    def typed(*args: Any) -> Any:
        result = function(*args)
        floats = [type(a) for a in args if isinstance(a, np.floating)]
        if floats and isinstance(result, float):
            return np.result_type(*floats).type(result)
        return result

    typed.__name__ = function.__name__
    return typed


class _TypedMath(types.ModuleType):
    """The ``math`` module as a simulated kernel sees it (see ``_typed_math_function``)."""

    def __getattr__(self, name: str) -> Any:
        value = getattr(math, name)
        if callable(value):
            value = _typed_math_function(value)
        setattr(self, name, value)  # built once: kernels look math functions up per thread
        return value


TYPED_MATH = _TypedMath("math")


def _referenced_names(code: types.CodeType) -> set[str]:
    """Global names a function (and any function nested in it) looks up."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _referenced_names(const)
    return names


class SimulatedFunctions:
    """Memoised simulated copies of numba functions, so recursion through shared
    helpers builds each copy once."""

    def __init__(self) -> None:
        self._done: dict[int, Any] = {}

    def plain_copy(self, dispatcher: Any) -> types.FunctionType:
        """``dispatcher.py_func`` rebuilt over globals whose device functions are simulated
        and whose ``math`` returns numba's types."""
        fn = dispatcher.py_func
        namespace = dict(fn.__globals__)
        for name in _referenced_names(fn.__code__):
            value = fn.__globals__.get(name)
            if _is_device_function(value):
                namespace[name] = self.simulated(value)
            elif value is math:
                namespace[name] = TYPED_MATH
            elif _is_math_function(value):
                namespace[name] = _typed_math_function(value)
        closure = None
        if fn.__closure__:
            closure = tuple(
                types.CellType(self.simulated(c.cell_contents))
                if _is_device_function(c.cell_contents)
                else c
                for c in fn.__closure__
            )
        copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, closure)
        copy.__kwdefaults__ = fn.__kwdefaults__
        return copy

    def simulated(self, dispatcher: Any) -> Any:
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        key = id(dispatcher)
        if key not in self._done:
            device = bool(dispatcher.targetoptions.get("device"))
            self._done[key] = FakeCUDAKernel(self.plain_copy(dispatcher), device=device)
        return self._done[key]


def _with_breakpoint(fn: types.FunctionType, breakpoint: Breakpoint) -> types.FunctionType:
    """A function over ``fn``'s globals (numba swaps ``cuda`` in those) that enters pdb
    at the first line of the kernel in the chosen thread and runs it plainly elsewhere."""
    state = {"hit": False}
    lock = threading.Lock()
    current_thread = threading.current_thread
    # Closure variables, not globals: the wrapper runs over the kernel's globals.
    debugger_class = pdb.Pdb
    kernel_error = KernelError
    quit_exception = bdb.BdbQuit
    settrace = sys.settrace
    target = (breakpoint.block, breakpoint.thread)

    def kernel_with_breakpoint(*args: Any) -> None:
        me: Any = current_thread()  # numba's simulated CUDA thread: blockIdx, threadIdx
        here = (tuple(me.blockIdx), tuple(me.threadIdx))
        with lock:
            stop = here == target and not state["hit"]
            state["hit"] = state["hit"] or stop
        if stop:
            debugger = debugger_class(stdin=breakpoint.stdin, stdout=breakpoint.stdout)
            if breakpoint.stdin is not None:
                debugger.use_rawinput = False
            debugger.message(
                f"portkit: kernel {breakpoint.kernel}, block {breakpoint.block}, "
                f"thread {breakpoint.thread}"
            )
            # pdb.Pdb.runcall, except that a quit is reported: runcall swallows BdbQuit
            # and the thread's work would vanish silently.
            debugger.reset()
            settrace(debugger.trace_dispatch)
            try:
                return fn(*args)
            except quit_exception:
                raise kernel_error("pdb was quit before the thread finished") from None
            finally:
                debugger.quitting = True
                settrace(None)
        return fn(*args)

    code = kernel_with_breakpoint.__code__
    return types.FunctionType(
        code, fn.__globals__, fn.__name__, None, kernel_with_breakpoint.__closure__
    )


class SimulatedKernel(LaunchTarget):
    """A launch target running one kernel in numba's simulator on CPU tensors."""

    def __init__(self, name: str, dispatcher: Any, functions: SimulatedFunctions) -> None:
        self.name = name
        self._dispatcher = dispatcher
        self._functions = functions
        self.breakpoint: Breakpoint | None = None
        self._fake = None

    def _kernel(self) -> Any:
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        if self.breakpoint is not None and self.breakpoint.kernel == self.name:
            fn = _with_breakpoint(self._functions.plain_copy(self._dispatcher), self.breakpoint)
            return FakeCUDAKernel(fn, device=False)
        if self._fake is None:
            self._fake = self._functions.simulated(self._dispatcher)
        return self._fake

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
        import torch

        host_args = [prototype_view(a).numpy() if isinstance(a, torch.Tensor) else a for a in args]
        kernel = self._kernel()
        try:
            with warnings.catch_warnings():
                # NumPy warns on inf - inf and the like; a GPU computes NaN silently.
                warnings.simplefilter("ignore", RuntimeWarning)
                kernel[config.grid, config.block, 0, config.shared_bytes](*host_args)
        except Exception as exc:
            raise self._error(exc) from None

    def _error(self, exc: Exception) -> KernelError:
        """numba prefixes thread errors with 'tid=[x, y, z] ctaid=[x, y, z]: '."""
        message = str(exc)
        where, block, thread = "", None, None
        if message.startswith("tid="):
            head, _, message = message.partition(": ")
            tid, _, ctaid = head.partition(" ctaid=")
            block, thread = _coords(ctaid), _coords(tid[4:])
            where = f" at block {block}, thread {thread}"
        source = self._dispatcher.py_func.__code__.co_filename
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == source]
        line = f"\n  {frames[-1].filename}:{frames[-1].lineno}: {frames[-1].line}" if frames else ""
        text = f"kernel {self.name} raised in the simulator{where}: {type(exc).__name__}: "
        site = FailureSite(
            self.name,
            block,
            thread,
            frames[-1].filename if frames else None,
            frames[-1].lineno if frames else None,
        )
        return KernelError(f"{text}{message}{line}", site)


def _coords(text: str) -> tuple[int, int, int] | None:
    """numba's ``[x, y, z]``; None for anything else."""
    values = [int(v) for v in text.strip(" []").split(",") if v.strip()]
    return (values[0], values[1], values[2]) if len(values) == 3 else None


def simulator_importable() -> str | None:
    try:
        import numba.cuda.simulator.kernel  # noqa: F401
    except Exception as exc:  # pragma: no cover - depends on the install
        return f"numba's CUDA simulator cannot be imported: {exc}"
    return None


WARP_INTRINSICS = frozenset(
    (
        "shfl_sync",
        "shfl_up_sync",
        "shfl_down_sync",
        "shfl_xor_sync",
        "ballot_sync",
        "any_sync",
        "all_sync",
        "eq_sync",
        "syncwarp",
        "activemask",
        "lanemask_lt",
        "match_any_sync",
        "match_all_sync",
    )
)


def uses_warp_intrinsics(op: Any) -> bool:
    """Whether any kernel of ``op`` (or a function it calls) names a warp intrinsic."""
    seen: set[int] = set()
    stack = [d.py_func for d in op.kernels.values()]
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        names = _referenced_names(fn.__code__)
        if names & WARP_INTRINSICS:
            return True
        stack += [
            fn.__globals__[n].py_func for n in names if _is_device_function(fn.__globals__.get(n))
        ]
    return False
