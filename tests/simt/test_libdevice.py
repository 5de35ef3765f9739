"""``numba.cuda.libdevice`` in the simulator: its stubs returned None (NaN once stored);
now the functions the simulator can compute run as ``math.*`` does there, and the rest
are refused by name (the same kernel runs on a GPU in test_simt_gpu.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda
from numba.cuda import libdevice

from portkit.errors import KernelError
from portkit.simt import simulate
from portkit.simt.libdevice import simulated_libdevice
from tests.simt import kernels as K

ENGINES = ["per-thread", "lockstep"]


@pytest.mark.parametrize("engine", ENGINES)
def test_libdevice_functions_compute_what_the_gpu_does(engine):
    x = np.array([1.5, -2.5, 0.0, 0.3, -0.2], np.float64)
    n = np.array([-1, 3, 0, 12, -7], np.int32)
    out, out32 = np.zeros((5, 6), np.float64), np.zeros(5, np.float32)
    simulate(K.libdevice_calls, engine=engine)[1, 32](x, n, out, out32)
    assert not np.isnan(out).any()
    np.testing.assert_allclose(out[:, 0], np.exp(x), rtol=1e-15)
    np.testing.assert_allclose(out32, (x.astype(np.float32) ** 2), rtol=1e-6)
    assert out[:, 1].tolist() == [3.0, -6.0, 0.0, 0.0, -0.0]  # toward zero
    assert out[:, 2].tolist() == [4.0, -6.0, 0.0, 1.0, -1.0]  # halves away from zero
    assert out[:, 3].tolist() == np.maximum(x, 0).tolist()
    assert out[:, 4].tolist() == [7, 3, 0, 7, 7]  # -1 and -7 are huge unsigned
    unsigned = n.astype(np.int64) & 0xFFFFFFFF
    popc_clz = [bin(v).count("1") + 32 - v.bit_length() for v in unsigned.tolist()]
    assert out[:, 5].tolist() == popc_clz


def test_integer_results_wrap_as_the_gpu_holds_them():
    def call(name, *args):
        return int(simulated_libdevice(getattr(libdevice, name))(*args))

    assert call("brev", 1) == -(2**31)  # int32: bit 31 set
    assert call("abs", -(2**31)) == -(2**31)
    assert call("umax", -1, 3) == -1  # 0xFFFFFFFF read back as int32
    assert call("popcll", -1) == 64 and call("clzll", 1) == 63 and call("ffs", 8) == 4


@pytest.mark.parametrize("name", ["fast_expf", "sincos", "frexp", "fadd_rz"])
def test_a_function_it_cannot_match_is_refused_by_name(name):
    with pytest.raises(KernelError, match=rf"libdevice\.{name} is not simulated"):
        simulated_libdevice(getattr(libdevice, name))(1.0, 1.0)


@cuda.jit
def uses_fast_exp(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = libdevice.fast_expf(x[i])


@pytest.mark.parametrize("engine", ENGINES)
def test_a_kernel_calling_an_unsimulated_function_fails_naming_it(engine):
    x, out = np.ones(4, np.float32), np.zeros(4, np.float32)
    with pytest.raises(Exception, match="libdevice.fast_expf is not simulated"):
        simulate(uses_fast_exp, engine=engine)[1, 32](x, out)
    assert math.isfinite(float(out.sum()))
