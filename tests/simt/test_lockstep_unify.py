"""A variable whose type differs between the paths threads take (float32 on one,
float64 on another) gets numba's one unified type in the lockstep engine, so the launch
stays in lockstep (numba-cuda's Monte Carlo example) and its values are numba's."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, float32

from portkit.launch.kernel_set import LaunchConfig
from portkit.simt.lockstep.lanes import unified
from portkit.simt.machine import LOCKSTEP, Machine

N = 100  # threads past N skip the branch: the branch is divergent
BLOCK = 32


@cuda.jit
def sample_then_scale(x, out, lo, hi):
    """numba-cuda's Monte Carlo kernel: ``samp`` is float32, then float64."""
    i = cuda.grid(1)
    if i < out.size:
        samp = x[i]
        samp = samp * (hi - lo) + lo
        out[i] = 1.0 / samp


@cuda.jit
def joined_after_branch(x, out):
    """At the join ``s`` is float32 (skipped) or float64 (taken): numba types it
    float64, so ``s * float32(3)`` is a float64 product in every thread."""
    i = cuda.grid(1)
    if i < out.size:
        s = x[i]
        if x[i] > 0.5:
            s = s * 2.0
        out[i] = s * float32(3)


@cuda.jit
def conditional_value(x, out):
    i = cuda.grid(1)
    if i < out.size:
        v = x[i] if x[i] > 0.5 else 0.1
        out[i] = v * float32(3)


def _launch(kernel, args):
    machine = Machine(engine=LOCKSTEP)
    blocks = -(-N // BLOCK) + 1  # a whole block past the end too
    config = LaunchConfig((blocks, 1, 1), (BLOCK, 1, 1), 0)
    machine.launch(kernel.__name__, kernel, config, args)
    return machine


def _inputs() -> np.ndarray:
    return np.random.default_rng(5).uniform(0.01, 1.0, N).astype(np.float32)


def test_float32_then_float64_runs_in_lockstep():
    x = _inputs()
    out = np.zeros(N, np.float32)
    machine = _launch(sample_then_scale, [x, out, 2, 3])
    assert machine.engines[-1].engine == LOCKSTEP, machine.engines[-1].reason
    expected = (1.0 / (x.astype(np.float64) * (3 - 2) + 2)).astype(np.float32)
    np.testing.assert_array_equal(out, expected)


def test_value_at_a_join_is_numbas_float64():
    x = _inputs()
    out = np.zeros(N, np.float64)
    machine = _launch(joined_after_branch, [x, out])
    assert machine.engines[-1].engine == LOCKSTEP, machine.engines[-1].reason
    wide = x.astype(np.float64)
    expected = np.where(x > 0.5, wide * 2.0, wide) * 3.0  # float64 in every thread
    np.testing.assert_array_equal(out, expected)
    assert np.any(out[x <= 0.5] != (x[x <= 0.5] * np.float32(3)).astype(np.float64))


def test_conditional_expression_is_unified():
    x = _inputs()
    out = np.zeros(N, np.float64)
    machine = _launch(conditional_value, [x, out])
    assert machine.engines[-1].engine == LOCKSTEP, machine.engines[-1].reason
    np.testing.assert_array_equal(out, np.where(x > 0.5, x.astype(np.float64), 0.1) * 3.0)


def test_numba_types_the_join_float64():
    """What the tests above expect: numba's own PTX multiplies by 3.0 in float64."""
    try:
        ptx, _ = cuda.compile_ptx(joined_after_branch.py_func, "float32[:], float64[:]", cc=(8, 0))
    except Exception as exc:  # no NVVM here
        pytest.skip(f"numba cannot compile here: {exc}")
    assert "mul.f64" in ptx and "mul.f32" not in ptx


HELD = ["bool", "int64", "uint64", "float16", "float32", "float64"]


@pytest.mark.parametrize("first", HELD)
@pytest.mark.parametrize("second", HELD)
def test_unified_is_numbas_unify_pairs(first, second):
    from numba.core import types
    from numba.cuda.descriptor import cuda_target

    numba_type = cuda_target.typing_context.unify_pairs(
        getattr(types, first), getattr(types, second)
    )
    mine = unified(np.dtype(first), np.dtype(second))
    if {first, second} == {"int64", "uint64"}:
        assert mine is None  # uint32 is held as int64 here: numba's float64 would not fit
    else:
        assert mine == np.dtype(str(numba_type))
