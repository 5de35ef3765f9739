"""The tolerance table covers every dtype of the contract; integers and bool compare
exactly (an int32 output once crashed compare with ``torch.finfo``); half precision
counts ULPs in its own format."""

from __future__ import annotations

import pytest
import torch

from portkit.checking.compare import (
    REFERENCE_TOLERANCE,
    TOLERANCES,
    TWIN_TOLERANCE,
    Tolerance,
    compare,
    identical,
    tolerance_for,
    ulp_distance,
)
from portkit.project.dtypes import DTYPES


def test_table_covers_every_dtype_and_twin_is_never_looser():
    assert set(TOLERANCES) == set(DTYPES)
    for name, row in TOLERANCES.items():
        assert row.twin.rtol <= row.reference.rtol and row.twin.atol <= row.reference.atol, name


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.int8, torch.int16])
def test_integers_compare_exactly(dtype):
    expected = torch.tensor([0, 1, 5, 100], dtype=dtype)
    assert (
        compare("out", expected.clone(), expected, tolerance_for(REFERENCE_TOLERANCE, dtype))
        is None
    )
    actual = expected.clone()
    actual[2] += 1
    mismatch = compare("out", actual, expected, tolerance_for(REFERENCE_TOLERANCE, dtype))
    assert mismatch is not None and mismatch.count == 1 and mismatch.max_ulp == 1
    report = mismatch.report()
    # Integers: the exact difference and whole values, never ULPs.
    assert "[2] got 6 expected 5" in report and "max difference 1;" in report
    assert "ULP" not in report and "(exact)" in report


def test_nan_against_finite_is_reported_as_such():
    expected = torch.tensor([1.0, 1.5, 2.0])
    actual = torch.tensor([1.0, float("nan"), 2.0])
    report = compare("out", actual, expected, Tolerance(1e-6, 1e-6)).report()
    assert "1 NaN/Inf where the other side differs" in report
    assert "[1] got nan expected 1.5" in report
    assert "max abs err" not in report and "max ULP" not in report


def test_report_names_both_sides_and_a_declared_reason():
    tolerance = Tolerance(1e-6, 1e-6, reason="summed in another order")
    actual, expected = torch.tensor([1.0, 2.0]), torch.tensor([1.0, 3.0])
    report = compare("output 0", actual, expected, tolerance, "sim", "twin-cpu").report()
    assert "got (sim) vs expected (twin-cpu)" in report
    assert "declared: summed in another order" in report
    shape = compare("output 0", actual[:1], expected, tolerance, "twin", "reference").report()
    assert shape == "output 0: got (twin) shape (1,), expected (reference) shape (2,)"


def test_bool_compares_exactly():
    expected = torch.tensor([True, False, True])
    actual = torch.tensor([True, True, True])
    mismatch = compare("mask", actual, expected, tolerance_for(TWIN_TOLERANCE, torch.bool))
    assert mismatch is not None and mismatch.count == 1


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_ulps_and_tolerance(dtype):
    one = torch.tensor([1.0], dtype=dtype)
    next_up = torch.nextafter(one, torch.tensor([2.0], dtype=dtype))
    assert int(ulp_distance(next_up, one)) == 1
    # One ULP passes the twin tolerance; three do not.
    table = tolerance_for(TWIN_TOLERANCE, dtype)
    assert compare("out", next_up, one, table) is None
    three = one.view(torch.int16) + 3
    mismatch = compare("out", three.view(dtype), one, table)
    assert mismatch is not None and mismatch.max_ulp == 3


def test_half_precision_difference_does_not_overflow():
    big = torch.tensor([60000.0], dtype=torch.float16)
    mismatch = compare("out", big, -big, tolerance_for(REFERENCE_TOLERANCE, torch.float16))
    assert mismatch is not None and mismatch.max_abs == 120000.0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int32, torch.bool])
def test_identical_by_bits(dtype):
    a = torch.tensor([1, 0, 1], dtype=dtype)
    assert identical(a, a.clone())
    assert not identical(a, torch.tensor([1, 1, 1], dtype=dtype))


def test_unknown_dtype_named():
    with pytest.raises(ValueError, match="no tolerance for dtype complex64"):
        tolerance_for(REFERENCE_TOLERANCE, torch.complex64)
