"""On a GPU: numba-cuda's own tests that numba's simulator passes and portkit's does not
(docs/numba-world.md), run on the device, and the racy kernel of one of them launched
100 times to see whether its output depends on the schedule.

    python scripts/gpu_numba_disputed.py

Prints one row per test (outcome on the GPU), the number of distinct outputs of
``test_exception``'s ``problematic`` kernel over 100 launches, and what a read of shared
memory no thread wrote returns after another kernel filled the same shared memory.
Needs a GPU and numba-cuda's test dependencies (filecheck).
"""

from __future__ import annotations

import unittest

import numpy as np

if not hasattr(np, "row_stack"):  # numba-cuda 0.30.4 names it at import; NumPy 2.5 removed it
    np.row_stack = np.vstack

DISPUTED = [
    "test_array_alignment.TestCudasimUnsupportedAlignment.test_local_unsupported",
    "test_array_alignment.TestCudasimUnsupportedAlignment.test_shared_unsupported",
    "test_exception.TestException.test_raise_causing_warp_diverge",
    "test_freevar.TestFreeVar.test_freevar",
    "test_sm.TestSharedMemoryIssue.test_issue_2393",
    "test_sm_creation.TestSharedMemoryCreation.test_global_build_tuple",
    "test_sm_creation.TestSharedMemoryCreation.test_global_constant_tuple",
    "test_sm_creation.TestSharedMemoryCreation.test_global_constants",
    "test_intrinsics.TestCudaIntrinsic.test_round_to_f4_halfway",
    "test_atomics.TestCudaAtomics.test_atomic_sub3",
]


def run_tests() -> None:
    loader = unittest.TestLoader()
    print("| test | on the GPU |")
    print("|---|---|")
    for name in DISPUTED:
        suite = loader.loadTestsFromName(f"numba.cuda.tests.cudapy.{name}")
        result = unittest.TestResult()
        suite.run(result)
        problems = result.failures + result.errors
        outcome = "skipped" if result.skipped else "passed"
        if problems:
            outcome = "failed: " + problems[0][1].strip().splitlines()[-1][:120]
        print(f"| {name} | {outcome} |")


def racy_outputs(launches: int = 100) -> None:
    """test_exception's ``problematic``: threads 13-31 each update every y[i]."""
    from numba import cuda

    @cuda.jit
    def problematic(x, y):
        tid = cuda.threadIdx.x
        ntid = cuda.blockDim.x
        if tid > 12:
            for i in range(ntid):
                y[i] += x[i] // y[i]
        cuda.syncthreads()
        if tid < 17:
            for i in range(ntid):
                x[i] += x[i] // y[i]

    n = 32
    seen = set()
    for _ in range(launches):
        x = 1.0 / (np.arange(n) + 0.01)
        y = 1.0 / (np.arange(n) + 0.01)
        problematic[1, n](x, y)
        seen.add((x.tobytes(), y.tobytes()))
    print(f"\nproblematic: {len(seen)} distinct outputs in {launches} launches")


def unwritten_shared(launches: int = 20) -> None:
    """test_sm_creation's pattern: a thread stores a shared element nobody wrote."""
    from numba import cuda

    @cuda.jit
    def kernel(out, fill):
        sa = cuda.shared.array(5, dtype=np.float32)
        i = cuda.grid(1)
        if fill:
            sa[i] = 7.0
        else:
            out[i] = sa[i]

    seen = set()
    for _ in range(launches):
        kernel[1, 5](np.zeros(5, np.float32), True)
        out = np.zeros(5, np.float32)
        kernel[1, 5](out, False)
        seen.add(tuple(out.tolist()))
    print(f"unwritten shared read after a launch that wrote 7.0 there: {sorted(seen)}")


if __name__ == "__main__":
    run_tests()
    racy_outputs()
    unwritten_shared()
