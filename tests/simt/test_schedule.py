"""The simulator's schedules (portkit/simt/schedule.py): ``reversed`` runs blocks and the
threads of a block last to first in both engines, so float atomics into one element sum
in the other order (other bits), while integer atomics end with the same value."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from portkit.errors import KernelError
from portkit.simt import simulate

N = 100  # 4 blocks of 32 threads, the last one partly idle


@cuda.jit
def sum_all(src, total, hits, order, n):
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(total, 0, src[i])
        order[i] = cuda.atomic.add(hits, 0, 1)  # how many threads came before this one


@cuda.jit
def sum_all_after_barrier(src, total, hits, order, n):
    i = cuda.grid(1)
    cuda.syncthreads()  # a kernel that waits: the per-thread engine runs generators
    if i < n:
        cuda.atomic.add(total, 0, src[i])
        order[i] = cuda.atomic.add(hits, 0, 1)


def _values() -> np.ndarray:
    """One large value among many small ones: float32 loses the small ones added after
    the large one, and keeps them added before it."""
    src = np.ones(N, np.float32)
    src[0] = 1e8
    return src


def _sequential(values: np.ndarray) -> np.float32:
    total = np.float32(0)
    for v in values:
        total = np.float32(total + v)
    return total


def _run(kernel, engine: str, schedule: str | None):
    src = _values()
    total, hits = np.zeros(1, np.float32), np.zeros(1, np.int32)
    order = np.full(N, -1, np.int32)
    launched = simulate(kernel, engine=engine, schedule=schedule)
    launched[4, 32](src, total, hits, order, N)
    return launched, total, hits, order


@pytest.mark.parametrize("kernel", [sum_all, sum_all_after_barrier])
@pytest.mark.parametrize("engine", ["lockstep", "per-thread"])
def test_the_reversed_schedule_sums_floats_in_the_other_order(kernel, engine):
    src = _values()
    forward = _run(kernel, engine, None)
    backward = _run(kernel, engine, "reversed")
    assert forward[0].engines[-1].engine == backward[0].engines[-1].engine == engine
    assert forward[1][0] == _sequential(src)
    assert backward[1][0] == _sequential(src[::-1])
    assert forward[1].tobytes() != backward[1].tobytes()
    assert forward[2].tolist() == backward[2].tolist() == [N]  # integers: exact in any order
    assert forward[3].tolist() == list(range(N))
    assert backward[3].tolist() == list(range(N))[::-1]


def test_an_unknown_schedule_is_refused_at_simulate():
    with pytest.raises(KernelError, match=r"unknown simulator schedule 'random': one of"):
        simulate(sum_all, schedule="random")
