# Source: numba-cuda 0.30.4, numba/cuda/tests/cudapy/test_record_dtype.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/cudapy/test_record_dtype.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda

recordtype = np.dtype(
    [
        ("a", np.float64),
        ("b", np.int32),
        ("c", np.complex64),
        ("d", (np.uint8, 5)),
    ],
    align=True,
)


def set_a(ary, i, v):
    ary[i].a = v


def set_record(ary, i, j):
    ary[i] = ary[j]


def run():
    sample = np.zeros(3, dtype=recordtype).view(np.recarray)  # padding bytes zeroed
    for i in range(sample.size):
        x = i + 1
        sample[i]["a"] = x / 2
        sample[i]["b"] = x
        sample[i]["c"] = x * 1j
        sample[i]["d"] = f"{x}"
    out = {}
    for i in range(3):
        got = sample.copy()
        cuda.jit()(set_a)[1, 1](got, i, 3.1415)
        out[f"set_a{i}"] = np.asarray(got).view(np.uint8)
    for i, j in [(0, 1), (1, 2), (0, 2)]:
        got = sample.copy()
        cuda.jit()(set_record)[1, 1](got, i, j)
        out[f"set_record{i}{j}"] = np.asarray(got).view(np.uint8)
    return out
