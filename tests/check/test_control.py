"""The measured control (portkit/checking/control.py): an output is held to k times the
error torch's own reference makes in the kernels' precision, against float64."""

from __future__ import annotations

import re

import pytest
import torch

from portkit.checking.compare import REFERENCE_TOLERANCE, Tolerance, compare
from portkit.checking.control import FLOOR, ULPS, control_bound, control_compare, ulp
from portkit.errors import OpDefinitionError

MESSAGE = re.compile(
    r"worst \[[\d,]+\]: err [\d.e+-]+, [\d.e+]+ ULP of float32, [\d.e+]+x torch's float32 "
    r"error; bound 2x"
)


def cancelling_sums(seed: int = 0, segments: int = 4096, terms: int = 32):
    """``terms`` values ~N(0, 8) per segment adding up to about 0.1, as float32, and the
    exact sums in float64."""
    g = torch.Generator().manual_seed(seed)
    t = 8 * torch.randn(segments, terms, generator=g, dtype=torch.float64)
    t = (t - t.mean(1, keepdim=True) + 0.1 / terms).float()
    return t, t.double().sum(1)


def sequential(t: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """A kernel's loop: one running sum per segment, in order, in ``dtype``."""
    acc = torch.zeros(t.shape[0], dtype=dtype)
    for j in range(t.shape[1]):
        acc = (acc + t[:, j].to(dtype)).to(dtype)
    return acc.float()


def reversed_loop(t: torch.Tensor) -> torch.Tensor:
    """Another correct order: the same loop over the terms backwards."""
    return sequential(t.flip(1))


def tree(t: torch.Tensor) -> torch.Tensor:
    """A block reduction's order: pairwise."""
    x = t
    while x.shape[1] > 1:
        x = x[:, 0::2] + x[:, 1::2]
    return x[:, 0]


def index_add(t: torch.Tensor) -> torch.Tensor:
    """The segment sum's reference (tests/user_ops/segment_sum_prototype.py) in float32."""
    ids = torch.arange(t.shape[0]).repeat_interleave(t.shape[1])
    return torch.zeros(t.shape[0]).index_add(0, ids, t.reshape(-1))


@pytest.mark.parametrize(
    "kernel, old_fails",
    [(sequential, True), (reversed_loop, True), (tree, False)],
    ids=["loop", "reversed-loop", "tree"],
)
def test_a_correct_cancelling_sum_passes_where_the_old_atol_failed(kernel, old_fails):
    t, exact = cancelling_sums()
    low = index_add(t)  # torch's float32 reference: the control
    got = kernel(t)
    old = compare("output 0", got, exact.float(), REFERENCE_TOLERANCE["float32"])
    assert (old is not None and old.count > 0) == old_fails
    verdict = control_compare("output 0", got, exact, low, 2.0, torch.float32)
    assert not verdict.failed, verdict.report()
    assert 0 < verdict.margin < 1


@pytest.mark.parametrize(
    "wrong",
    [
        lambda t: sequential(t, torch.float16),  # accumulates in float16
        lambda t: sequential(t[:, 1:]),  # drops a term
        lambda t: sequential(t) * (1 + 2**-12),  # a relative error of 2.4e-4
    ],
    ids=["float16-accumulation", "dropped-term", "scaled"],
)
def test_a_wrong_kernel_fails_with_ulps_and_multiples(wrong):
    t, exact = cancelling_sums()
    verdict = control_compare("output 0", wrong(t), exact, index_add(t), 2.0, torch.float32)
    assert verdict.failed
    report = verdict.report(" [seed 0]")
    assert MESSAGE.search(report), report
    assert (
        "(bound: 2x torch's float32 error against float64 + 2 ULP of float32, "
        "or the float32 table where that is larger)"
    ) in report
    assert report.endswith("[seed 0]")


def test_the_elementwise_bound_alone_would_fail_a_correct_kernel():
    """Why the tensor-wide floor: where torch's own sum lands on (or next to) the exact
    value, a correct kernel summing in another order is many times torch's error there."""
    t, exact = cancelling_sums(segments=16384)
    low, got = index_add(t).double(), reversed_loop(t).double()
    torch_err, err = (low - exact).abs(), (got - exact).abs()
    elementwise = 2 * torch_err + ULPS * ulp(exact, torch.float32)
    assert int((err > elementwise).sum()) > 100  # thousands
    assert float((err / (2 * torch_err.max())).max()) < FLOOR  # the floor covers them


def test_an_element_where_torch_is_exact_still_allows_another_rounding():
    exact = torch.tensor([1.0, 0.5, 3.0], dtype=torch.float64)
    low = exact.float()  # torch exact everywhere: its error is 0
    got = torch.tensor([1.0, 0.5, 3.0 + 2**-22], dtype=torch.float32)  # 1 ULP off at 3.0
    assert not control_compare("o", got, exact, low, 2.0, torch.float32).failed
    far = torch.tensor([1.0, 0.5, 3.0 + 2**-19], dtype=torch.float32)  # 8 ULP off
    verdict = control_compare("o", far, exact, low, 2.0, torch.float32)
    assert verdict.failed and "inf x torch's float32 error" in verdict.report()


def test_special_values_must_match():
    exact = torch.tensor([float("inf"), float("nan"), 1.0], dtype=torch.float64)
    low = exact.float()
    same = control_compare("o", exact.float(), exact, low, 2.0, torch.float32)
    assert not same.failed
    other = torch.tensor([float("-inf"), 0.0, float("nan")])
    verdict = control_compare("o", other, exact, low, 2.0, torch.float32)
    assert verdict.bad == 3 and verdict.nonfinite == 3
    assert "3 NaN/Inf where the other side differs" in verdict.report()


def test_an_exact_value_beyond_the_dtype_must_be_its_infinity():
    # 1e39 overflows float32: the right float32 output is inf, and the largest finite
    # float32 (within rtol of it) is wrong.
    exact = torch.tensor([1e39, 1.0], dtype=torch.float64)
    low = exact.float()
    table = Tolerance(rtol=0.9, atol=0.0)
    right = control_compare("o", exact.float(), exact, low, 2.0, torch.float32, table=table)
    assert not right.failed
    biggest = torch.tensor([torch.finfo(torch.float32).max, 1.0])
    verdict = control_compare("o", biggest, exact, low, 2.0, torch.float32, table=table)
    assert verdict.bad == 1 and verdict.nonfinite == 1


def test_skipped_elements_are_judged_elsewhere():
    exact = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    got = torch.tensor([1.0, 99.0, float("nan")])
    skip = torch.tensor([False, True, True])
    verdict = control_compare("o", got, exact, exact.float(), 2.0, torch.float32, skip)
    assert not verdict.failed and verdict.margin == 0.0


def test_a_shared_bound_gives_the_same_verdict():
    torch.manual_seed(3)
    exact = torch.randn(257, 33, dtype=torch.float64)
    low = (exact * (1 + 1e-7)).float()
    got = (exact * (1 - 2e-7)).float()
    got[5, 7] = 4.0
    bound = control_bound(torch.float32, exact, low, 2.0)
    alone = control_compare("o", got, exact, low, 2.0, torch.float32)
    shared = control_compare("o", got, exact, low, 2.0, torch.float32, bound=bound)
    assert alone == shared and alone.bad >= 1 and alone.worst[0] == (5, 7)


def test_half_outputs_count_ulps_of_their_dtype():
    x = torch.linspace(-3, 3, 1001, dtype=torch.float64)
    exact = torch.exp(x)
    low = torch.exp(x.float()).to(torch.bfloat16)  # float32 compute, rounded once
    right = torch.exp(x.float()).to(torch.bfloat16)
    assert not control_compare("o", right, exact, low, 2.0, torch.float32).failed
    wrong = (torch.exp(x.float()) * (1 + 2**-5)).to(torch.bfloat16)  # 4 ULP of bfloat16
    verdict = control_compare("o", wrong, exact, low, 2.0, torch.float32)
    assert verdict.failed and "ULP of bfloat16" in verdict.report()


def test_ulp_is_the_spacing_of_the_dtype():
    values = torch.tensor([1.0, 1.5, 2.0, 0.0, 1e-40], dtype=torch.float64)
    assert ulp(values, torch.float32).tolist()[:3] == [2**-23, 2**-23, 2**-22]
    assert ulp(values, torch.float32)[3] == torch.finfo(torch.float32).tiny * 2**-23
    assert ulp(torch.tensor([1.0], dtype=torch.float64), torch.bfloat16).item() == 2**-7


@pytest.mark.parametrize("factor", [(2,), (0.5, 5), (2, float("nan")), "2,5", (True, 5)])
def test_error_factor_must_be_two_numbers_of_at_least_one(factor):
    import portkit

    with pytest.raises(OpDefinitionError, match=r"error_factor is \(forward, gradients\)"):

        @portkit.op(reference=torch.sigmoid, cases=portkit.cases.elementwise(), error_factor=factor)
        class Bad:
            def forward(k, x):
                return x, ()


def test_torch_error_is_the_worse_of_two_devices_runs():
    # a GPU's torch.sum (a tree) can be more accurate than the CPU's loop: the control
    # takes, per element, whichever low-precision run is farther from float64
    from portkit.checking.reference_run import farther

    t, exact = cancelling_sums()
    tree = t.sum(1)  # torch's own reduction
    loop = sequential(t)  # the order a CPU loop (and many kernels) take
    both = farther(tree, loop, exact)
    worse = torch.maximum((tree.double() - exact).abs(), (loop.double() - exact).abs())
    assert torch.equal((both.double() - exact).abs(), worse)
    # a correct loop kernel is judged against the larger of the two torch errors
    bound, _ = control_bound(torch.float32, exact, both, 2.0)
    assert bool(((loop.double() - exact).abs() <= bound).all())
    # NaN in the other run never replaces the device's value; shapes that differ keep it
    assert torch.equal(farther(tree, torch.full_like(tree, float("nan")), exact), tree)
    assert farther(tree, loop[:3], exact) is tree


def test_the_cpu_low_run_matches_the_devices_on_a_cpu(load_op):
    # the second run is the same reference on CPU copies: on a CPU it equals the first
    from pathlib import Path

    from portkit.checking.control import low_precision
    from portkit.checking.reference_run import _copy_run, _rounded, control_run
    from portkit.launch.op_inputs import as_tuple
    from portkit.project.cases import make_inputs

    _, op = load_op(Path(__file__).resolve().parents[2], "rmsnorm")
    case = next(c for c in op.definition.cases if c.name == "float32-3x127")
    inputs = [t.requires_grad_(t.dtype.is_floating_point) for t in make_inputs(case, "cpu")]
    runs = control_run(op, case, inputs, backward=True)
    native = as_tuple(op.definition.reference(*inputs, *case.extra))
    run = _copy_run(op, case, inputs, native, True, low_precision, device="cpu")
    outputs, grads = _rounded(run, native, inputs)
    assert outputs and grads
    assert all(torch.equal(a, b) for a, b in zip(runs.low_outputs, outputs))
    assert all(torch.equal(a, b) for a, b in zip(runs.low_grads, grads) if a is not None)
