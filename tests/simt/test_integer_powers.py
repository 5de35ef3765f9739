"""A float raised to an integer as numba-cuda computes it (its typing's ``BinOpPower``:
float32 ** int is a float32; its ``int_power``: by squaring in the float's type, a
negative power ``1.0 / r`` in float64 rounded to the type). The simulator computed
NumPy's ``float32 ** int64``: a float64, rounded otherwise. Both engines; the same kernel
runs on a GPU in test_simt_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from portkit.simt import simulate
from portkit.simt.scalars import typed_pow
from tests.simt import kernels as K


def _squaring(x: np.floating, n: int) -> np.floating:
    """numba's int_power, written out: products in x's type, 1.0 / r for n < 0."""
    result, square, left = x.dtype.type(1), x, abs(n)
    while left:
        if left & 1:
            result = result * square
        left >>= 1
        square = square * square
    return x.dtype.type(1.0 / np.float64(result)) if n < 0 else result


@pytest.mark.parametrize("engine", ["per-thread", "lockstep"])
def test_float_powers_of_integers_are_computed_by_squaring_in_the_floats_type(engine):
    g = np.random.default_rng(7)
    x = (g.uniform(-2, 2, 40) + 1.5).astype(np.float32)
    y = g.standard_normal(40) + 1.5
    n = g.integers(-4, 9, 40).astype(np.int32)
    out32, out64 = np.zeros((40, 3), np.float32), np.zeros((40, 2))
    simulate(K.integer_powers, engine=engine)[1, 64](x, y, n, out32, out64)
    expected32 = [[_squaring(v, 3), _squaring(v, -2), _squaring(v, int(k))] for v, k in zip(x, n)]
    expected64 = [[_squaring(v, 5), _squaring(v, int(k))] for v, k in zip(y, n)]
    assert out32.tolist() == np.array(expected32, np.float32).tolist()
    assert out64.tolist() == np.array(expected64).tolist()
    # NumPy's float64 power rounds some of them otherwise: the test tells the two apart
    assert (out32[:, 0] != (x.astype(np.float64) ** 3).astype(np.float32)).any()


def test_other_operands_keep_pythons_power():
    assert type(typed_pow(np.float32(2), np.int64(3))) is np.float32
    assert type(typed_pow(np.float32(2), np.float64(0.5))) is np.float64  # float ** float64
    assert typed_pow(np.int64(3), np.int64(4)) == 81
    assert typed_pow(2.0, 3) == 8.0  # a Python float (a host value): Python's


def _builtin_pow(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = pow(x[i], 3)


@pytest.mark.parametrize("engine", ["per-thread", "lockstep"])
def test_the_builtin_pow_is_the_operator(engine):
    x = np.array([1.1, 3.3, -2.7, 0.3], np.float32)
    out = np.zeros(4)
    simulate(cuda.jit(_builtin_pow), engine=engine)[1, 4](x, out)
    assert out.tolist() == [float(_squaring(v, 3)) for v in x]
