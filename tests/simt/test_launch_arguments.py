"""``simulate()`` checks a launch's arguments as numba does for a GPU, before the kernel
runs, and names the parameter; kernels from ``python -c`` simulate too."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from numba import cuda

from portkit.errors import LaunchError
from portkit.simt import simulate
from portkit.simt.numba_check import NumbaRejects


@cuda.jit
def double(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] * 2


@cuda.jit(device=True)
def helper(v):
    return v


class DeviceOnly:
    __cuda_array_interface__ = {"shape": (8,), "typestr": "<f4", "data": (0, False), "version": 3}


def out8() -> np.ndarray:
    return np.zeros(8, np.float32)


X = np.arange(8, dtype=np.float32)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ([1.0] * 8, out8(), 8),
            "kernel double: parameter x is a list, which a GPU kernel cannot take: arrays "
            "(NumPy, CPU tensors) and scalars only (pass np.array(...) for an array)",
        ),
        (
            (None, out8(), 8),
            "kernel double: parameter x is None, which a GPU kernel cannot take: arrays "
            "(NumPy, CPU tensors) and scalars only",
        ),
        (
            (DeviceOnly(), out8(), 8),
            "kernel double: parameter x is GPU memory the simulator cannot copy "
            f"({__name__}.DeviceOnly): pass a CuPy array, a numba device array, a NumPy "
            "array or a CPU tensor",
        ),
        (
            (X[::2], np.zeros(16, np.float32)[::2], 4),
            "kernel double: parameter x is a non-contiguous view (strides (8,)); numba copies "
            "only contiguous host arrays to a GPU: pass np.ascontiguousarray(...)",
        ),
        (
            (torch.zeros(4, 4)[:, 0], torch.zeros(4), 4),
            "kernel double: parameter x is a non-contiguous tensor (strides (4,)); the "
            "simulator takes contiguous memory: pass .contiguous()",
        ),
        ((X, out8()), "kernel double takes 3 arguments (x, out, n), launched with 2"),
    ],
)
def test_arguments_a_gpu_rejects(args, message):
    before = [a.copy() if isinstance(a, (list, np.ndarray)) else a for a in args]
    with pytest.raises(LaunchError) as caught:
        simulate(double)[1, 32](*args)
    assert str(caught.value) == message
    if isinstance(args[0], list):
        assert args[0] == before[0]  # the caller's list is left alone


def test_a_store_into_a_read_only_array():
    """numba types a read-only array readonly and refuses a store into it: its type check
    says so before the launch; without it (no NVVM, or ``typecheck=False``) the simulator
    finds the store itself."""
    readonly = out8()
    readonly.flags.writeable = False
    with pytest.raises(NumbaRejects, match=r"setitem\(readonly array\(float32"):
        simulate(double)[1, 32](X, readonly, 8)
    with pytest.raises(LaunchError) as caught:
        simulate(double, typecheck=False)[1, 32](X, readonly, 8)
    assert str(caught.value) == (
        "kernel double stores into parameter out, a read-only array: numba refuses to "
        "compile that; pass a writable array"
    )
    assert not readonly.any()


def test_a_read_only_input_is_fine():
    readonly = X.copy()
    readonly.flags.writeable = False
    out = out8()
    simulate(double)[1, 32](readonly, out, 8)
    assert np.array_equal(out, X * 2)


def test_a_device_function_cannot_be_launched():
    with pytest.raises(LaunchError) as caught:
        simulate(helper)
    assert str(caught.value) == (
        "helper is a device function (device=True): a GPU launches kernels only; "
        "call it from a kernel"
    )


def test_bfloat16_tensors_as_the_backends_pass_them():
    x = torch.arange(8, dtype=torch.bfloat16)
    out = torch.zeros(8, dtype=torch.bfloat16)
    simulate(double)[1, 32](x, out, 8)
    assert torch.equal(out, x * 2)


def test_a_kernel_from_python_dash_c(tmp_path):
    code = textwrap.dedent(
        """
        import numpy as np
        from numba import cuda
        from portkit.simt import simulate

        @cuda.jit
        def bad(x, n):
            i = cuda.grid(1)
            x[i + 100] = 1

        x = np.zeros(4, np.float32)
        try:
            simulate(bad)[1, 4](x, 4)
        except Exception as exc:
            print(exc)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert "kernel bad: out-of-bounds write of global array x[100]" in result.stdout
    assert "<string>:9: x[i + 100] = 1" in result.stdout


def _stores_its_scalars(out, x, n, flag):
    out[0] = x
    out[1] = n
    out[2] = flag


def test_an_explicit_signature_converts_scalar_arguments():
    """numba converts each scalar to its declared type: a Python float for a float32
    parameter is rounded to float32, an int for an int8 one wraps (numba-cuda's
    test_round_to_f4_halfway passes 0.3425 to a float32 parameter)."""
    import portkit.simt as simt

    with simt.simulated_cuda():
        declared = cuda.jit("void(float64[:], float32, int8, boolean)")(_stores_its_scalars)
        undeclared = cuda.jit(_stores_its_scalars)
        out, plain = np.zeros(3), np.zeros(3)
        declared[1, 1](out, 0.3425, 300, 2)
        undeclared[1, 1](plain, 0.3425, 300, 2)
    assert out[0] == float(np.float32(0.3425)) and out[0] != 0.3425
    assert out[1] == 300 - 256 and out[2] == 1.0
    np.testing.assert_array_equal(plain, [0.3425, 300, 2])  # no signature: numba's typeof


def test_of_several_signatures_the_matching_one_converts():
    import portkit.simt as simt

    with simt.simulated_cuda():
        sigs = [
            "void(float64[:], float32, int8, boolean)",
            "void(float32[:], float64, int64, boolean)",
        ]
        kernel = cuda.jit(sigs)(_stores_its_scalars)
        first, second = np.zeros(3), np.zeros(3, np.float32)
        kernel[1, 1](first, 0.1, 300, True)
        kernel[1, 1](second, 0.1, 300, True)
    np.testing.assert_array_equal(first, [float(np.float32(0.1)), 300 - 256, 1])
    np.testing.assert_array_equal(second, np.array([0.1, 300, 1], np.float32))
