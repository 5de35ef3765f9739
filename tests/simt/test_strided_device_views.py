"""A device array's strided view (``d[::3]``, ``d[10:4:-2]``, ``d[1:4, ::2]``) is passed
to a kernel as it is, as numba passes it on a GPU: reads see the view's elements and
writes land in the device array. A non-contiguous *host* array is still refused, as
numba refuses to copy one to a GPU. Run as numba code, unedited, under --portkit-simt."""

from __future__ import annotations

import pytest

SUITE = """
import numpy as np
import pytest
from numba import cuda


@cuda.jit
def double_in_place(x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] = x[i] * 2


@cuda.jit
def column_sums(m, out):
    j = cuda.grid(1)
    if j < m.shape[1]:
        s = 0.0
        for i in range(m.shape[0]):
            s += m[i, j]
        out[j] = s


def test_writes_through_a_strided_view_land_in_the_device_array():
    base = np.arange(12, dtype=np.float64)
    d = cuda.to_device(base)
    double_in_place[1, 32](d[::3])
    double_in_place[1, 32](d[10:4:-2])
    expected = base.copy()
    expected[::3] *= 2
    expected[10:4:-2] *= 2
    np.testing.assert_array_equal(d.copy_to_host(), expected)


def test_a_sliced_matrix_reads_as_a_view():
    m = np.arange(30, dtype=np.float64).reshape(5, 6)
    out = cuda.device_array(3, np.float64)
    column_sums[1, 32](cuda.to_device(m)[1:4, ::2], out)
    np.testing.assert_array_equal(out.copy_to_host(), m[1:4, ::2].sum(axis=0))


def test_a_non_contiguous_host_array_is_still_refused():
    with pytest.raises(Exception, match="non-contiguous view"):
        double_in_place[1, 32](np.arange(12.0)[::3])
"""


@pytest.mark.parametrize("engine", ["per-thread", "lockstep"])
def test_strided_device_views_run_as_on_a_gpu(tmp_path, monkeypatch, engine):
    from tests.simt.plugin_run import run_pytest

    monkeypatch.setenv("PORTKIT_SIMT_ENGINE", engine)
    result = run_pytest(tmp_path, "test_views.py", SUITE, "--portkit-simt")
    assert "3 passed" in result.stdout, result.stdout[-3000:]
