"""Intrinsics and forms third-party kernels use that the simulator had refused, each
against what the GPU computes (the same kernels run on a GPU in test_simt_gpu.py), on
both engines: ``match_any_sync`` / ``match_all_sync`` (bits compared, as the GPU's
match.sync), ``selp``, and a record array's fields as attributes (``r[i].x``)."""

from __future__ import annotations

import numpy as np
import pytest

from portkit.simt import simulate
from tests.simt import kernels as K

ENGINES = ["per-thread", "lockstep"]


def as_int32(bits: int) -> int:
    return bits - (1 << 32) if bits >= 1 << 31 else bits


def expected_match(values: np.ndarray) -> tuple[list[int], list[int], list[int]]:
    """Per lane: its match_any mask; per warp: match_all's mask and predicate."""
    keys = [v.tobytes() for v in values]
    anys, masks, alike = [], [], []
    for start in range(0, len(keys), 32):
        warp = keys[start : start + 32]
        same_all = len(set(warp)) == 1
        for k in warp:
            anys.append(as_int32(sum(1 << u for u, other in enumerate(warp) if other == k)))
            masks.append(-1 if same_all else 0)
            alike.append(int(same_all))
    return anys, masks, alike


@pytest.mark.parametrize("engine", ENGINES)
def test_match_and_selp_as_the_gpu_computes_them(engine):
    g = np.random.default_rng(3)
    x = np.concatenate([g.integers(0, 4, 32), g.integers(0, 200, 32)]).astype(np.int32)
    x[32:] += 64 * (np.arange(32) % 2).astype(np.int32)  # warp 2: x // 64 differs
    f = g.choice(np.array([0.0, -0.0, np.nan, 1.0], np.float32), 64)
    out = np.zeros((64, 5), np.int64)
    simulate(K.match_and_select, engine=engine)[1, 64](x, f, out)
    anys, _, _ = expected_match(x)
    _, masks, alike = expected_match(x // 64)
    float_anys, _, _ = expected_match(f)
    assert out[:, 0].tolist() == anys
    assert out[:, 1].tolist() == masks and out[:, 2].tolist() == alike
    assert masks[:32] == [-1] * 32 and masks[32:] == [0] * 32  # both outcomes seen
    assert out[:, 3].tolist() == float_anys
    zero, negative_zero = f == 0, np.signbit(f)
    assert any(zero & negative_zero) and any(zero & ~negative_zero)  # -0.0 apart from 0.0
    lanes = np.arange(64) % 32
    assert out[:, 4].tolist() == np.where(lanes % 2 == 0, x, -x).tolist()


@pytest.mark.parametrize("engine", ENGINES)
def test_record_fields_read_and_written_as_attributes(engine):
    r = np.zeros(40, np.dtype([("x", np.float32), ("n", np.int32)]))
    r["x"], r["n"] = np.linspace(-2, 2, 40), np.arange(40) % 7 - 3
    before = r.copy()
    out = np.zeros(40, np.float32)
    simulate(K.record_fields, engine=engine)[1, 64](r, out)
    product = before["x"].astype(np.float64) * before["n"]  # numba: float32 * int32 is float64
    np.testing.assert_array_equal(out, product.astype(np.float32))
    np.testing.assert_array_equal(r["x"], before["x"] + 1)
    np.testing.assert_array_equal(r["n"], before["n"])
