"""The simulator types `math` as numba does, so float32 constants cannot demote float64 work."""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

from portkit.backends.numba_sim.functions import TYPED_MATH, SimulatedFunctions


@cuda.jit
def plus_one_exp(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = float32(1) + math.exp(x[i])


def test_typed_math_returns_the_argument_float_type():
    assert type(TYPED_MATH.exp(np.float32(0.5))) is np.float32
    assert type(TYPED_MATH.exp(np.float64(0.5))) is np.float64
    assert TYPED_MATH.pi == math.pi
    # Python's own math hands back a Python float, which NumPy 2 lets float32 absorb:
    assert type(np.float32(1) + math.exp(np.float64(0.1))) is np.float32


def test_float64_kernel_with_float32_constant_keeps_float64_precision():
    x = np.linspace(-3, 3, 64)
    out = np.zeros_like(x)
    kernel = SimulatedFunctions().simulated(plus_one_exp)
    kernel[2, 32](x, out, x.size)
    np.testing.assert_allclose(out, 1 + np.exp(x), rtol=1e-15, atol=0)
