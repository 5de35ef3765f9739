"""A CSR segment sum (a newcomer's op): offsets are a structured input, and the
measured control passes the correct kernel on a cancelling sum (32 terms ~N(0, 8) per
output adding up to about 0.1) that the old float32 atol failed, while a kernel that
accumulates in float16 or drops a term fails with its distance in ULPs and in multiples
of torch's own float32 error."""

from __future__ import annotations

import json
import re

import pytest
import torch

from portkit.backends.twin_cpu.build import find_compiler
from portkit.checking.compare import REFERENCE_TOLERANCE, compare
from portkit.checking.reference_run import reference_run
from portkit.project.cases import make_inputs
from tests.user_ops.op_files import sources

PROTOTYPE, TWIN = sources("segment_sum")
CPU = ("--backend", "sim,torch,twin-cpu", "--no-compile", "--json")
LOOP = "for (long long r = offsets[s]; r < offsets[s + 1]; ++r) out[i] += values[r * cols + c];"
FLOAT16_ACCUMULATION = """__half acc = __float2half(0.0f);
        for (long long r = offsets[s]; r < offsets[s + 1]; ++r)
            acc = __float2half(__half2float(acc) + (float)values[r * cols + c]);
        out[i] = (T)__half2float(acc);"""
MESSAGE = re.compile(
    r"worst \[[\d,]+\]: err [\d.e+-]+, [\d.e+]+ ULP of float32, [\d.e+]+x torch's float32 "
    r"error; bound 2x"
)
needs_compiler = pytest.mark.skipif(find_compiler() is None, reason="no C++ compiler")


def rows_of(result) -> list[dict]:
    return json.loads(result.stdout)["results"]


@needs_compiler
def test_segment_sum_passes_on_the_cpu_backends(make_project, cli):
    root = make_project({"segment_sum": (PROTOTYPE, TWIN)})
    result = cli(root, "check", "segment_sum", *CPU)
    rows = rows_of(result)
    assert result.exit_code == 0, [r for r in rows if r["status"] == "fail"]
    ran = {(r["case"], r["backend"], r["check"]) for r in rows if r["status"] == "pass"}
    for backend in ("sim", "twin-cpu"):
        assert ("float32-cancelling", backend, "forward") in ran
        assert ("float64-gradcheck", backend, "gradcheck") in ran
    cancelling = [r for r in rows if r["case"] == "float32-cancelling" and r["check"] == "forward"]
    assert all(0 < r["margin"] < 1 for r in cancelling)


def test_the_old_float32_tolerance_failed_the_correct_cancelling_sum(make_project, load_op):
    from portkit.backends import create

    config, op = load_op(make_project({"segment_sum": (PROTOTYPE, None)}), "segment_sum")
    case = op.case("float32-cancelling")
    values, offsets = make_inputs(case, "cpu")
    assert torch.equal(offsets, torch.arange(0, 4096 * 32 + 1, 32))
    sums = values.double().reshape(4096, 32).sum(1)
    assert float(values.abs().mean()) > 4 and float((sums - 0.1).abs().max()) < 1e-5
    k = create("sim", config).kernels(op)
    got, _ = op.definition.forward(k, values, offsets)
    (expected,), _ = reference_run(op, case, [values, offsets], backward=False)
    old = compare("output 0", got, expected, REFERENCE_TOLERANCE["float32"])
    assert old is not None and old.count >= 1, "no cancellation: the case shows nothing"


@needs_compiler
@pytest.mark.parametrize(
    "wrong",
    [
        ("#include <cuda_fp16.h>\n", FLOAT16_ACCUMULATION),
        ("", "out[i] = (T)0;\n        " + LOOP.replace("offsets[s];", "offsets[s] + 1;")),
    ],
    ids=["float16-accumulation", "dropped-term"],  # the second starts a term later
)
def test_a_wrong_twin_fails_with_ulps_and_multiples_of_torchs_error(make_project, cli, wrong):
    header, body = wrong
    assert LOOP in TWIN
    twin = header + TWIN.replace("out[i] = (T)0;\n        " + LOOP, body)
    assert twin != header + TWIN
    root = make_project({"segment_sum": (PROTOTYPE, twin)})
    result = cli(root, "check", "segment_sum", *CPU, "--case", "float32-cancelling")
    assert result.exit_code == 1
    (failed,) = [r for r in rows_of(result) if r["backend"] == "twin-cpu" and r["check"] ==
                 "forward"]
    assert failed["status"] == "fail" and failed["margin"] > 10
    assert MESSAGE.search(failed["detail"]), failed["detail"]
    assert "got (twin-cpu) vs expected (reference in float64)" in failed["detail"]


@pytest.mark.compile
def test_segment_sum_passes_check(check_op):
    result, rows = check_op("segment_sum")
    assert result.exit_code == 0, [r for r in rows if r["status"] == "fail"]


def test_bench_does_not_grow_a_case_that_makes_its_own_inputs(make_project, load_op):
    from portkit.bench.scaling import at_shapes, gpu_sized
    from portkit.errors import PortkitError

    _, op = load_op(make_project({"segment_sum": (PROTOTYPE, None)}), "segment_sum")
    assert gpu_sized(op).name == "float32-cancelling"  # the largest, left at its own size
    with pytest.raises(PortkitError, match=r"case float32-cancelling makes its own inputs"):
        at_shapes(op, ((8192 * 32, 1),))
