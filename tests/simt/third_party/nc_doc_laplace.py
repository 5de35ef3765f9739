# Source: numba-cuda 0.30.4, numba/cuda/tests/doc_examples/test_laplace.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/doc_examples/test_laplace.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import numpy as np
from numba import cuda


@cuda.jit
def solve_heat_equation(buf_0, buf_1, timesteps, k):
    i = cuda.grid(1)

    # Don't continue if our index is outside the domain
    if i >= len(buf_0):
        return

    # Prepare to do a grid-wide synchronization later
    grid = cuda.cg.this_grid()

    for step in range(timesteps):
        # Select the buffer from the previous timestep
        if (step % 2) == 0:
            data = buf_0
            next_data = buf_1
        else:
            data = buf_1
            next_data = buf_0

        # Get the current temperature associated with this point
        curr_temp = data[i]

        # Apply formula from finite difference equation
        if i == 0:
            # Left wall is held at T = 0
            next_temp = curr_temp + k * (data[i + 1] - (2 * curr_temp))
        elif i == len(data) - 1:
            # Right wall is held at T = 0
            next_temp = curr_temp + k * (data[i - 1] - (2 * curr_temp))
        else:
            # Interior points are a weighted average of their neighbors
            next_temp = curr_temp + k * (
                data[i - 1] - (2 * curr_temp) + data[i + 1]
            )

        # Write new value to the next buffer
        next_data[i] = next_temp

        # Wait for every thread to write before moving on
        grid.sync()


def run():
    size = 101  # the example's 1001 points and 10000 steps, smaller
    data = np.zeros(size)
    data[50] = 10000
    buf_0 = cuda.to_device(data)
    buf_1 = cuda.device_array_like(buf_0)
    solve_heat_equation[4, 32](buf_0, buf_1, 20, 0.25)
    return {"buf_0": buf_0.copy_to_host(), "buf_1": buf_1.copy_to_host()}


def expected():
    """The same finite differences stepped on the host, in the kernel's operation order."""
    buffers = [np.zeros(101), np.zeros(101)]
    buffers[0][50] = 10000
    k = 0.25
    for step in range(20):
        data, nxt = buffers[step % 2], buffers[1 - step % 2]
        left = np.concatenate([[0.0], data[:-1]])
        right = np.concatenate([data[1:], [0.0]])
        inner = data + k * (left - (2 * data) + right)
        inner[0] = data[0] + k * (data[1] - (2 * data[0]))
        inner[-1] = data[-1] + k * (data[-2] - (2 * data[-1]))
        nxt[:] = inner
    return {"buf_0": buffers[0], "buf_1": buffers[1]}
