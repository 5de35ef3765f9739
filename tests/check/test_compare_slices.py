"""A mismatch's figures are gathered slice by slice (a 2^31-element case would need about
100 GB of float64 at once): the report is the same whatever the slice."""

from __future__ import annotations

import pytest
import torch

from portkit.checking import compare as compare_module
from portkit.checking.compare import Tolerance, compare


def cases() -> list[tuple[str, torch.Tensor, torch.Tensor, Tolerance]]:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 5, 7, generator=g)
    e = a.clone()
    e[0, 0, 1], e[1, 2, 3], e[2, 4, 6], e[2, 0, 0] = float("nan"), 0.0, 9.0, a[2, 0, 0] + 1e-3
    h = torch.randn(50, generator=g).half()
    hx = h.clone()
    hx[::7] += 1
    ints = torch.randint(0, 256, (4, 33), generator=g, dtype=torch.uint8)
    return [
        ("float32", a, e, Tolerance(1e-5, 1e-5)),
        ("float16", h, hx, Tolerance(1e-3, 1e-3)),
        ("uint8", ints, ints.flip(1), Tolerance(0.0, 0.0)),
        ("scalar", torch.tensor(1.0), torch.tensor(2.0), Tolerance(1e-5, 1e-5)),
    ]


@pytest.mark.parametrize("slice_elements", [1, 3, 8, 64])
def test_the_report_does_not_depend_on_the_slice(monkeypatch, slice_elements: int) -> None:
    whole = {name: compare(name, a, e, t) for name, a, e, t in cases()}  # one slice
    monkeypatch.setattr(compare_module, "FIGURE_SLICE", slice_elements)
    for name, a, e, t in cases():
        sliced = compare(name, a, e, t)
        assert sliced is not None and whole[name] is not None, name
        assert sliced.report() == whole[name].report()  # NaN != NaN: compare the text
        assert sliced.count > 0 and len(sliced.first) == min(sliced.count, 5)


@pytest.mark.parametrize("slice_elements", [1, 3, 64])
def test_the_table_margin_does_not_depend_on_the_slice(monkeypatch, slice_elements: int) -> None:
    from portkit.checking import tensor_check
    from portkit.checking.tensor_check import table_margin

    g = torch.Generator().manual_seed(1)
    a = torch.randn(6, 11, generator=g)
    near = a + 1e-6 * torch.randn(6, 11, generator=g)
    ints = torch.randint(0, 9, (40,), generator=g)
    pairs = [(a, near), (a, a), (ints, ints), (ints, ints.flip(0))]
    t = Tolerance(1e-5, 1e-5)
    whole = [table_margin(x, y, t, None) for x, y in pairs]
    assert 0 < whole[0] < 1 and whole[1] == 0 and whole[2] == 0 and whole[3] == float("inf")
    monkeypatch.setattr(tensor_check, "FIGURE_SLICE", slice_elements)
    assert [table_margin(x, y, t, None) for x, y in pairs] == whole
