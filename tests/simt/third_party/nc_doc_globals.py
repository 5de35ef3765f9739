# Source: numba-cuda 0.30.4, numba/cuda/tests/doc_examples/test_globals.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/doc_examples/test_globals.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda

TAX_RATE = 0.08
PRICES = np.array([10.0, 25.0, 5.0, 15.0, 30.0], dtype=np.float64)


@cuda.jit
def compute_totals(quantities, totals):
    i = cuda.grid(1)
    if i < totals.size:
        totals[i] = quantities[i] * PRICES[i] * (1 + TAX_RATE)


def run():
    global TAX_RATE
    d_quantities = cuda.to_device(np.array([1, 2, 3, 4, 5], dtype=np.float64))
    d_totals = cuda.device_array(5, dtype=np.float64)
    compute_totals[1, 32](d_quantities, d_totals)
    first = d_totals.copy_to_host()
    # Changing the globals after the first launch: numba froze them at compile time.
    TAX_RATE = 0.10
    PRICES[:] = [20.0, 50.0, 10.0, 30.0, 60.0]
    compute_totals[1, 32](d_quantities, d_totals)
    return {"first": first, "second": d_totals.copy_to_host()}


def expected():
    """What the example asserts (10.8, 54.0, 16.2, 64.8, 162.0): the globals were captured
    at the first launch; computed in the kernel's operation order, bit for bit."""
    quantities = np.array([1, 2, 3, 4, 5], dtype=np.float64)
    prices = np.array([10.0, 25.0, 5.0, 15.0, 30.0], dtype=np.float64)
    totals = quantities * prices * (1 + 0.08)
    return {"first": totals, "second": totals}
