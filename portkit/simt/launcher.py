"""Any ``numba.cuda.jit`` kernel in portkit's simulator, launched with numba's syntax.

    from portkit.simt import simulate
    simulate(kernel)[blocks, threads](x, out, n)
    simulate(kernel)[blocks, threads, stream, shared_bytes](x, out, n)

Arguments are NumPy arrays, CPU tensors, numba's simulator arrays (``to_device``
under ``simulated_cuda()``) or scalars; arrays are written in place. Every check is
on; a kernel bug raises ``SimulationFault`` (a ``portkit.errors.KernelError``) naming
the kernel, the array and index, the block, the thread, the line, and for a race the
other thread and its line. The lockstep engine runs where it applies, the per-thread
engine elsewhere (``SimulatedKernel.engines`` says which ran, and why).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from portkit.errors import LaunchError
from portkit.launch.kernel_set import launch_config


def _host(value: Any) -> Any:
    """A launch argument as the machine takes it: NumPy arrays (views, so writes land)."""
    if isinstance(value, np.ndarray):
        return value
    inner = getattr(value, "_ary", None)  # numba's simulator arrays (FakeCUDAArray)
    if isinstance(inner, np.ndarray):
        return inner
    module = type(value).__module__
    if module.startswith("torch"):
        if value.device.type != "cpu":
            raise LaunchError("simulate() takes CPU tensors; move it with .cpu() first")
        return value.detach().numpy()
    if hasattr(value, "__array_interface__") and not np.isscalar(value):
        return np.asarray(value)
    return value


class SimulatedKernel:
    """A numba kernel that launches in portkit's simulator (``kernel[grid, block](...)``)."""

    def __init__(
        self, dispatcher: Any, engine: str | None = None, budget: float | None = None
    ) -> None:
        if not hasattr(dispatcher, "py_func"):
            raise LaunchError(
                f"simulate() takes a numba.cuda.jit kernel, got {type(dispatcher).__name__}"
            )
        self.dispatcher = dispatcher
        self.py_func = dispatcher.py_func
        self.__name__ = self.py_func.__name__
        self.__doc__ = self.py_func.__doc__
        self._engine, self._budget = engine, budget
        self._machine: Any = None
        self.engines: list[Any] = []  # which engine ran each launch, and why

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
        raise LaunchError(
            f"kernel {self.__name__} needs a launch configuration: "
            f"{self.__name__}[grid, block](...)"
        )

    def run(self, config: Any, args: Sequence[Any]) -> None:
        from portkit.simt.machine import Machine

        if self._machine is None:
            self._machine = Machine(engine=self._engine, budget=self._budget)
        machine = self._machine
        try:
            machine.launch(self.__name__, self.dispatcher, config, [_host(a) for a in args])
        finally:
            self.engines += machine.engines
            machine.engines.clear()
            machine.records.clear()  # who-wrote-what is for portkit diff; do not keep it


class _Launch:
    def __init__(self, kernel: SimulatedKernel, config: Any) -> None:
        self._kernel, self._config = kernel, config

    def __call__(self, *args: Any) -> None:
        self._kernel.run(self._config, args)


def simulate(
    kernel: Any, engine: str | None = None, budget: float | None = None
) -> SimulatedKernel:
    """``kernel`` (a ``numba.cuda.jit`` kernel) launched in portkit's simulator.

    ``engine``: ``"auto"`` (default: lockstep where it applies), ``"lockstep"`` or
    ``"per-thread"``. ``budget``: seconds one launch may run before it stops with
    ``BudgetExceeded`` naming the spinning thread and line (default 300; 0: no limit)."""
    if isinstance(kernel, SimulatedKernel):
        return kernel
    return SimulatedKernel(kernel, engine, budget)
