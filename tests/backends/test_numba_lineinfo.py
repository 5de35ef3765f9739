"""The numba backend under compute-sanitizer compiles with line info, except for ops that
take bfloat16: numba-cuda cannot link line info with its bfloat16 library (H100 run,
results/gpu-results.md), so those run without it."""

from __future__ import annotations

from portkit.backends.numba_gpu import lineinfo_links


def test_only_ops_that_take_bfloat16_run_without_line_info():
    assert lineinfo_links(("float16", "float32", "float64"))
    assert not lineinfo_links(("bfloat16", "float32"))
