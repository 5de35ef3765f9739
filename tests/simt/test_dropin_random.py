"""numba.cuda.random and record arrays under simulated_cuda(), written as a numba user
writes them; the draws are compared bit for bit with numba's own CPU implementation of
xoroshiro128+ (the same functions, numba.jit-compiled for the host)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import portkit.simt as simt
from portkit.simt.records import SimulationFault


def _draw_kernel(draw):
    @cuda.jit
    def kernel(states, out):
        i = cuda.grid(1)
        if i < out.shape[0]:
            for j in range(out.shape[1]):
                out[i, j] = draw(states, i)

    return kernel


@pytest.mark.parametrize("engine", ["lockstep", "per-thread"])
def test_xoroshiro_draws_are_bit_identical_to_numbas_cpu_generator(engine):
    from numba.cuda.random import (
        create_xoroshiro128p_states,
        xoroshiro128p_uniform_float32,
        xoroshiro128p_uniform_float64,
    )

    with simt.simulated_cuda(engine):
        draw32 = _draw_kernel(xoroshiro128p_uniform_float32)
        draw64 = _draw_kernel(xoroshiro128p_uniform_float64)
        n, k = 300, 4
        states = create_xoroshiro128p_states(n, seed=1234)
        start = states.copy_to_host()
        out32, out64 = np.zeros((n, k), np.float32), np.zeros((n, k), np.float64)
        draw32[3, 128](states, out32)
        draw64[3, 128](states, out64)
        assert draw32.engines[-1].engine == engine
    reference = start.copy()  # numba's CPU functions advance it as the GPU would
    ref32 = [[xoroshiro128p_uniform_float32(reference, i) for _ in range(k)] for i in range(n)]
    ref64 = [[xoroshiro128p_uniform_float64(reference, i) for _ in range(k)] for i in range(n)]
    np.testing.assert_array_equal(
        out32.view(np.uint32), np.array(ref32, np.float32).view(np.uint32)
    )
    np.testing.assert_array_equal(
        out64.view(np.uint64), np.array(ref64, np.float64).view(np.uint64)
    )
    np.testing.assert_array_equal(states.copy_to_host(), reference)
    assert len({float(v) for v in out32.ravel()}) > n * k // 2  # not one repeated value


def test_two_threads_drawing_from_one_state_race():
    from numba.cuda.random import create_xoroshiro128p_states, xoroshiro128p_uniform_float32

    with simt.simulated_cuda():

        @cuda.jit
        def shared_state(states, out):
            i = cuda.grid(1)
            out[i] = xoroshiro128p_uniform_float32(states, 0)

        states = create_xoroshiro128p_states(1, seed=1)
        with pytest.raises(SimulationFault, match="race"):
            shared_state[1, 2](states, np.zeros(2, np.float32))


def test_a_numba_jit_helper_called_from_a_kernel_runs_in_the_simulator():
    import numba

    @numba.jit
    def inverse(x):
        return 1.0 / x

    with simt.simulated_cuda():

        @cuda.jit
        def apply(x, out):
            i = cuda.grid(1)
            if i < x.size:
                out[i] = inverse(x[i])

        x = np.arange(1, 65, dtype=np.float64)
        out = np.zeros_like(x)
        apply[2, 32](x, out)
    np.testing.assert_array_equal(out, 1.0 / x)


def test_record_array_fields_and_whole_records():
    values = np.recarray((16,), dtype=[("value1", np.int64), ("value2", np.float64)])
    values.value1 = np.arange(16)
    values.value2 = np.arange(16) / 100
    with simt.simulated_cuda():

        @cuda.jit
        def read_fields(x, out1, out2):
            i = cuda.grid(1)
            if i < x.size:
                out1[i] = x.value1[i]
                out2[i] = x.value2[i] * 2

        @cuda.jit
        def shift(x):
            i = cuda.grid(1)
            if i + 1 < x.size:
                x[i + 1] = x[i]

        out1, out2 = np.zeros(16, np.int64), np.zeros(16, np.float64)
        read_fields[1, 16](values, out1, out2)
        np.testing.assert_array_equal(out1, np.arange(16))
        np.testing.assert_array_equal(out2, np.arange(16) / 50)
        with pytest.raises(SimulationFault, match="race"):  # thread i+1 reads what i writes
            shift[1, 16](values)
