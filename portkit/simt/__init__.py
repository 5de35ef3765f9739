"""portkit's own CUDA simulator: runs unmodified ``numba.cuda.jit`` kernels on the CPU with
every access checked (bounds, races, uninitialised memory, barriers, warp masks); see
docs/simulator.md for the map of its modules. Public: ``simulate(kernel)[grid, block](*args)``
runs any ``numba.cuda.jit`` kernel with every check on; ``simulated_cuda()`` makes
``numba.cuda`` simulated for code written against it (a test suite). Both import numba lazily."""

from __future__ import annotations

from typing import Any


def simulate(
    kernel: Any,
    engine: str | None = None,
    budget: float | None = None,
    schedule: str | None = None,
    typecheck: bool = True,
) -> Any:
    from portkit.simt.launcher import simulate as _simulate

    return _simulate(kernel, engine, budget, schedule, typecheck)


def simulated_cuda(engine: str | None = None, cc: Any = None) -> Any:
    from portkit.simt.numba_switch import simulated_cuda as _simulated_cuda

    return _simulated_cuda(engine, cc)


__all__ = ["simulate", "simulated_cuda"]
