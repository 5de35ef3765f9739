"""portkit.simt.simulate and simulated_cuda(): any numba kernel, numba's launch syntax."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from numba import cuda

import portkit.simt as simt
from portkit.errors import KernelError, LaunchError
from portkit.simt.records import SimulationFault
from tests.simt import kernels as K


def test_numpy_arrays_and_cpu_tensors_are_written_in_place():
    x = np.arange(100, dtype=np.float32)
    out = np.zeros(100, np.float32)
    kernel = simt.simulate(K.axpy)
    kernel[4, 32](np.float32(2), x, x, out, 100)
    np.testing.assert_array_equal(out, 3 * x)
    t = torch.arange(100, dtype=torch.float32)
    o = torch.zeros(100)
    kernel[4, 32, 0, 0](np.float32(1), t, t, o, 100)
    assert torch.equal(o, 2 * t)
    assert [e.engine for e in kernel.engines] == ["lockstep", "lockstep"]


def test_dynamic_shared_memory_from_the_fourth_launch_item():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    simt.simulate(K.dynamic_shared_reverse)[1, 64, 0, 2 * 64 * 4](x, out, 64)
    np.testing.assert_array_equal(out, 2 * x[::-1])
    with pytest.raises(SimulationFault, match="out-of-bounds"):  # too few shared bytes
        simt.simulate(K.dynamic_shared_reverse)[1, 64, 0, 64 * 4](x, out, 64)


def test_a_fault_is_an_exception_naming_thread_and_line():
    x = np.arange(10, dtype=np.float32)
    with pytest.raises(SimulationFault) as caught:
        simt.simulate(K.axpy)[1, 32](np.float32(1), x, x, np.zeros(5, np.float32), 10)
    fault = caught.value
    assert isinstance(fault, KernelError) and fault.kind == "out-of-bounds"
    assert fault.place.thread == (5, 0, 0) and fault.place.file.endswith("kernels.py")


def test_launch_mistakes_are_one_line_errors():
    kernel = simt.simulate(K.axpy)
    with pytest.raises(LaunchError, match="launch configuration"):
        kernel(1, 2)
    with pytest.raises(LaunchError, match=r"\[grid, block\]"):
        kernel[1]
    with pytest.raises(LaunchError, match="numba.cuda.jit kernel"):
        simt.simulate(lambda: None)


def test_simulated_cuda_makes_numba_cuda_simulated_and_restores_it():
    real_jit, real_to_device = cuda.jit, cuda.to_device
    with simt.simulated_cuda():
        assert cuda.jit is not real_jit

        @cuda.jit("void(float32[:])")
        def double(a):
            i = cuda.grid(1)
            if i < a.size:
                a[i] *= 2

        device = cuda.to_device(np.arange(8, dtype=np.float32))
        double[1, 8](device)
        cuda.synchronize()
        np.testing.assert_array_equal(device.copy_to_host(), 2 * np.arange(8))
    assert cuda.jit is real_jit and cuda.to_device is real_to_device


SUITE = """
import numpy as np
from numba import cuda


@cuda.jit
def scale(a, factor):
    i = cuda.grid(1)
    if i < a.size:
        a[i] *= factor


@cuda.jit
def overrun(a):
    a[cuda.grid(1)] = 0


def test_scale():
    d = cuda.to_device(np.ones(50, np.float32))
    scale[2, 32](d, 3)
    assert (d.copy_to_host() == 3).all()


def test_overrun_is_caught():
    overrun[1, 32](np.zeros(8, np.float32))
"""


def test_pytest_option_runs_an_unedited_numba_suite(tmp_path):
    from tests.simt.plugin_run import run_pytest

    result = run_pytest(tmp_path, "test_kernels.py", SUITE, "--portkit-simt")
    assert "1 failed, 1 passed" in result.stdout, result.stdout[-2000:]
    assert "out-of-bounds write of global array a[8]" in result.stdout
    assert "thread (8, 0, 0)" in result.stdout
