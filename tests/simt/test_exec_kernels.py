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


def test_under_python_c_an_exec_kernel_is_not_taken_for_the_command_line(tmp_path):
    # numba-cuda's tests run so under scripts/run_numba_suite.py: "<string>" is the file
    # name of both the exec'd kernel and the -c program, whose text is not the kernel.
    import subprocess
    import sys
    from pathlib import Path

    program = (
        "import numpy as np, warnings; from numba import cuda; import portkit.simt as simt\n"
        f"built = {{}}; exec({SOURCE!r}, {{'cuda': cuda}}, built)\n"
        "ary = np.arange(32.0); res = np.zeros(1)\n"
        "with simt.simulated_cuda():\n"
        "    cuda.jit(built['atomic_max'])[1, 32](res, ary)\n"
        "print('max', res[0])\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300, cwd=root
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "max 31.0" in done.stdout
    assert "has no source to rewrite" in done.stderr


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
