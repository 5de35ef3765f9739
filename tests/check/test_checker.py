"""The checker catches wrong kernels, and says how many elements differ, by how much,
where the first one is (with both values) and which seed reproduces it."""

from __future__ import annotations

import math
import re

import pytest
import torch

from portkit.backends import create
from portkit.checking.compare import (
    REFERENCE_TOLERANCE,
    Tolerance,
    compare,
    identical,
    ulp_distance,
)
from portkit.checking.harness import run_case
from portkit.project.cases import make_grad_outputs, make_inputs

# One float32 case of 129 elements, seed 7: five 32-thread blocks, the last one partial.
CASE = '[portkit.cases.custom("float32-n129", [(129,)], seed=7)]'
SIGMOID = "torch.sigmoid"
SIGMOID_BODY = "out[i] = 1.0 / (1.0 + math.exp(-x[i]))"


@pytest.fixture
def run(make_project, sources, load_op):
    """``run(name, body, ...)`` -> ({check: CheckResult}, op, case) of one sim run."""

    def go(name: str, body: str = "out[i] = x[i] * 2.0", **options):
        options.setdefault("cases", CASE)
        py = sources.unary_op(name, body, **options)
        root = make_project({name: (py, None)})
        config, op = load_op(root, name)
        (case,) = op.definition.cases
        results = run_case(op, case, [create("sim", config)])
        by_check = {r.check: r for r in results}
        assert len(by_check) == len(results)
        assert all(r.backend == "sim" and r.case == case.name for r in results)
        return by_check, op, case

    return go


def expected_x2(case):
    return make_inputs(case, "cpu")[0] * 2


def assert_report(detail: str, *, count: int, total: int = 129, index: int, got, expected):
    """The parts every mismatch report must have."""
    assert f"output 0: {count} of {total} elements differ" in detail
    assert "got (sim) vs expected (reference) (rtol=1.3e-06, atol=1e-05)" in detail
    figures = r"max abs err [0-9.e+-]+, max rel err [0-9.e+-]+, max ULP \d+"
    if math.isnan(got):  # NaN against a number: counted as such, no error figures
        assert "NaN/Inf where the other side differs" in detail
        assert not re.search(figures, detail)
    else:
        assert re.search(figures, detail)
    assert f"first: [{index}] got {got!r} expected {expected!r}" in detail
    assert "seed 7" in detail
    assert "reproduce: portkit check" in detail and "--case float32-n129" in detail


def test_correct_op_passes(run):
    results, _, _ = run("chk_ok", backward="dx[i] = dy[i] * 2.0")
    assert {c: r.status for c, r in results.items()} == {"forward": "pass", "backward": "pass"}
    assert all(r.detail == "" for r in results.values())


def test_a_case_draws_its_upstream_gradients_once(run, randn_seeds):
    """The reference, its controls and the implementation seed one draw of the upstream
    gradients (a GPU-sized case's CPU draw costs seconds), not one each."""
    results, _, case = run("chk_draws", backward="dx[i] = dy[i] * 2.0")
    assert results["backward"].status == "pass"
    assert randn_seeds.count(case.seed + 10_007) == 1, randn_seeds


def test_correct_op_with_gradcheck_passes(run):
    cases = '[portkit.cases.custom("float64-gradcheck", [(7,)], "float64", gradcheck=True)]'
    results, _, _ = run(
        "chk_gc",
        SIGMOID_BODY,
        reference=SIGMOID,
        cases=cases,
        backward="s = 1.0 / (1.0 + math.exp(-x[i]))\ndx[i] = dy[i] * s * (1.0 - s)",
    )
    assert {c: r.status for c, r in results.items()} == {
        "forward": "pass",
        "backward": "pass",
        "gradcheck": "pass",
    }


def test_empty_kernel_is_caught(run):
    results, _, case = run("chk_empty", "pass")
    forward = results["forward"]
    assert forward.status == "fail"
    e = expected_x2(case)
    assert_report(forward.detail, count=129, index=0, got=math.nan, expected=float(e[0]))
    assert "[1] got nan" in forward.detail  # up to five mismatches are shown


def test_off_by_one_bound_is_caught(run):
    results, _, case = run("chk_obo", bound="i < n - 1")
    forward = results["forward"]
    assert forward.status == "fail"
    e = expected_x2(case)
    assert_report(forward.detail, count=1, index=128, got=math.nan, expected=float(e[128]))


def test_zeros_everywhere_is_caught(run):
    results, _, case = run("chk_zero", "out[i] = 0.0")
    forward = results["forward"]
    assert forward.status == "fail"
    e = expected_x2(case)
    assert_report(forward.detail, count=129, index=0, got=0.0, expected=float(e[0]))
    assert f"max abs err {float(e.abs().max()):.3g}" in forward.detail
    assert "max rel err 1," in forward.detail


def test_kernel_modifying_its_input_is_caught(run):
    results, _, _ = run("chk_mod", "out[i] = x[i] * 2.0\nx[i] = 0.0")
    forward = results["forward"]
    assert forward.status == "fail"
    assert "input 0 was modified by the forward (kernels must not write their inputs)" in (
        forward.detail
    )
    assert "elements differ" not in forward.detail  # the output itself is right


def test_backward_modifying_its_input_is_caught(run):
    results, _, _ = run("chk_bmod", backward="dx[i] = dy[i] * 2.0\nx[i] = 1.0")
    assert results["forward"].status == "pass"
    assert results["backward"].status == "fail"
    assert "input 0 was modified by the backward" in results["backward"].detail


def test_low_precision_is_caught(run):
    """A float32 output against the measured control (checking/control.py): the report
    counts the elements outside it and says how far in ULPs and in torch's errors."""
    from portkit.checking.control import control_compare

    body = "s = 1.0 / (1.0 + math.exp(-x[i]))\nout[i] = math.floor(s * 100.0 + 0.5) / 100.0"
    results, _, case = run("chk_round", body, reference=SIGMOID)
    forward = results["forward"]
    assert forward.status == "fail"
    x = make_inputs(case, "cpu")[0]
    exact = torch.sigmoid(x.double())
    rounded = (torch.floor(exact * 100 + 0.5) / 100).float()
    verdict = control_compare("output 0", rounded, exact, torch.sigmoid(x), 2.0, torch.float32)
    assert verdict.bad > 100  # rounding to 1/100 is thousands of float32 ULPs
    detail = forward.detail
    assert f"output 0: {verdict.bad} of 129 elements differ" in detail
    assert "got (sim) vs expected (reference in float64)" in detail
    assert (
        "(bound: 2x torch's float32 error against float64 + 2 ULP of float32, "
        "or the float32 table where that is larger)"
    ) in detail
    assert re.search(r"ULP of float32, [\d.e+]+x torch's float32 error; bound 2x", detail)
    (index, got, want), *_ = [(i, a, e) for i, a, e, _, _ in verdict.first]
    assert f"first: [{index[0]}] got {got!r} expected {want!r}" in detail
    assert "seed 7" in detail and "--case float32-n129" in detail
    max_abs = float(re.search(r"worst \[\d+\]: err ([0-9.e+-]+),", detail).group(1))
    assert 1e-3 < max_abs <= 0.005 + 1e-6


def test_wrong_backward_is_caught(run):
    results, _, case = run("chk_bwd", backward="dx[i] = dy[i] * 3.0")
    assert results["forward"].status == "pass"
    backward = results["backward"]
    assert backward.status == "fail"
    (dy,) = make_grad_outputs(case, [torch.empty(129)])
    detail = backward.detail
    assert "grad of input 0 (x): 129 of 129 elements differ" in detail
    assert f"first: [0] got {float(dy[0] * 3)!r} expected {float(dy[0] * 2)!r}" in detail
    assert "max abs err" in detail and "seed 7" in detail


def test_wrong_backward_fails_gradcheck(run):
    cases = '[portkit.cases.custom("float64-gradcheck", [(7,)], "float64", gradcheck=True)]'
    results, _, _ = run("chk_gcbad", cases=cases, backward="dx[i] = dy[i] * 3.0")
    assert results["backward"].status == "fail"
    assert results["gradcheck"].status == "fail"
    assert "Jacobian mismatch" in results["gradcheck"].detail
    assert "seed 0" in results["gradcheck"].detail


def test_launcher_exception_fails_only_that_check(run):
    results, _, _ = run("chk_raise", grid="portkit.cdiv(n, THREADS) * 0")
    forward = results["forward"]
    assert forward.status == "fail"
    assert "has a dimension below 1" in forward.detail
    assert "seed 7" in forward.detail


def test_gpu_only_case_is_skipped_in_sim(make_project, sources, load_op):
    cases = '[portkit.cases.custom("big", [(1 << 24,)], gpu_only=True)]'
    root = make_project({"chk_big": (sources.unary_op("chk_big", cases=cases), None)})
    config, op = load_op(root, "chk_big")
    (result,) = run_case(op, op.definition.cases[0], [create("sim", config)])
    assert (result.check, result.status) == ("run", "skip")
    assert result.detail == "case is too large for the simulator"


def test_large_case_runs_in_sim_and_a_gpu_only_reason_is_the_skip(make_project, sources, load_op):
    cases = (
        '[portkit.cases.custom("big", [(300,)], large=True),'
        ' portkit.cases.custom("huge", [(300,)], large=True, gpu_only="needs an hour")]'
    )
    root = make_project({"chk_large": (sources.unary_op("chk_large", cases=cases), None)})
    config, op = load_op(root, "chk_large")
    big, huge = op.definition.cases
    sim = create("sim", config)
    results = run_case(op, big, [sim])
    assert [(r.check, r.status) for r in results] == [("forward", "pass")]
    (skipped,) = run_case(op, huge, [sim])
    assert (skipped.status, skipped.detail) == ("skip", "needs an hour")


class _CpuBackend:
    """Stands in for a simulated CPU backend other than portkit's simulator."""

    role, device, simulated, unavailable_reason = "twin", "cpu", True, None

    def __init__(self, name: str) -> None:
        self.name = name
        self.runs_large_cases_on_cpu = name == "sim"  # as the backends declare it

    def unsupported_reason(self, op) -> None:
        return None


@pytest.mark.parametrize("name", ["twin-cpu", "numba-sim"])
def test_large_case_is_skipped_on_other_cpu_backends(name):
    from portkit.checking.harness import skip_reason
    from portkit.project.cases import Case

    large = Case("big", ((1 << 24,),), large=True)
    reason = skip_reason(None, large, _CpuBackend(name))
    assert reason and reason.startswith("large case: on a CPU only portkit's simulator")
    assert skip_reason(None, Case("small", ((4,),)), _CpuBackend(name)) is None


# -- compare -------------------------------------------------------------------------------

F32 = REFERENCE_TOLERANCE["float32"]
F64 = REFERENCE_TOLERANCE["float64"]


def t32(*values):
    return torch.tensor(values, dtype=torch.float32)


def test_equal_tensors_pass():
    assert compare("x", t32(1.0, -2.0, 0.0), t32(1.0, -2.0, 0.0), F32) is None


def test_nan_equals_nan():
    nan = math.nan
    assert compare("x", t32(nan, 1.0), t32(nan, 1.0), F32) is None


def test_nan_against_number_fails():
    mismatch = compare("x", t32(math.nan, 1.0), t32(0.5, 1.0), F32)
    assert mismatch is not None and mismatch.count == 1 and mismatch.total == 2
    ((index, got, expected),) = mismatch.first
    assert index == (0,) and math.isnan(got) and expected == 0.5


def test_inf_against_large_finite_fails():
    big = torch.finfo(torch.float32).max
    mismatch = compare("x", t32(math.inf, 1.0), t32(big, 1.0), F32)
    assert mismatch is not None
    assert mismatch.count == 1
    assert mismatch.first[0][0] == (0,)
    assert mismatch.first[0][1] == math.inf


def test_inf_matches_inf():
    assert compare("x", t32(math.inf, -math.inf), t32(math.inf, -math.inf), F32) is None


def test_minus_inf_against_inf_fails():
    mismatch = compare("x", t32(-math.inf), t32(math.inf), F32)
    assert mismatch is not None and mismatch.count == 1
    assert "got -inf expected inf" in mismatch.report()


@pytest.mark.parametrize(
    "dtype, value", [(torch.float32, 1e-4), (torch.float64, 1e-6), (torch.float32, 3.0)]
)
def test_all_zero_output_fails(dtype, value):
    """Tolerances are rtol + atol, never atol alone: zeros do not pass for small data."""
    expected = torch.full((10,), value, dtype=dtype)
    table = REFERENCE_TOLERANCE[str(dtype).removeprefix("torch.")]
    mismatch = compare("out", torch.zeros_like(expected), expected, table)
    assert mismatch is not None
    assert mismatch.count == 10
    assert mismatch.max_rel == pytest.approx(1.0)


def test_tolerance_is_atol_plus_rtol_times_expected():
    tol = Tolerance(rtol=1e-3, atol=1e-2)
    e = torch.tensor([1000.0], dtype=torch.float64)
    bound = tol.atol + tol.rtol * 1000.0  # 1.01
    assert compare("x", e + 0.9 * bound, e, tol) is None
    assert compare("x", e - 0.9 * bound, e, tol) is None
    assert compare("x", e + 1.1 * bound, e, tol) is not None
    # near zero the absolute floor decides: 0.011 is outside 0.01 + 1e-3 * 0.011
    zero = torch.tensor([0.0], dtype=torch.float64)
    assert compare("x", zero, torch.tensor([0.011], dtype=torch.float64), tol) is not None
    assert compare("x", zero, torch.tensor([0.009], dtype=torch.float64), tol) is None


def test_shape_mismatch_reported():
    mismatch = compare("output 0", t32(1.0, 2.0, 3.0), t32(1.0, 2.0, 3.0, 4.0), F32)
    assert mismatch is not None
    assert mismatch.report() == "output 0: got shape (3,), expected shape (4,)"


def test_dtype_mismatch_reported():
    mismatch = compare("output 0", t32(1.0), torch.tensor([1.0], dtype=torch.float64), F64)
    assert mismatch is not None
    assert mismatch.report(" [seed 3]") == (
        "output 0: got dtype torch.float32, expected dtype torch.float64 [seed 3]"
    )


def test_report_lists_at_most_five_and_multi_dim_index():
    e = torch.zeros(3, 4)
    a = e.clone()
    a[1:, :] = 1.0
    mismatch = compare("out", a, e, F32)
    assert mismatch.count == 8 and mismatch.total == 12
    assert len(mismatch.first) == 5
    assert mismatch.first[0] == ((1, 0), 1.0, 0.0)
    report = mismatch.report()
    assert "8 of 12 elements differ" in report
    assert "[1,0] got 1.0 expected 0.0" in report
    assert "max abs err 1" in report


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ulp_distance_adjacent_floats(dtype):
    a = torch.tensor([1.0, -3.5, 0.0, 1e-30, 1e10], dtype=dtype)
    b = torch.nextafter(a, torch.tensor(math.inf, dtype=dtype))
    assert ulp_distance(a, b).tolist() == [1] * 5
    assert ulp_distance(b, a).tolist() == [1] * 5
    c = torch.nextafter(b, torch.tensor(math.inf, dtype=dtype))
    assert ulp_distance(a, c).tolist() == [2] * 5


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ulp_distance_across_zero(dtype):
    zero = torch.zeros(1, dtype=dtype)
    tiny = torch.nextafter(zero, torch.ones(1, dtype=dtype))  # smallest subnormal
    assert int(ulp_distance(-zero, zero)) == 0
    assert int(ulp_distance(zero, tiny)) == 1
    assert int(ulp_distance(-tiny, tiny)) == 2


def test_mismatch_reports_ulps():
    a = t32(1.0)
    b = torch.nextafter(a, torch.tensor(math.inf))
    for _ in range(99):
        b = torch.nextafter(b, torch.tensor(math.inf))
    mismatch = compare("x", b, a, Tolerance(rtol=0.0, atol=0.0))
    assert mismatch is not None and mismatch.max_ulp == 100


def test_identical_is_bitwise():
    assert identical(t32(math.nan, 1.0), t32(math.nan, 1.0))
    assert not identical(t32(0.0), t32(-0.0))
    assert not identical(t32(1.0), torch.tensor([1.0], dtype=torch.float64))
    assert not identical(t32(1.0, 2.0), t32(1.0))


def test_large_case_is_left_to_the_gpu_where_there_is_one():
    from portkit.checking.harness import skip_reason
    from portkit.project.cases import Case

    class _Gpu(_CpuBackend):
        device, simulated, role = "cuda", False, "twin"

    large = Case("big", ((1 << 24,),), large=True)
    sim = _CpuBackend("sim")
    assert skip_reason(None, large, sim, [sim]) is None  # no GPU: the simulator runs it
    reason = skip_reason(None, large, sim, [sim, _Gpu("twin")])
    assert reason and "checked on this machine's GPU (twin)" in reason
    assert skip_reason(None, large, _Gpu("twin"), [sim, _Gpu("twin")]) is None
