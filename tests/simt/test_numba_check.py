"""``simulate()`` asks numba's CUDA compiler first: a kernel numba refuses for the launch's
argument types is ``NumbaRejects``, one line naming the kernel, its own file and line and
numba's reason, before the simulator would run it green; kernels numba compiles run, and
the verdict is asked once per kernel and argument types."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from numba import cuda, int32

from portkit.simt import simulate
from portkit.simt.numba_check import NumbaRejects, forget


@pytest.fixture(autouse=True)
def fresh():
    forget()
    yield
    forget()


@cuda.jit
def mixed_selp(x, out):
    i = cuda.grid(1)
    out[i] = cuda.selp(i % 2 == 0, x[i], -x[i])  # int32 and int64: numba has no such selp


@cuda.jit
def alike_selp(x, out):
    i = cuda.grid(1)
    out[i] = cuda.selp(i % 2 == 0, x[i], int32(-x[i]))


@cuda.jit
def formats(x):
    i = cuda.grid(1)
    if i == 0:
        print(f"x0={x[0]}")  # numba-cuda has no f-strings


@cuda.jit
def returns(x):
    return x[cuda.grid(1)]


def _line(kernel, text: str) -> int:
    source, first = inspect.getsourcelines(kernel.py_func)
    return first + next(k for k, line in enumerate(source) if text in line)


def test_a_kernel_numba_refuses_is_one_line_before_it_runs():
    x, out = np.arange(32, dtype=np.int32), np.zeros(32, np.int64)
    with pytest.raises(NumbaRejects) as caught:
        simulate(mixed_selp)[1, 32](x, out)
    message = str(caught.value)
    assert message.startswith(f"kernel mixed_selp ({__file__}:")
    assert "numba cannot compile it for sm_90 with arguments (array(int32, 1d, C), " in message
    assert "no implementation of selp for selp(bool, int32, int64) (no match)" in message
    assert "\n" not in message and not out.any()  # nothing ran
    simulate(mixed_selp, typecheck=False)[1, 32](x, out)  # the simulator alone runs it
    assert out.tolist() == [v if v % 2 == 0 else -v for v in range(32)]


def test_the_place_is_the_kernels_not_numbas():
    """numba places an f-string's failure in its own unicode.py; the user's kernel is named."""
    with pytest.raises(NumbaRejects) as caught:
        simulate(formats)[1, 1](np.ones(2))
    assert f"({__file__}:{_line(formats, 'def formats')})" in str(caught.value)
    with pytest.raises(NumbaRejects, match="CUDA kernel must have void return type"):
        simulate(returns)[1, 1](np.ones(2))


def test_a_kernel_numba_compiles_runs_and_is_compiled_once_per_argument_types(ptx_compiles):
    x, out = np.arange(32, dtype=np.int32), np.zeros(32, np.int64)
    simulate(alike_selp)[1, 32](x, out)
    simulate(alike_selp)[1, 32](x, out)  # a new wrapper of the same kernel: asked already
    assert ptx_compiles == ["alike_selp"]
    wide = np.zeros(32, np.float64)
    simulate(alike_selp)[1, 32](x, wide)  # other argument types: asked again
    assert ptx_compiles == ["alike_selp", "alike_selp"]
    assert out.tolist() == wide.tolist() == [v if v % 2 == 0 else -v for v in range(32)]
