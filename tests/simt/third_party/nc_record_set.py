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
    sample = np.recarray(3, dtype=recordtype)
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
        out.update({f"set_a{i}.{f}": np.array(got[f]) for f in "abcd"})
    for i, j in [(0, 1), (1, 2), (0, 2)]:
        got = sample.copy()
        cuda.jit()(set_record)[1, 1](got, i, j)
        out.update({f"set_record{i}{j}.{f}": np.array(got[f]) for f in "abcd"})
    return out
