"""The summation-order bound for elements float atomics sum (portkit/checking/order_bound.py):
it holds for every order, it is what a few ULPs are not, and it still sees a wrong sum."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from portkit.checking.compare import REFERENCE_TOLERANCE, TWIN_TOLERANCE, Tolerance, compare
from portkit.checking.order_bound import OrderBound, compare_summed, order_term

ZERO = Tolerance(0.0, 0.0)


def _bound(counts, magnitudes) -> OrderBound:
    return OrderBound(torch.tensor(counts, dtype=torch.int64), torch.tensor(magnitudes).double())


def _sum_in_order(values: np.ndarray) -> np.float32:
    """A float32 sum one term after another, as atomics on one element do."""
    total = np.float32(0)
    for v in values:
        total = np.float32(total + v)
    return total


def test_the_bound_holds_for_every_order_a_few_ulps_do_not():
    rng = np.random.default_rng(0)
    # Cancellation: large terms of both signs, a small sum.
    values = (rng.standard_normal(300) * 1e3).astype(np.float32)
    sums = np.array([_sum_in_order(rng.permutation(values)) for _ in range(200)])
    spread = float(sums.max() - sums.min())
    bound = _bound([values.size], [float(np.abs(values.astype(np.float64)).sum())])
    assert spread <= float(order_term(bound, torch.float32)[0])
    low, high = torch.tensor([sums.min()]), torch.tensor([sums.max()])
    assert compare("out", high, low, TWIN_TOLERANCE["float32"]) is not None  # what flipped
    _, verdict = compare_summed("out", high, low, ZERO, bound)
    assert not verdict.failed


def test_order_term_is_two_gamma_n_times_the_magnitude():
    u = 2.0**-24
    term = order_term(_bound([0, 1, 64, 1 << 24], [5.0, 2.0, 3.0, 1.0]), torch.float32)
    assert term[0] == 0
    assert term[1] == pytest.approx(2 * u / (1 - u) * 2.0, rel=1e-12)
    assert term[2] == pytest.approx(2 * 64 * u / (1 - 64 * u) * 3.0, rel=1e-12)
    assert torch.isinf(term[3])  # n * u reaches 1: no finite bound
    half = order_term(_bound([8], [1.0]), torch.float16)
    assert half[0] == pytest.approx(2 * 8 * 2.0**-11 / (1 - 8 * 2.0**-11), rel=1e-12)


def test_a_dropped_contribution_is_outside_the_bound():
    values = torch.linspace(-1, 2, 64, dtype=torch.float32)
    exact = values.sum().reshape(1)
    dropped = (values.sum() - values[40]).reshape(1)
    bound = _bound([64], [float(values.abs().sum())])
    _, verdict = compare_summed("output 0", dropped, exact, TWIN_TOLERANCE["float32"], bound)
    assert verdict.failed and verdict.bad == 1
    report = verdict.report(" [seed 1]")
    assert report.startswith("output 0 (float atomics on 1 of 1 elements, up to 64 contributions)")
    assert "differ by more than the summation-order bound" in report and "[seed 1]" in report


def test_only_summed_elements_get_the_bound_and_specials_compare_as_values():
    expected = torch.tensor([1.0, 2.0, float("nan"), float("inf"), 5.0])
    actual = torch.tensor([1.0 + 1e-3, 2.0 + 1e-3, float("nan"), float("inf"), float("nan")])
    bound = _bound([0, 4000, 4000, 4000, 4000], [0.0, 1e4, 1e4, 1e4, 1e4])
    rest, verdict = compare_summed("out", actual, expected, REFERENCE_TOLERANCE["float32"], bound)
    assert verdict.bad == 1 and verdict.first[0][0] == (4,)  # NaN where 5 was expected
    assert verdict.summed == 4 and verdict.most == 4000
    mismatch = compare("out", rest, expected, REFERENCE_TOLERANCE["float32"])
    assert mismatch is not None and mismatch.count == 1 and mismatch.first[0][0] == (0,)
