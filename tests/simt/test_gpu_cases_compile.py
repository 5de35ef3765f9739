"""The kernels test_simt_gpu.py runs on a GPU compile with numba for their cases' argument
types, checked here on the CPU (numba's CUDA compiler needs no GPU).

The simulator runs any Python, so a test kernel numba refuses (``cuda.selp`` of an int32
and an int64: found by the GPU run of 2026-11-28) passes every simulator test and fails
only on the GPU runner. ``portkit sim`` type-checks an op's kernels the same way before it
runs them (backends/numba_types.py); these kernels are launched on the raw machine."""

from __future__ import annotations

import zlib

import numba
import numpy as np
import pytest

from portkit.backends.ptx import signature_ptx
from tests.simt import test_simt_gpu as gpu_cases


def _compiler_reason() -> str:
    try:
        from numba import cuda

        signature_ptx(
            cuda.jit(lambda a: None), None, "probe", (numba.float32[::1],), ask_driver=False
        )
    except Exception as exc:  # no NVVM (numba-cuda without its toolkit wheels)
        return f"numba cannot compile CUDA here: {type(exc).__name__}: {exc}"
    return ""


_REASON = _compiler_reason()


@pytest.mark.skipif(bool(_REASON), reason=_REASON)
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in gpu_cases.CASES])
def test_the_gpu_case_compiles_with_numba(case):
    args = case.make_args(np.random.default_rng(zlib.crc32(case.id.encode())))
    signature = tuple(numba.typeof(a, numba.core.typing.typeof.Purpose.argument) for a in args)
    kernel = getattr(gpu_cases.K, case.kernel)
    # portkit compile's path: the configured architecture, no CUDA driver asked (a device
    # function's compile would otherwise ask one for the current device)
    signature_ptx(kernel, None, case.kernel, signature, ask_driver=False)
