"""Under simulated_cuda() numba.cuda's device, context, stream, event and resource
queries answer as a simulated GPU, without the driver (this machine has none), as code
written for numba.cuda (and numba's own test helpers) calls them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from numba import cuda

import portkit.simt as simt
from portkit.simt.device import DeviceChoiceError


def test_device_and_context_queries_answer_as_the_chosen_compute_capability():
    with simt.simulated_cuda(cc="8.0"):
        assert cuda.is_available()
        device = cuda.get_current_device()
        assert device.compute_capability == (8, 0)
        assert device.MAX_THREADS_PER_BLOCK == 1024
        assert device.MULTIPROCESSOR_COUNT == 108  # an A100's
        assert device.WARP_SIZE == 32
        context = cuda.current_context()
        assert context.device is device and context.compute_capability == (8, 0)
        free, total = context.get_memory_info()
        assert 0 < free <= total
        assert len(cuda.gpus) == 1 and cuda.gpus[0] is context
        assert list(cuda.list_devices()) == [context]
        assert cuda.select_device(0) is device
    with simt.simulated_cuda():
        assert cuda.get_current_device().compute_capability == (9, 0)
        assert cuda.get_current_device().MULTIPROCESSOR_COUNT == 132


def test_an_unknown_compute_capability_is_one_clear_error():
    with pytest.raises(DeviceChoiceError, match=r"'4\.2': one of .*9\.0"):
        with simt.simulated_cuda(cc="4.2"):
            pass


def test_detect_prints_the_simulated_device(capsys):
    with simt.simulated_cuda(cc="7.5"):
        assert cuda.detect() is True
    printed = capsys.readouterr().out
    assert "Found 1 CUDA devices" in printed and "Tesla T4" in printed and "7.5" in printed


def test_numba_testing_helpers_do_not_reach_the_driver():
    # numba.cuda.testing imports filecheck (numba-cuda's test dependency); a user running
    # numba's test helpers has it, portkit's test extra installs it
    pytest.importorskip("filecheck", reason="numba.cuda.testing needs filecheck")
    # In a fresh process: numba caches the driver's failure once it tried.
    code = textwrap.dedent(
        """
        import portkit.simt as simt
        with simt.simulated_cuda(cc="8.6"):
            from numba.cuda import testing
            assert testing.cc_X_or_above(8, 6) and not testing.cc_X_or_above(9, 0)

            @testing.skip_unless_cc_60
            def f():
                pass
        print("collected")
        """
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "collected" in run.stdout


def test_events_time_what_ran_between_them():
    with simt.simulated_cuda():
        start, end = cuda.event(), cuda.event()
        start.record()
        time.sleep(0.02)
        end.record()
        end.synchronize()
        elapsed = start.elapsed_time(end)
    assert 15.0 <= elapsed < 2000.0  # milliseconds


def test_streams_pinned_and_mapped_arrays_and_strided_copies():
    with simt.simulated_cuda():

        @cuda.jit
        def twice(x):
            i = cuda.grid(1)
            if i < x.size:
                x[i] *= 2

        stream = cuda.stream()
        host = cuda.pinned_array(64, dtype=np.float32)
        host[:] = np.arange(64)
        device = cuda.to_device(host, stream=stream)
        twice[2, 32, stream](device)
        stream.synchronize()
        np.testing.assert_array_equal(device.copy_to_host(stream=stream), 2 * np.arange(64))
        mapped = cuda.mapped_array(32, dtype=np.int32)
        mapped[:] = 5
        twice[1, 32](mapped)
        np.testing.assert_array_equal(mapped, np.full(32, 10))
        matrix = np.arange(24, dtype=np.float64).reshape(4, 6)
        column_major = cuda.to_device(np.asfortranarray(matrix))
        np.testing.assert_array_equal(column_major.copy_to_host(), matrix)


def test_overloads_and_resource_queries_of_a_kernel():
    with simt.simulated_cuda():
        from numba.cuda import float32, int32

        @cuda.jit((float32[::1], int32))
        def scale(x, n):
            i = cuda.grid(1)
            if i < n:
                x[i] *= 2

        @cuda.jit
        def lazy(x):
            x[0] = 1

        sig = (float32[::1], int32)
        assert list(scale.overloads) == [sig]
        assert scale.get_regs_per_thread() > 0  # specialized: one answer
        assert scale.get_shared_mem_per_block() == 0
        assert scale.get_max_threads_per_block() == 1024
        blocks = scale.overloads[sig].max_cooperative_grid_blocks(32)
        assert blocks == 32 * 132  # 32 blocks per SM on an H100's 132 SMs
        assert scale.overloads[sig].max_cooperative_grid_blocks(1024) == 2 * 132
        assert lazy.overloads == {}
        lazy[1, 1](np.zeros(4, np.float64))
        lazy[1, 1](np.zeros(4, np.int32))
        regs = lazy.get_regs_per_thread()
        assert isinstance(regs, dict) and len(regs) == 2


def test_driver_level_copies_and_device_count_use_host_memory():
    from numba.cuda.cudadrv import driver

    with simt.simulated_cuda():
        from numba.cuda.cudadrv.driver import driver as the_driver

        assert the_driver.get_device_count() == 1
        ary = cuda.mapped_array(10, dtype=np.uint32)
        ary.fill(123)
        driver.device_memset(ary, 0, driver.device_memory_size(ary))
        assert not ary.any()
        src, dst = np.arange(8, dtype=np.int64), cuda.device_array(8, np.int64)
        driver.host_to_device(dst, src, src.nbytes)
        np.testing.assert_array_equal(dst.copy_to_host(), src)


CC_SUITE = """
from numba import cuda
from numba.cuda.testing import skip_unless_cc_90


@skip_unless_cc_90
def test_needs_hopper():
    pass


def test_reports_the_chosen_device():
    assert cuda.get_current_device().compute_capability == (8, 6)
"""


def test_pytest_option_chooses_the_compute_capability(tmp_path):
    # numba.cuda.testing imports filecheck (numba-cuda's test dependency); a user running
    # numba's test helpers has it, portkit's test extra installs it
    pytest.importorskip("filecheck", reason="numba.cuda.testing needs filecheck")
    from tests.simt.plugin_run import run_pytest

    options = ("--portkit-simt", "--portkit-simt-cc", "8.6", "-rs")
    result = run_pytest(tmp_path, "test_cc.py", CC_SUITE, *options)
    assert "1 passed, 1 skipped" in result.stdout, result.stdout[-2000:]
    assert "requires cc >= 9.0" in result.stdout
