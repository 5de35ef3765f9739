# Source: numba-cuda 0.30.4, numba/cuda/tests/doc_examples/test_montecarlo.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/doc_examples/test_montecarlo.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numba
import numpy as np
from numba import cuda
from numba.cuda.random import (
    create_xoroshiro128p_states,
    xoroshiro128p_uniform_float32,
)

nsamps = 256  # the example's 1000000, smaller


@cuda.jit
def mc_integrator_kernel(out, rng_states, lower_lim, upper_lim):
    """
    kernel to draw random samples and evaluate the function to
    be integrated at those sample values
    """
    size = len(out)

    gid = cuda.grid(1)
    if gid < size:
        # draw a sample between 0 and 1 on this thread
        samp = xoroshiro128p_uniform_float32(rng_states, gid)

        # normalize this sample to the limit range
        samp = samp * (upper_lim - lower_lim) + lower_lim

        # evaluate the function to be
        # integrated at the normalized
        # value of the sample
        y = func(samp)
        out[gid] = y


@numba.jit
def func(x):
    return 1.0 / x


def run():
    out = cuda.to_device(np.zeros(nsamps, dtype="float32"))
    rng_states = create_xoroshiro128p_states(nsamps, seed=42)
    mc_integrator_kernel.forall(nsamps)(out, rng_states, 1, 2)
    return {"out": out.copy_to_host(), "states": rng_states.copy_to_host().view(np.uint64)}


def expected():
    """The kernel's arithmetic as numba types it for a GPU (float32 sample, int64 limits:
    float64), the draws by numba's own CPU-compiled xoroshiro functions."""
    from numba.cuda.random import xoroshiro128p_uniform_float32 as draw

    states = create_xoroshiro128p_states(nsamps, seed=42).copy_to_host()
    out = np.empty(nsamps, dtype=np.float32)
    for gid in range(nsamps):
        samp = np.float64(draw(states, gid)) * (2 - 1) + 1
        out[gid] = 1.0 / samp
    return {"out": out, "states": states.view(np.uint64)}
