"""The simulator counts float atomic sums per element (portkit/simt/tally.py): the same
counts from both engines, once per launch even when lockstep gives up and the launch is
re-run per thread, and no count for integer atomics or float max."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from portkit.launch.kernel_set import launch_config
from portkit.simt.machine import Machine


@cuda.jit
def scatter(src, out, hits, peak, n):
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(out, i % 3, src[i])
        cuda.atomic.add(hits, i % 3, 1)
        cuda.atomic.max(peak, 0, src[i])


@cuda.jit
def scatter_twice(src, out, n):
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(out, i % 3, src[i])
        cuda.atomic.sub(out, i % 3, src[i])  # a second atomic statement: lockstep refuses


def _run(kernel, engine: str, *args):
    machine = Machine(engine=engine)
    machine.launch(kernel.py_func.__name__, kernel, launch_config((4, 32, 0), "k"), list(args))
    return machine


@pytest.mark.parametrize("engine", ["lockstep", "per-thread"])
def test_counts_and_magnitudes_of_float_sums(engine):
    src = np.linspace(-1, 1, 100).astype(np.float32)
    out = np.array([0.5, 0, 0], np.float32)
    hits = np.zeros(3, np.int32)
    peak = np.full(1, -9, np.float32)
    machine = _run(scatter, engine, src, out, hits, peak, 100)
    assert machine.engines[-1].engine == engine
    count, magnitude = machine.tally.counts(out.ctypes.data, 4, 3)
    index = np.arange(100) % 3
    assert count.tolist() == np.bincount(index).tolist()
    assert not machine.tally.counts(peak.ctypes.data, 4, 1)[0].any()  # max is exact
    expected = [abs(src[index == k].astype(np.float64)).sum() for k in range(3)]
    np.testing.assert_allclose(magnitude, np.add(expected, [0.5, 0, 0]), rtol=1e-12)
    assert not machine.tally.counts(hits.ctypes.data, 4, 3)[0].any()  # integers: exact


def test_a_launch_lockstep_gives_up_on_is_counted_once():
    src = np.linspace(-1, 1, 100).astype(np.float32)
    counts, reasons = {}, {}
    for engine in ("auto", "per-thread"):
        out = np.zeros(3, np.float32)
        machine = _run(scatter_twice, engine, src, out, 100)
        counts[engine] = machine.tally.counts(out.ctypes.data, 4, 3)[0].tolist()
        reasons[engine] = machine.engines[-1].reason
    assert reasons["auto"].startswith("re-run per thread")  # lockstep ran part of it first
    assert counts["auto"] == counts["per-thread"] == (2 * np.bincount(np.arange(100) % 3)).tolist()
