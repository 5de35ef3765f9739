"""The dtype contract's three user errors, each one line and exit 2 from the CLI: a dtype
the op does not accept, a twin template that cannot be instantiated for a dtype the op
accepts, and a reference that returns another dtype than the implementation."""

from __future__ import annotations

import pytest

from tests.conftest import unary_op, unary_twin

EXIT_USER_ERROR = 2


@pytest.fixture(autouse=True)
def _collect_garbage_first():
    """cuda.core objects left by earlier tests can print from ``__dealloc__`` when the
    collector reaches them; collect before the command so that its output is its own."""
    import gc

    gc.collect()


def one_line(result) -> str:
    # Without a terminal, check logs a progress line per case on stderr: not the message.
    lines = [
        line
        for line in result.output.strip().splitlines()
        if line.strip() and not line.startswith("checking ")
    ]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


def test_case_with_a_dtype_the_op_does_not_accept(make_project, cli):
    py = unary_op("dt_int", cases='[portkit.cases.custom("int32-n5", [(5,)], "int32")]')
    root = make_project({"dt_int": (py, None)})
    result = cli(root, "check", "dt_int", "--backend", "sim", "--no-compile")
    assert result.exit_code == EXIT_USER_ERROR
    line = one_line(result)
    assert "case 'int32-n5': input 0 is int32, a dtype the op does not accept" in line
    assert "float32, float64" in line


def test_op_naming_an_unknown_dtype(make_project, cli):
    py = unary_op("dt_unknown", op_options='dtypes=("float32", "float8")')
    root = make_project({"dt_unknown": (py, None)})
    result = cli(root, "check", "dt_unknown", "--backend", "sim", "--no-compile")
    assert result.exit_code == EXIT_USER_ERROR
    assert "dtypes ['float8'] unknown" in one_line(result)


HALF_CASES = '[portkit.cases.custom("float16-n5", [(5,)], "float16")]'


@pytest.mark.compile
def test_twin_without_the_half_header(make_project, cli):
    py = unary_op("dt_nohdr", cases=HALF_CASES, op_options='dtypes=("float32", "float16")')
    root = make_project({"dt_nohdr": (py, unary_twin("dt_nohdr"))})
    result = cli(root, "compile", "dt_nohdr")
    assert result.exit_code == EXIT_USER_ERROR
    line = one_line(result)
    assert "accepts float16" in line and "add #include <cuda_fp16.h>" in line


@pytest.mark.compile
def test_twin_template_that_cannot_be_instantiated(make_project, cli):
    """`__half * double` is ambiguous: float32 compiles, float16 does not."""
    py = unary_op("dt_inst", cases=HALF_CASES, op_options='dtypes=("float32", "float16")')
    twin = "#include <cuda_fp16.h>\n" + unary_twin("dt_inst", body="out[i] = x[i] * 2.0;")
    root = make_project({"dt_inst": (py, twin)})
    result = cli(root, "compile", "dt_inst")
    assert result.exit_code == EXIT_USER_ERROR
    line = one_line(result)
    assert "kernel dt_inst_fwd cannot be instantiated with T=__half" in line
    assert "dt_inst.cu(" in line  # NVRTC's file(line) of the first error


def test_reference_returning_another_dtype(make_project, cli):
    py = unary_op("dt_ref", reference="lambda x: (x * 2).double()")
    root = make_project({"dt_ref": (py, None)})
    result = cli(root, "check", "dt_ref", "--backend", "sim", "--no-compile")
    assert result.exit_code == EXIT_USER_ERROR
    line = one_line(result)
    assert "output 0 of the sim implementation is float32" in line
    assert "the reference returns float64" in line
