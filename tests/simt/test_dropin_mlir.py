"""Under simulated_cuda() (``pytest --portkit-simt``) a suite written against
numba-cuda-mlir (``from numba_cuda_mlir import cuda``) is switched as one written against
numba-cuda is: its ``cuda.jit`` kernels launch in portkit's simulator, its arrays are
host memory, its device queries answer as the simulated GPU. Skipped where
numba_cuda_mlir is not installed (docs/numba-world.md)."""

from __future__ import annotations

import numpy as np
import pytest

import portkit.simt as simt
from portkit.simt.launcher import SimulatedKernel
from portkit.simt.records import SimulationFault
from tests.simt.test_launcher import SUITE as NUMBA_SUITE

mlir = pytest.importorskip(
    "numba_cuda_mlir.cuda", reason="numba_cuda_mlir is not installed (docs/numba-world.md)"
)


def test_cuda_jit_of_numba_cuda_mlir_builds_simulated_kernels():
    cuda = mlir
    original_jit = cuda.jit
    with simt.simulated_cuda():

        @cuda.jit(device=True)
        def twice(v):
            return v * 2

        @cuda.jit
        def scale(a, n):
            i = cuda.grid(1)
            if i < n:
                a[i] = twice(a[i]) + cuda.float32(1)

        @cuda.jit
        def overrun(a):
            a[cuda.grid(1)] = 0

        assert isinstance(scale, SimulatedKernel)
        d = cuda.to_device(np.arange(50, dtype=np.float32))
        scale[2, 32](d, 50)
        cuda.synchronize()
        assert np.array_equal(d.copy_to_host(), np.arange(50, dtype=np.float32) * 2 + 1)
        with pytest.raises(SimulationFault, match=r"out-of-bounds write of global array a\[8\]"):
            overrun[1, 32](cuda.device_array(8, np.float32))
    assert cuda.jit is original_jit  # restored on the way out


def test_device_queries_of_numba_cuda_mlir_answer_as_the_simulated_gpu():
    from numba_cuda_mlir.numba_cuda.cudadrv import devices

    cuda = mlir
    with simt.simulated_cuda(cc="8.0"):
        assert cuda.is_available()
        assert cuda.get_current_device().compute_capability == (8, 0)
        assert cuda.get_current_device().MULTIPROCESSOR_COUNT == 108
        assert devices.gpus[0].compute_capability == (8, 0)  # what its test helpers ask
        start, end = cuda.event(), cuda.event()
        start.record()
        end.record()
        assert cuda.event_elapsed_time(start, end) >= 0


# test_launcher's numba-cuda suite, written against numba-cuda-mlir instead.
SUITE = NUMBA_SUITE.replace("from numba import cuda\n", "from numba_cuda_mlir import cuda\n")


def test_pytest_option_runs_an_unedited_numba_cuda_mlir_suite(tmp_path):
    from tests.simt.plugin_run import run_pytest

    assert "from numba_cuda_mlir import cuda" in SUITE
    result = run_pytest(tmp_path, "test_mlir_kernels.py", SUITE, "--portkit-simt")
    assert "1 failed, 1 passed" in result.stdout, result.stdout[-2000:]
    assert "out-of-bounds write of global array a[8]" in result.stdout
    assert "thread (8, 0, 0)" in result.stdout
