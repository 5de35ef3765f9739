"""The numba backend under compute-sanitizer compiles with line info, except for ops that
take bfloat16: numba-cuda cannot link line info with its bfloat16 library (H100 run,
docs/gpu-results.md), so those run without it and say so."""

from __future__ import annotations

from portkit.backends.numba_gpu import lineinfo_links


def test_ops_without_bfloat16_get_line_info(capsys):
    assert lineinfo_links(("float16", "float32", "float64"), "softmax")
    assert capsys.readouterr().err == ""


def test_an_op_taking_bfloat16_runs_without_line_info_and_says_so(capsys):
    assert not lineinfo_links(("bfloat16", "float32"), "rmsnorm")
    err = capsys.readouterr().err
    assert "rmsnorm: numba kernels compiled without line info" in err
