# Source: numba-cuda 0.30.4, numba/cuda/tests/cudapy/test_warp_ops.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/cudapy/test_warp_ops.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda


def use_vote_sync_eq(ary_in, ary_out):
    i = cuda.grid(1)
    pred = cuda.eq_sync(0xFFFFFFFF, ary_in[i])
    ary_out[i] = pred


def run():
    compiled = cuda.jit("void(int32[:], int32[:])")(use_vote_sync_eq)
    out = {}
    for name, values in {"zeros": np.zeros(32), "ones": np.ones(32),
                         "mixed": np.arange(32) % 2}.items():
        ary_in = values.astype(np.int32)
        ary_out = np.empty(32, dtype=np.int32)
        compiled[1, 32](ary_in, ary_out)
        out[name] = ary_out
    return out


def expected():
    """What numba-cuda's test asserts."""
    return {"zeros": np.ones(32, np.int32), "ones": np.ones(32, np.int32),
            "mixed": np.zeros(32, np.int32)}
