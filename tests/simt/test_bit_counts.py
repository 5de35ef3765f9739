"""``cuda.popc``, ``clz``, ``brev`` and ``ffs`` as numba-cuda lowers them (cudaimpl.py):
over the argument's width, ``brev`` of a uint64 over 64 bits and of any other integer over
its low 32. The simulator holds int8-int32 values as int64, so an int64 argument is
counted as the int32 it most often is (32 bits); a uint64 over its 64. Before, every
argument was counted over 32 bits, a uint64's high half lost, and a negative int32's
popc was 64. The same kernel runs on a GPU in test_simt_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest

from portkit.simt import simulate
from portkit.simt.intrinsics import SimulatedCuda
from tests.simt import kernels as K


def _bits(v: int, width: int) -> str:
    return f"{v & ((1 << width) - 1):0{width}b}"


def _counts(v: int, width: int) -> list[int]:
    """popc, clz and ffs of ``v``'s low ``width`` bits, read off its binary digits."""
    bits = _bits(v, width)
    ffs = len(bits) - bits.rfind("1") if "1" in bits else 0
    return [bits.count("1"), len(bits) - len(bits.lstrip("0")), ffs]


@pytest.mark.parametrize("engine", ["per-thread", "lockstep"])
def test_bit_counts_use_the_arguments_width(engine):
    x32 = np.array([0, 1, -1, 8, -(2**31), 2**30 + 5], np.int32)
    u64 = np.array([0, 1, 2**64 - 1, 2**40, 2**63, 6], np.uint64)
    out32, outu = np.zeros((6, 3), np.int32), np.zeros((6, 5), np.uint64)
    simulate(K.bit_counts, engine=engine)[1, 32](x32, u64, out32, outu)
    assert out32.tolist() == [_counts(v, 32) for v in x32.tolist()]
    assert outu[:, :3].tolist() == [_counts(v, 64) for v in u64.tolist()]
    assert outu[:, 3].tolist() == [int(_bits(v, 64)[::-1], 2) for v in u64.tolist()]
    assert outu[:, 4].tolist() == [int(_bits(v, 32)[::-1], 2) for v in x32.tolist()]


def test_a_uint64_keeps_its_type_and_an_int64_is_counted_as_an_int32():
    assert type(SimulatedCuda.popc(np.uint64(1))) is np.uint64
    assert SimulatedCuda.clz(np.uint64(1)) == 63 and SimulatedCuda.brev(np.uint64(1)) == 2**63
    assert SimulatedCuda.popc(np.int64(-1)) == 32  # a widened int32 -1
    assert SimulatedCuda.ffs(np.uint64(1 << 40)) == 41
