"""A depthwise 1-D convolution written from the docs alone: a 3-D grid, a shared-memory
tile with its halo (its shape a module-level constant, as numba requires), a backward
whose weight gradient sums with float atomics. It must pass `portkit check` wherever it
runs, and a twin that leaves part of that gradient unzeroed must fail, the message naming
which side got what."""

from __future__ import annotations

from tests.user_ops.op_files import sources

PROTOTYPE, TWIN = sources("dwconv")


def test_depthwise_conv_with_a_shared_halo_passes_check(check_op):
    result, rows = check_op("dwconv")
    failed = [r for r in rows if r["status"] == "fail"]
    assert result.exit_code == 0, failed
    ran = {(r["backend"], r["check"]) for r in rows if r["status"] == "pass"}
    assert {("sim", "backward"), ("sim", "gradcheck"), ("torch", "gradcheck")} <= ran
    # The weight gradient is summed by float atomics: the row states its bound.
    backward = [r["detail"] for r in rows if r["backend"] == "sim" and r["check"] == "backward"]
    assert any("float atomics" in d and "summation-order bound" in d for d in backward)


def test_a_twin_that_zeroes_only_part_of_the_weight_gradient_fails(check_op):
    fixed = "dw[blockIdx.x * K + threadIdx.y] = T(0);"
    assert fixed in TWIN
    wrong = TWIN.replace(fixed, "dw[blockIdx.x * K + threadIdx.x] = T(0);")
    result, rows = check_op("dwconv", wrong)
    assert result.exit_code == 1
    details = [r["detail"] for r in rows if r["status"] == "fail"]
    assert any("grad of input 1 (w)" in d and "expected (twin" in d for d in details), details
