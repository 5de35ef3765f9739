"""Any ``numba.cuda.jit`` kernel in portkit's simulator, launched with numba's syntax.

    from portkit.simt import simulate
    simulate(kernel)[blocks, threads](x, out, n)
    simulate(kernel)[blocks, threads, stream, shared_bytes](x, out, n)

Arguments are NumPy arrays, CPU tensors (bfloat16 too), numba's simulator arrays
(``to_device`` under ``simulated_cuda()``), CuPy arrays and numba device arrays (copied to
the host and back: ``host_arrays``), scalars or tuples of them, checked before the
kernel runs as numba checks them for a GPU: a list, None, GPU memory or a non-contiguous
view raises ``LaunchError`` naming the parameter. Arrays are written in place. Every check is
on; a kernel bug raises ``SimulationFault`` (a ``portkit.errors.KernelError``) naming
the kernel, the array and index, the block, the thread, the line, and for a race the
other thread and its line. The lockstep engine runs where it applies, the per-thread
engine elsewhere (``SimulatedKernel.engines`` says which ran, and why).
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from portkit.errors import LaunchError
from portkit.launch.kernel_set import launch_config
from portkit.simt.arg_hints import prepared
from portkit.simt.host_arrays import HostCopy, host_copy, refuse_device_memory
from portkit.simt.launch_errors import LaunchTypeError, check_dimensions, unconfigured
from portkit.simt.layout import is_strided
from portkit.simt.numba_check import check_launch, launch_types
from portkit.simt.overloads import (
    Overloads,
    argument_types,
    as_declared,
    declared_signatures,
)
from portkit.simt.schedule import checked
from portkit.simt.source import has_source
from portkit.simt.warning_log import SimulatorWarning


def _host(kernel: str, parameter: str, value: Any, copies: list[HostCopy]) -> Any:
    """A launch argument as the machine takes it (NumPy arrays are views, so writes land),
    checked as numba checks it before a GPU launch: arrays (NumPy, CPU tensors, numba's
    simulator arrays), scalars and tuples of them; anything else names the parameter.
    GPU arrays it can copy go to the host, and their copies onto ``copies``."""
    where = f"kernel {kernel}: parameter {parameter}"
    inner = getattr(value, "_ary", None)  # numba's simulator arrays (FakeCUDAArray)
    if isinstance(inner, np.ndarray):
        if is_strided(inner):
            return inner  # a device array's strided view (d[::2]): numba passes it as is
        value = inner
    if type(value).__module__.startswith("torch"):
        return _tensor(where, value)
    if isinstance(value, np.ndarray):
        record = value.dtype.names is not None  # numba types these as Record arrays
        # numba types bytes (CharSeq), str (UnicodeCharSeq), datetime64 and timedelta64
        if value.dtype.hasobject or not (record or value.dtype.kind in "biufcSUmM"):
            raise LaunchError(f"{where} is an array of {value.dtype}, which numba cannot type")
        if is_strided(value):
            raise LaunchError(
                f"{where} is a non-contiguous view (strides {value.strides}); numba copies "
                f"only contiguous host arrays to a GPU: pass np.ascontiguousarray(...)"
            )
        return value
    if isinstance(value, (bool, int, float, complex, np.generic, enum.Enum)):
        return value  # numba types Enum and IntEnum members by their class
    if isinstance(value, tuple):
        items = [_host(kernel, f"{parameter}[{i}]", v, copies) for i, v in enumerate(value)]
        # a namedtuple stays one (x.field in the kernel), as numba types it
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if hasattr(value, "__cuda_array_interface__"):
        copy = host_copy(where, value)
        if copy is None:
            refuse_device_memory(where, value)
        copies.append(copy)
        return _host(kernel, parameter, copy.host, copies)
    if hasattr(value, "__array_interface__"):
        return _host(kernel, parameter, np.asarray(value), copies)
    got = "None" if value is None else f"a {type(value).__name__}"
    hint = " (pass np.array(...) for an array)" if isinstance(value, list) else ""
    raise LaunchError(
        f"{where} is {got}, which a GPU kernel cannot take: arrays (NumPy, CPU tensors) "
        f"and scalars only{hint}"
    )


def _tensor(where: str, tensor: Any) -> np.ndarray:
    """A CPU tensor's memory as NumPy; bfloat16 as its bits (``BFloat16Bits``), as the
    sim backend passes it."""
    from portkit.project.dtypes import BITS_VIEW, dtype_name, prototype_view
    from portkit.simt.scalars import BFloat16Bits

    if tensor.device.type != "cpu":
        raise LaunchError(f"{where} is a {tensor.device} tensor; simulate() takes CPU tensors")
    if not tensor.is_contiguous() and tensor.numel():
        raise LaunchError(
            f"{where} is a non-contiguous tensor (strides {tuple(tensor.stride())}); the "
            f"simulator takes contiguous memory: pass .contiguous()"
        )
    array = prototype_view(tensor.detach()).numpy()
    return array.view(BFloat16Bits) if dtype_name(tensor.dtype) in BITS_VIEW else array


class SimulatedKernel(Overloads):
    """A numba kernel that launches in portkit's simulator (``kernel[grid, block](...)``)."""

    def __init__(
        self,
        dispatcher: Any,
        engine: str | None = None,
        budget: float | None = None,
        schedule: str | None = None,
        signature: Any = None,
        typecheck: bool = True,
    ) -> None:
        if not hasattr(dispatcher, "py_func"):
            raise LaunchError(
                f"simulate() takes a numba.cuda.jit kernel, got {type(dispatcher).__name__}"
            )
        if getattr(dispatcher, "targetoptions", {}).get("device"):
            raise LaunchError(
                f"{dispatcher.py_func.__name__} is a device function (device=True): a GPU "
                f"launches kernels only; call it from a kernel"
            )
        self.dispatcher = dispatcher
        self.py_func = dispatcher.py_func
        self.__name__ = self.py_func.__name__
        self.__doc__ = self.py_func.__doc__
        self._engine, self._budget = engine, budget
        self._typecheck = typecheck  # numba's verdict first (simt/numba_check.py)
        self.debug = False  # cuda.jit(debug=True): float division by zero raises
        self._schedule = checked(schedule)  # fails at simulate(), not at the first launch
        self._machine: Any = None
        self._sourceless: bool | None = None  # no source to rewrite: numba's simulator
        self.engines: list[Any] = []  # which engine ran each launch, and why
        self.warnings: list[Any] = []  # the launches' SimWarnings (simt/warning_log.py)
        self.overloads: dict[tuple[Any, ...], Any] = {}
        self.extensions: list[Any] = []  # numba's argument extensions (arg_hints.py)
        self.specialized = signature is not None
        self._one = signature is not None and not isinstance(signature, list)
        for argtypes in declared_signatures(signature) if signature is not None else ():
            self.add_overload(argtypes)

    @property
    def targetoptions(self) -> dict:
        return getattr(self.dispatcher, "targetoptions", {"device": False})

    def __getitem__(self, configuration: Any) -> _Launch:
        items = configuration if isinstance(configuration, tuple) else (configuration,)
        if not 2 <= len(items) <= 4:
            raise LaunchError(
                f"kernel {self.__name__}: launch with [grid, block], [grid, block, stream] or "
                f"[grid, block, stream, shared_bytes], got [{configuration!r}]"
            )
        check_dimensions(self.__name__, items[0], items[1])
        shared = int(items[3]) if len(items) == 4 else 0
        return _Launch(self, launch_config((items[0], items[1], shared), self.__name__))

    def forall(self, ntasks: int, tpb: int = 0, stream: Any = 0, sharedmem: int = 0) -> _Launch:
        if ntasks < 0:
            raise ValueError(f"Can't create ForAll with negative task count: {ntasks}")
        tpb = tpb or 128
        return self[max(1, -(-int(ntasks) // tpb)), tpb, stream, sharedmem]

    def specialize(self, *args: Any) -> SimulatedKernel:
        """numba compiles for these argument types; the simulator needs no types."""
        return self

    def bind(self) -> None:
        return None

    def __call__(self, *args: Any) -> Any:
        raise unconfigured(self.__name__)

    def run(self, config: Any, args: Sequence[Any]) -> None:
        from portkit.simt.machine import Machine

        if self._sourceless is None:
            self._sourceless = not has_source(self.py_func)
        if self._sourceless:
            self._run_in_numbas_simulator(config, args)
            return
        if self._machine is None:
            # debug: per thread, so a masked-off lane's division never raises
            engine = "per-thread" if self.debug else self._engine
            self._machine = Machine(engine=engine, budget=self._budget, schedule=self._schedule)
            self._machine.divide = "raise" if self.debug else "ignore"
        machine = self._machine
        args = prepared(self.extensions, args)
        try:
            code = self.py_func.__code__
            names = code.co_varnames[: code.co_argcount]
            if len(args) != len(names):
                raise LaunchTypeError(
                    f"kernel {self.__name__} takes {len(names)} arguments ({', '.join(names)}), "
                    f"launched with {len(args)}"
                )
            copies: list[HostCopy] = []
            host = [_host(self.__name__, n, a, copies) for n, a in zip(names, args)]
            if self.specialized:  # numba converts scalars to the declared types
                host = as_declared(self.__name__, host, list(self.overloads), self._one)
            else:
                self.add_overload(argument_types(host))
            if self._typecheck:
                machine.rewriter.rewrite(self.dispatcher)  # its numba rules say it better
                # numba compiles every declared signature, else the launch's argument types
                typed = list(self.overloads) if self.specialized else [launch_types(host)]
                for argtypes in typed:
                    check_launch(self.__name__, self.dispatcher, argtypes)
            # numba types a read-only array readonly and refuses to compile a store into
            # it: the kernel gets a writable copy here, and a store into it is the error.
            readonly = {
                i: h
                for i, h in enumerate(host)
                if isinstance(h, np.ndarray) and not h.flags.writeable
            }
            for i, array in readonly.items():
                host[i] = array.copy()
            try:
                machine.launch(self.__name__, self.dispatcher, config, host)
            finally:  # a fault leaves partial writes, as a NumPy argument keeps them
                for copy in copies:
                    copy.write_back()
            for i, array in readonly.items():
                if host[i].tobytes() != array.tobytes():
                    raise LaunchError(
                        f"kernel {self.__name__} stores into parameter {names[i]}, a read-only "
                        f"array: numba refuses to compile that; pass a writable array"
                    )
        finally:
            self.engines += machine.engines
            machine.engines.clear()
            for found in machine.warnings:  # shown as Python warnings, kept on the kernel
                warnings.warn(SimulatorWarning(found.one_line()), stacklevel=3)
            self.warnings += machine.warnings
            machine.warnings.clear()
            machine.records.clear()  # who-wrote-what is for portkit diff; do not keep it

    def _run_in_numbas_simulator(self, config: Any, args: Sequence[Any]) -> None:
        """A kernel with no source (built by ``exec()`` of a string) cannot be rewritten:
        numba's simulator runs the function object itself, as NUMBA_ENABLE_CUDASIM
        would, without portkit's checks."""
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        warnings.warn(
            f"kernel {self.__name__} has no source to rewrite (built by exec()?): it runs "
            f"in numba's simulator, without portkit's checks",
            stacklevel=3,
        )
        fake = FakeCUDAKernel(self.py_func, device=False)
        fake[config.grid, config.block, 0, config.shared_bytes](*args)


class _Launch:
    def __init__(self, kernel: SimulatedKernel, config: Any) -> None:
        self._kernel, self._config = kernel, config

    def __call__(self, *args: Any) -> None:
        self._kernel.run(self._config, args)


def simulate(
    kernel: Any,
    engine: str | None = None,
    budget: float | None = None,
    schedule: str | None = None,
    typecheck: bool = True,
) -> SimulatedKernel:
    """``kernel`` (a ``numba.cuda.jit`` kernel) launched in portkit's simulator.

    ``engine``: ``"auto"`` (default: lockstep where it applies), ``"lockstep"`` or
    ``"per-thread"``. ``budget``: seconds one launch may run before it stops with
    ``BudgetExceeded`` naming the spinning thread and line (default 300; 0: no limit).
    ``schedule``: ``"forward"`` (default: blocks and threads in index order) or
    ``"reversed"`` (both last to first): float atomics into one element then sum in
    the other order, so an order-dependent result shows as different bits.
    ``typecheck``: before a launch runs, numba's CUDA compiler is asked whether the
    kernel compiles for its argument types (once per types; ``NumbaRejects`` if not), so
    what a GPU would refuse is never green here; False skips it."""
    if isinstance(kernel, SimulatedKernel):
        return kernel
    return SimulatedKernel(kernel, engine, budget, schedule, typecheck=typecheck)
