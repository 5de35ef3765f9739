"""What third-party kernels (tests/simt/third_party/) showed, each pinned here in small
kernels of our own, both engines: numba's meaning of a literal negative index, a lambda
compiled as a device function, syncwarp and votes that exited lanes do not hold up, a
race whose write stored the value the element held (a warning), and the lockstep engine
handing over only on its own ``Unsupported`` signal."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numba import cuda

from portkit.launch.kernel_set import LaunchConfig
from portkit.simt import simulate
from portkit.simt.machine import Machine
from portkit.simt.records import SimulationFault
from portkit.simt.warning_log import SimulatorWarning

ENGINES = ["per-thread", "lockstep"]


@cuda.jit
def last_of_each_row(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i, -1] + x[-1, 0]  # literal negative indices: from the end, as numba


@cuda.jit
def shape_from_the_end(x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        shape = x.shape
        out[i] = shape[-1]  # a tuple: Python's -1


@cuda.jit
def computed_negative(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i - 1]  # at i == 0: x[-1], a boundary bug the simulator reports


@pytest.mark.parametrize("engine", ENGINES)
def test_a_literal_negative_index_counts_from_the_end(engine):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = np.zeros(4, np.float32)
    simulate(last_of_each_row, engine=engine)[1, 8](x, out)
    np.testing.assert_array_equal(out, x[:, -1] + x[-1, 0])
    dims = np.zeros(2, np.int64)
    simulate(shape_from_the_end, engine=engine)[1, 8](x, dims)
    np.testing.assert_array_equal(dims, [3, 3])


@pytest.mark.parametrize("engine", ENGINES)
def test_a_computed_negative_index_is_still_reported(engine):
    x = np.arange(8, dtype=np.float32)
    with pytest.raises(SimulationFault, match=r"x\[-1\].*negative index"):
        simulate(computed_negative, engine=engine)[1, 8](x, np.zeros(8, np.float32))


def make_lambda_kernel():
    add = cuda.jit(device=True)(lambda a, b: a + b)

    @cuda.jit
    def fold(x, out):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = add(x[i], x[i + 1])

    return fold


@pytest.mark.parametrize("engine", ENGINES)
def test_a_lambda_device_function_runs_as_numba_compiles_it(engine):
    x = np.arange(9, dtype=np.float64)
    out = np.zeros(8)
    simulate(make_lambda_kernel(), engine=engine)[1, 8](x, out)
    np.testing.assert_array_equal(out, x[:-1] + x[1:])


@cuda.jit
def syncwarp_after_others_exit(x, out):
    tid = cuda.threadIdx.x
    if tid < 2:
        out[tid] = x[tid] + x[tid + 2]
        cuda.syncwarp()  # full mask; lanes 2-31 exit without reaching it (cuda.reduce)
        out[tid] += 1


@pytest.mark.parametrize("engine", ENGINES)
def test_syncwarp_is_not_held_up_by_exited_lanes(engine):
    x = np.arange(4, dtype=np.float32)
    out = np.zeros(2, np.float32)
    simulate(syncwarp_after_others_exit, engine=engine)[1, 32](x, out)
    np.testing.assert_array_equal(out, [3, 5])


@cuda.jit
def everyone_reads_what_lane0_rewrites(ary):
    i = cuda.grid(1)
    if i == 0:
        ary[0] = 42
    cuda.syncwarp(0xFFFFFFFF)
    ary[i] = ary[0]  # lane 0 stores 42 over 42 while the others read it


@cuda.jit
def everyone_reads_what_lane0_changes(ary):
    i = cuda.grid(1)
    if i == 0:
        ary[0] = 42
    cuda.syncwarp(0xFFFFFFFF)
    if i == 5:
        ary[0] = 7  # lane 5 changes it while the others read it: a race
    else:
        ary[i] = ary[0]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_read_racing_with_a_write_of_the_value_held_is_a_warning(engine):
    ary = np.zeros(32, np.int32)
    kernel = simulate(everyone_reads_what_lane0_rewrites, engine=engine)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel[1, 32](ary)
    assert (ary == 42).all()
    kinds = {str(w.message).split("]")[0] for w in caught if w.category is SimulatorWarning}
    assert kinds == {"[same-value-race"}


@pytest.mark.parametrize("engine", ENGINES)
def test_a_read_racing_with_a_write_of_another_value_is_an_error(engine):
    with pytest.raises(SimulationFault, match="data race"):
        simulate(everyone_reads_what_lane0_changes, engine=engine)[1, 32](np.zeros(32, np.int32))


@pytest.mark.parametrize("engine", ENGINES)
def test_strict_mode_keeps_the_same_value_read_race_an_error(engine):
    kernel = everyone_reads_what_lane0_rewrites
    config = LaunchConfig((1, 1, 1), (32, 1, 1), 0)
    with pytest.raises(SimulationFault, match="data race"):
        Machine(engine=engine, strict=True).launch("k", kernel, config, [np.zeros(32, np.int32)])


def test_an_engine_failure_is_not_hidden_as_a_fallback(monkeypatch):
    """Only the engine's own Unsupported hands a launch to the per-thread engine: an
    unforeseen exception of the lockstep engine's code (here: its launch) surfaces."""
    from portkit.simt.lockstep import LockstepEngine

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug in the engine")

    monkeypatch.setattr(LockstepEngine, "launch", broken)
    with pytest.raises(ZeroDivisionError, match="a bug in the engine"):
        simulate(syncwarp_after_others_exit, engine="lockstep")[1, 32](
            np.zeros(4, np.float32), np.zeros(2, np.float32)
        )
