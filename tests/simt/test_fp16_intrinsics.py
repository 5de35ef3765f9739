"""``numba.cuda.fp16`` in portkit's simulator: each intrinsic against an exact reference
(float16 rounded once per operation, fused for hfma), in both engines."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from numba import cuda
from numba.cuda import fp16
from numba.cuda.fp16 import hadd as imported_hadd

import portkit.simt as simt
from portkit.errors import KernelError

ENGINES = ["lockstep", "per-thread"]
BINARY = ("hadd", "hsub", "hmul", "hdiv")


@cuda.jit
def arithmetic(out, a, b, c):
    i = cuda.grid(1)
    if i < a.size:
        out[0, i] = cuda.fp16.hadd(a[i], b[i])
        out[1, i] = cuda.fp16.hsub(a[i], b[i])
        out[2, i] = cuda.fp16.hmul(a[i], b[i])
        out[3, i] = cuda.fp16.hdiv(a[i], b[i])
        out[4, i] = cuda.fp16.hfma(a[i], b[i], c[i])
        out[5, i] = cuda.fp16.hneg(a[i])
        out[6, i] = cuda.fp16.habs(a[i])
        out[7, i] = cuda.fp16.hmax(a[i], b[i])
        out[8, i] = cuda.fp16.hmin(a[i], b[i])


@cuda.jit
def comparisons(out, a, b):
    i = cuda.grid(1)
    if i < a.size:
        out[0, i] = cuda.fp16.heq(a[i], b[i])
        out[1, i] = cuda.fp16.hne(a[i], b[i])
        out[2, i] = cuda.fp16.hlt(a[i], b[i]) and fp16.hge(b[i], a[i])
        out[3, i] = cuda.fp16.hgt(a[i], b[i]) or fp16.hle(a[i], b[i])


@cuda.jit
def functions(out, x):
    i = cuda.grid(1)
    if i < x.size:
        out[0, i] = fp16.hsin(x[i])
        out[1, i] = fp16.hexp10(x[i])
        out[2, i] = fp16.hsqrt(x[i])
        out[3, i] = fp16.hfloor(x[i])
        out[4, i] = fp16.hrint(x[i])
        out[5, i] = imported_hadd(x[i], x[i])


@cuda.jit
def unsimulated(out, x):
    out[0] = cuda.fp16.atomicAdd(out, 0, x[0])


def _nearest_half(exact: Fraction) -> np.float16:
    """The float16 nearest ``exact``, ties to even: the correctly rounded result."""
    guess = np.float16(float(exact))
    candidates = [np.nextafter(guess, np.float16(-np.inf)), guess]
    candidates.append(np.nextafter(guess, np.float16(np.inf)))
    finite = [h for h in candidates if np.isfinite(h)]
    best = min(finite, key=lambda h: (abs(Fraction(float(h)) - exact), int(h.view(np.uint16)) & 1))
    if abs(exact) >= Fraction(65520):  # past the largest float16 plus half an ULP: inf
        return np.float16(math.copysign(math.inf, exact))
    return best


def _inputs(n: int, seed: int) -> np.ndarray:
    """Random float16 values over a few binades, so that fused and rounded-twice differ."""
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.5, 4.0, n) * rng.choice([-1, 1], n)
    return values.astype(np.float16)


@pytest.mark.parametrize("engine", ENGINES)
def test_arithmetic_rounds_once_per_operation(engine):
    n = 256
    a, b, c = _inputs(n, 1), _inputs(n, 2), _inputs(n, 3)
    out = np.zeros((9, n), np.float16)
    kernel = simt.simulate(arithmetic, engine)
    kernel[4, 64](out, a, b, c)
    assert kernel.engines[0].engine == engine  # the lanes take fp16 too: no fallback
    operations = {
        "hadd": lambda x, y: x + y,
        "hsub": lambda x, y: x - y,
        "hmul": lambda x, y: x * y,
        "hdiv": lambda x, y: x / y,
    }
    exact = [[Fraction(float(v)) for v in column] for column in (a, b, c)]
    for row, name in enumerate(BINARY):
        expected = [_nearest_half(operations[name](x, y)) for x, y in zip(exact[0], exact[1])]
        np.testing.assert_array_equal(out[row], expected, err_msg=name)
    fused = [_nearest_half(x * y + z) for x, y, z in zip(*exact)]
    np.testing.assert_array_equal(out[4], fused)
    twice = (a * b) + c  # NumPy float16: rounded after the product and after the sum
    assert np.count_nonzero(out[4] != twice) > 0  # the inputs tell fused from unfused
    np.testing.assert_array_equal(out[5], -a)
    np.testing.assert_array_equal(out[6], np.abs(a))
    np.testing.assert_array_equal(out[7], np.maximum(a, b))
    np.testing.assert_array_equal(out[8], np.minimum(a, b))
    assert out.dtype == np.float16


@pytest.mark.parametrize("engine", ENGINES)
def test_max_min_and_comparisons_follow_cuda_for_nan_and_zeros(engine):
    nan, inf = np.float16(np.nan), np.float16(np.inf)
    a = np.array([nan, 1.0, nan, 0.0, -0.0, 2.0, -inf], np.float16)
    b = np.array([1.0, nan, nan, -0.0, 0.0, 2.0, 3.0], np.float16)
    out = np.zeros((9, a.size), np.float16)
    simt.simulate(arithmetic, engine)[1, 32](out, a, b, a)
    np.testing.assert_array_equal(out[7][[0, 1, 5, 6]], [1.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(out[8][[0, 1, 5, 6]], [1.0, 1.0, 2.0, -inf])
    assert np.isnan(out[7][2]) and np.isnan(out[8][2])
    # __hmax orders +0 above -0, whichever comes first; __hmin the other way
    assert not np.signbit(out[7][3]) and not np.signbit(out[7][4])
    assert np.signbit(out[8][3]) and np.signbit(out[8][4])
    truth = np.zeros((4, a.size), np.bool_)
    simt.simulate(comparisons, engine)[1, 32](truth, a, b)
    ordered = ~(np.isnan(a) | np.isnan(b))
    np.testing.assert_array_equal(truth[0], a == b)
    np.testing.assert_array_equal(truth[1], (a != b) & ordered)  # __hne is ordered
    np.testing.assert_array_equal(truth[2], a < b)
    np.testing.assert_array_equal(truth[3], (a > b) | (a <= b))


@pytest.mark.parametrize("engine", ENGINES)
def test_math_is_the_float32_function_rounded_to_half(engine):
    x = np.linspace(-1.5, 3.5, 96).astype(np.float16)
    x = np.abs(x)  # hsqrt's domain
    out = np.zeros((6, x.size), np.float16)
    simt.simulate(functions, engine)[3, 32](out, x)

    def rounded(function):
        return np.array([np.float16(np.float32(function(float(v)))) for v in x])

    np.testing.assert_array_equal(out[0], rounded(math.sin))
    np.testing.assert_array_equal(out[1], rounded(lambda v: 10.0**v))
    np.testing.assert_array_equal(out[2], rounded(math.sqrt))
    np.testing.assert_array_equal(out[3], np.floor(x))
    np.testing.assert_array_equal(out[4], np.rint(x))
    np.testing.assert_array_equal(out[5], x + x)


def test_an_unsimulated_fp16_function_is_one_line():
    with pytest.raises(KernelError) as caught:
        # numba itself has no implementation of it for these types (its type check says
        # so first); without that check the simulator still names it
        simt.simulate(unsimulated, "per-thread", typecheck=False)[1, 1](
            np.zeros(1, np.float16), np.ones(1, np.float16)
        )
    message = str(caught.value)
    assert "numba.cuda.fp16.atomicAdd is not simulated" in message and "\n" not in message
