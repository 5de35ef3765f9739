"""Float atomic sums in the lockstep engine run in rounds (lockstep/float_sums.py): every
element's contributions in thread order, bit for bit the per-thread engine's, in both
schedules, with the same tally (count, summed magnitudes, initial value per element)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from portkit.launch.kernel_set import LaunchConfig
from portkit.simt.lockstep import float_sums as rounds
from portkit.simt.machine import LOCKSTEP, PER_THREAD, Machine


@cuda.jit
def scatter_add(dout, idx, dweight, n, dim):
    # tests/user_ops' embedding backward: rows repeat, so elements get several sums
    i = cuda.grid(1)
    if i < n * dim:
        r = i // dim
        c = i - r * dim
        cuda.atomic.add(dweight, (idx[r], c), dout[r, c])


@cuda.jit
def scatter_sub_scalar(idx, out, olds, n):
    i = cuda.grid(1)
    if i < n:
        olds[i] = cuda.atomic.sub(out, idx[i], 0.1)  # a float64 literal cast to out's type


def _run(engine, schedule, kernel, args, threads, total):
    machine = Machine(engine=engine, schedule=schedule, lockstep_fallback="error")
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    config = LaunchConfig((-(-total // threads), 1, 1), (threads, 1, 1), 0)
    machine.launch(kernel.__name__, kernel, config, copies)
    assert machine.engines[-1].engine == engine and not machine.engines[-1].fallback
    tally = {k: repr(v) for k, v in machine.tally.elements.items()}  # NaN equals NaN
    return copies, tally


def _both(kernel, args, threads, total, schedule, out, tallied=None):
    slow, slow_tally = _run(PER_THREAD, schedule, kernel, args, threads, total)
    fast, fast_tally = _run(LOCKSTEP, schedule, kernel, args, threads, total)
    assert slow[out].tobytes() == fast[out].tobytes()
    # the tally is keyed by address: compare it by element of the output
    summed = out if tallied is None else tallied

    def by_element(copies, tally):
        base = copies[summed].ctypes.data
        return {(k - base) // copies[summed].itemsize: v for k, v in tally.items()}

    assert by_element(slow, slow_tally) == by_element(fast, fast_tally)
    return fast[out]


@pytest.mark.parametrize("schedule", ["forward", "reversed"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_scatter_add_matches_per_thread_with_its_tally(dtype, schedule):
    rng = np.random.default_rng(0)
    n, dim, rows = 300, 8, 20
    dout = (rng.standard_normal((n, dim)) * 10.0 ** rng.integers(-3, 4, (n, dim))).astype(dtype)
    dout[0, 0], dout[1, 1] = np.inf, -np.inf  # an inf, and inf + -inf: NaN from then on
    idx = rng.integers(0, rows, n)
    out = _both(
        scatter_add, [dout, idx, np.zeros((rows, dim), dtype), n, dim], 128, n * dim, schedule, 2
    )
    assert np.isfinite(out).sum() > rows * dim - 4


def test_many_contributions_and_nans_take_the_lane_loop_with_the_same_bits(monkeypatch):
    monkeypatch.setattr(rounds, "MAX_ROUNDS", 4)
    rng = np.random.default_rng(1)
    n, dim, rows = 200, 4, 3
    dout = rng.standard_normal((n, dim)).astype(np.float32)
    dout[5, 2] = np.nan
    idx = rng.integers(0, rows, n)
    _both(scatter_add, [dout, idx, np.zeros((rows, dim), np.float32), n, dim], 64, n * dim,
          "forward", 2)  # fmt: skip


def test_atomic_sub_of_a_scalar_and_its_old_values_match():
    idx = np.random.default_rng(2).integers(0, 7, 500)
    args = [idx, np.ones(7, np.float32), np.zeros(500, np.float32), 500]
    _both(scatter_sub_scalar, args, 128, 500, "forward", 1)
    _both(scatter_sub_scalar, args, 128, 500, "reversed", 2, tallied=1)  # old values too
