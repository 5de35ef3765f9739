"""``simulate()`` takes GPU arrays it can copy (CuPy arrays, numba device arrays): copied
to the host before the launch and back after it; other GPU memory is refused by name.
NVIDIA's CUDA Python guide's two numba examples (an unguarded vecadd launched over more
threads than elements, a 2048-thread block) fail as they fail on a GPU, with NumPy
arrays here and with real CuPy arrays on a GPU machine (skipped without CuPy or a GPU).
On a CPU, CuPy is ``tests/fake_cupy.py``, a stand-in with CuPy's documented calls."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from portkit.errors import LaunchError
from portkit.simt import simulate
from portkit.simt.records import SimulationFault
from tests import fake_cupy


@cuda.jit
def double(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] * 2


@cuda.jit
def vecadd(a, b, c):
    """The guide's kernel, without the bound check it needs."""
    i = cuda.grid(1)
    c[i] = a[i] + b[i]


VECADD_LINE = vecadd.py_func.__code__.co_firstlineno + 4  # the decorator line first


def test_cupy_arrays_are_copied_in_and_back(monkeypatch) -> None:
    cupy = fake_cupy.install(monkeypatch)
    x = cupy.asarray(np.arange(8, dtype=np.float32))
    out = cupy.asarray(np.zeros(8, np.float32))
    simulate(double)[1, 8](x, out, 8)
    assert np.array_equal(cupy.asnumpy(out), np.arange(8, dtype=np.float32) * 2)
    assert np.array_equal(cupy.asnumpy(x), np.arange(8, dtype=np.float32))


def test_a_faulting_launch_still_copies_back_what_it_wrote(monkeypatch) -> None:
    cupy = fake_cupy.install(monkeypatch)
    a = cupy.asarray(np.ones(40, np.float32))
    c = cupy.asarray(np.zeros(40, np.float32))
    with pytest.raises(SimulationFault):
        simulate(vecadd)[2, 32](a, a, c)
    assert np.array_equal(cupy.asnumpy(c), np.full(40, 2, np.float32))


def test_a_non_contiguous_cupy_array_is_refused_by_name(monkeypatch) -> None:
    cupy = fake_cupy.install(monkeypatch)
    x = cupy.asarray(np.arange(16, dtype=np.float32))[::2]
    out = cupy.asarray(np.zeros(8, np.float32))
    with pytest.raises(LaunchError) as info:
        simulate(double)[1, 8](x, out, 8)
    assert str(info.value) == (
        "kernel double: parameter x is a non-contiguous ndarray; the simulator copies "
        "contiguous GPU arrays to the host and back: pass cupy.ascontiguousarray(...)"
    )


class NumbaDeviceArray:
    """numba's ``DeviceNDArray`` API (a GPU has the real one: tests/simt/test_simt_gpu.py)."""

    __module__ = "numba.cuda.cudadrv.devicearray"

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.__cuda_array_interface__ = {
            "shape": array.shape,
            "typestr": array.dtype.str,
            "data": (0, False),
            "strides": None,
            "version": 3,
        }

    def copy_to_host(self) -> np.ndarray:
        return self.array.copy()

    def copy_to_device(self, host: np.ndarray) -> None:
        self.array[...] = host


def test_numba_device_arrays_are_copied_in_and_back() -> None:
    x = NumbaDeviceArray(np.arange(8, dtype=np.int32))
    out = NumbaDeviceArray(np.zeros(8, np.int32))
    simulate(double)[1, 8](x, out, 8)
    assert out.array.tolist() == [2 * i for i in range(8)]


class OtherDeviceMemory:
    __cuda_array_interface__ = {"shape": (8,), "typestr": "<f4", "data": (0, False), "version": 3}


def test_other_gpu_memory_is_refused_naming_its_type() -> None:
    with pytest.raises(LaunchError) as info:
        simulate(double)[1, 8](OtherDeviceMemory(), np.zeros(8, np.float32), 8)
    assert str(info.value) == (
        "kernel double: parameter x is GPU memory the simulator cannot copy "
        f"({__name__}.OtherDeviceMemory): pass a CuPy array, a numba device array, a NumPy "
        "array or a CPU tensor"
    )


def _guide_arrays(asarray) -> tuple:
    n = 1000
    a = asarray(np.arange(n, dtype=np.float32))
    return a, asarray(np.ones(n, np.float32)), asarray(np.zeros(n, np.float32))


def _assert_unguarded_vecadd_faults(a, b, c) -> None:
    with pytest.raises(SimulationFault) as info:
        simulate(vecadd)[4, 256](a, b, c)  # 1024 threads, 1000 elements
    message = str(info.value)
    assert "out-of-bounds read of global array a[1000]" in message
    assert "block (3, 0, 0), thread (232, 0, 0)" in message
    assert f"{__file__}:{VECADD_LINE}: c[i] = a[i] + b[i]" in message


def _assert_2048_threads_is_invalid(a, b, c) -> None:
    with pytest.raises(LaunchError) as info:
        simulate(vecadd)[1, 2048](a, b, c)
    assert str(info.value) == (
        "kernel vecadd: block (2048, 1, 1) asks for 2048 threads per block; a GPU allows at "
        "most 1024 (CUDA_ERROR_INVALID_VALUE on a GPU)"
    )


def test_guide_unguarded_vecadd_is_an_out_of_bounds_access() -> None:
    _assert_unguarded_vecadd_faults(*_guide_arrays(np.asarray))


def test_guide_2048_threads_per_block_is_a_launch_error() -> None:
    _assert_2048_threads_is_invalid(*_guide_arrays(np.asarray))


def _real_cupy():
    """Real CuPy with a GPU, or a skip saying which is missing."""
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed (the GPU machine has it)")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("CuPy sees no GPU")
    except Exception as exc:  # CuPy without a driver raises its own CUDARuntimeError
        pytest.skip(f"CuPy cannot reach a GPU: {type(exc).__name__}: {exc}")
    return cupy


@pytest.mark.gpu
def test_guide_examples_with_cupy_arrays_on_a_gpu() -> None:
    cupy = _real_cupy()
    a, b, c = _guide_arrays(cupy.asarray)
    _assert_unguarded_vecadd_faults(a, b, c)
    _assert_2048_threads_is_invalid(a, b, c)
    n = 1000
    simulate(double)[4, 256](a, c, n)
    assert np.array_equal(cupy.asnumpy(c), np.arange(n, dtype=np.float32) * 2)
