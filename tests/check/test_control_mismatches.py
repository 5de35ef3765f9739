"""``control_mismatches``: the elements `portkit diff` counts (and `portkit bench`
refuses) are the elements `portkit check`'s verdict counts, special values included."""

from __future__ import annotations

import pytest
import torch

from portkit.checking.compare import REFERENCE_TOLERANCE, Tolerance
from portkit.checking.control import control_compare
from portkit.checking.tensor_check import Control, check_tensor, control_mismatches

TABLE = REFERENCE_TOLERANCE["float32"]


def pair(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(got float32, exact float64, torch's float32 run) with a few wrong and special
    elements in got."""
    generator = torch.Generator().manual_seed(seed)
    exact = torch.randn(64, 33, dtype=torch.float64, generator=generator)
    low = (
        exact * (1 + 3e-7 * torch.randn(64, 33, dtype=torch.float64, generator=generator))
    ).float()
    got = (exact * (1 - 2e-7)).float()
    got[1, 2] = 5.0
    got[3, 4] = float("nan")
    exact[5, 6] = float("inf")
    low[5, 6] = float("inf")
    got[5, 6] = float("inf")  # an infinity where the exact value is one: not a mismatch
    exact[7, 8] = float("nan")
    low[7, 8] = float("nan")
    got[7, 8] = float("nan")  # NaN against NaN: not a mismatch
    got[9, 10] = float("-inf")
    return got, exact, low


@pytest.mark.parametrize("seed", range(5))
def test_the_mask_counts_what_the_verdict_counts(seed):
    got, exact, low = pair(seed)
    control = Control(exact, low, torch.float32, 2.0)
    judged = control_mismatches(got, exact.float(), TABLE, None, control)
    assert judged is not None
    outside, allowed = judged
    verdict = control_compare("o", got, exact, low, 2.0, torch.float32, table=TABLE)
    assert int(outside.sum()) == verdict.bad >= 3
    assert bool(outside[1, 2] & outside[3, 4] & outside[9, 10])
    assert not bool(outside[5, 6] | outside[7, 8])
    tensor = check_tensor("o", got, exact.float(), TABLE, None, ("sim", "reference"), "", control)
    assert f"{verdict.bad} of {got.numel()} elements differ" in tensor.problems[0]


def test_a_declared_tolerance_or_float64_keeps_the_table():
    got, exact, low = pair(0)
    control = Control(exact, low, torch.float32, 2.0)
    declared = Tolerance(rtol=1e-3, atol=1e-3, reason="an approximation")
    assert control_mismatches(got, exact.float(), declared, None, control) is None
    wide = Control(exact, exact, torch.float64, 2.0)
    assert control_mismatches(got.double(), exact, TABLE, None, wide) is None
    assert control_mismatches(got, exact.float(), TABLE, None, None) is None
