"""A kernel built by ``exec()`` of a string (numba-cuda's test_atomics builds its min/max
kernels so) has no source for portkit's rewrite: it runs in numba's simulator instead,
with a warning that portkit's checks are off for it."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import portkit.simt as simt

SOURCE = """
def atomic_max(res, ary):
    tx = cuda.threadIdx.x
    cuda.atomic.max(res, 0, ary[tx])
"""


def test_a_kernel_built_by_exec_runs_in_numbas_simulator_with_a_warning():
    built: dict = {}
    exec(SOURCE, {"cuda": cuda}, built)
    ary = np.random.default_rng(0).random(32)
    res = np.zeros(1, np.float64)
    with simt.simulated_cuda():
        kernel = cuda.jit(built["atomic_max"])
        with pytest.warns(UserWarning, match="atomic_max has no source.*numba's simulator"):
            kernel[1, 32](res, ary)
    assert res[0] == ary.max()


def test_cuda_reduce_takes_a_lambda_and_a_def():
    # numba-cuda's test_reduction reduces with lambdas; the switch makes cuda.reduce
    # numba's simulator's host reduction, which calls the function as it is.
    values = np.arange(1, 101, dtype=np.float64)
    with simt.simulated_cuda():
        total = cuda.reduce(lambda a, b: a + b)

        @cuda.reduce
        def largest(a, b):
            return max(a, b)

        assert total(values) == values.sum()
        assert total(values, init=10) == values.sum() + 10
        assert largest(values[::-1].copy()) == values.max()
