"""Cooperative groups' grid barrier (``cuda.cg.this_grid().sync()``): not simulated
yet. A kernel using it stops with one line saying so and why; the test of what it
should compute is a strict xfail until the per-thread engine can suspend every block at
a grid barrier."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from portkit.errors import KernelError
from portkit.simt import simulate


@cuda.jit
def shift_left_after_grid_sync(x, out):
    i = cuda.grid(1)
    x[i] = i * 2
    g = cuda.cg.this_grid()
    g.sync()  # every block's writes to x are visible past here
    out[i] = x[(i + 1) % x.size]


def _launch():
    blocks, threads = 4, 32
    x = np.zeros(blocks * threads, np.int64)
    out = np.zeros_like(x)
    simulate(shift_left_after_grid_sync)[blocks, threads](x, out)
    return out


def test_grid_sync_stops_with_one_line_not_supported_yet():
    with pytest.raises(KernelError) as caught:
        _launch()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "cuda.cg (cooperative groups, this_grid().sync()) is not supported yet"
    )
    assert "one block at a time" in message


@pytest.mark.xfail(strict=True, raises=KernelError, reason="grid sync is not simulated yet")
def test_grid_sync_orders_writes_across_blocks():
    out = _launch()
    n = out.size
    assert np.array_equal(out, (np.arange(n) + 1) % n * 2)
