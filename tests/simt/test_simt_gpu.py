"""The simulator against the GPU: every deterministic kernel of tests/simt/kernels.py runs
with numba on the GPU and in portkit's simulator on identical inputs, and the results
must agree: exactly for integers, within portkit's twin tolerance for floats (the GPU
may fuse a multiply and an add, and libdevice's exp/log/tanh are within 2 ULP).

Kernels whose atomics return values in an order that depends on scheduling are compared
through an order-free view (final values, sorted old values). ``print`` is left out.
Cases whose point is one rounding (typing) compare floats bit for bit. Kernels on which
the simulator is known to disagree with numba are ``xfail(strict=True)`` with the reason;
tests/simt/test_simt.py checks each of them against the expected value too. Last run on an
H200 with numba-cuda 0.30.4 (2026-11-28): 105 passed, 7 xfailed; every
kernel here is also compiled with numba on the CPU (test_gpu_cases_compile.py).

The tests skip, saying why, when PyTorch sees no GPU or numba cannot compile and run a
probe kernel (numba-cuda 0.30.4 does not import its compiler under NumPy 2.5, which
removed ``np.row_stack``).
"""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from portkit.checking.compare import TWIN_TOLERANCE, compare
from portkit.launch.kernel_set import LaunchConfig
from portkit.project.environment import Settings
from portkit.simt.machine import Machine
from tests.simt import kernels as K

torch = pytest.importorskip("torch")


def _gpu_reason() -> str:
    """Why these tests cannot run here, or "" when they can."""
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to PyTorch: the simulator is compared with numba on a GPU"
    try:
        from numba import cuda

        if not cuda.is_available():
            return "PyTorch sees a GPU but numba.cuda does not (driver or NVVM not found)"

        @cuda.jit
        def probe(out):
            out[0] = 1

        out = cuda.to_device(np.zeros(1, np.int32))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numba: a grid of 1 under-uses the GPU
            probe[1, 1](out)
        if out.copy_to_host()[0] != 1:
            return "numba.cuda ran a probe kernel that wrote nothing"
    except Exception as exc:  # numba-cuda missing, or broken (e.g. by a newer NumPy)
        return f"numba.cuda cannot compile and run a kernel here: {type(exc).__name__}: {exc}"
    return ""


_SKIP_REASON = _gpu_reason()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(bool(_SKIP_REASON), reason=_SKIP_REASON),
    # numba warns that grids this small under-use the GPU; they are small on purpose.
    pytest.mark.filterwarnings("ignore:Grid size"),
]

FULL = 0xFFFFFFFF
Args = list  # NumPy arrays and scalars, in the kernel's parameter order


@dataclass(frozen=True)
class Case:
    id: str
    kernel: str
    make_args: Callable[[np.random.Generator], Args]
    grid: int | tuple[int, ...] = 1
    block: int | tuple[int, ...] = 32
    shared: int = 0
    # An order-free view of the arguments after the launch (default: every array).
    view: Callable[[Args], list[np.ndarray]] | None = None
    xfail: str = ""
    # Floats bit for bit: the point of the kernel is a rounding within the tolerance.
    exact: bool = False


def _dims(value) -> tuple[int, int, int]:
    value = value if isinstance(value, tuple) else (value,)
    return value + (1,) * (3 - len(value))


def record_array(g: np.random.Generator, n: int) -> np.ndarray:
    r = np.zeros(n, np.dtype([("x", np.float32), ("n", np.int32)]))
    r["x"], r["n"] = f32(g, n), g.integers(-3, 4, n)
    return r


def f32(g: np.random.Generator, n: int, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return g.uniform(low, high, n).astype(np.float32)


def sorted_columns(olds: np.ndarray) -> list[np.ndarray]:
    return [np.sort(olds[:, k]) for k in range(olds.shape[1])]


def popcounts(values: np.ndarray) -> np.ndarray:
    return np.sort([bin(int(v) & FULL).count("1") for v in values])


def _exch_cas_view(args: Args) -> list[np.ndarray]:
    acc, flag, olds = args
    winners = np.flatnonzero(olds[:, 2] == 0)
    losers_saw_winner = np.all(np.delete(olds[:, 2], winners) == flag[0])
    return [
        np.sort(np.r_[olds[:, 0], acc[0]]),  # exch: the initial 0 and every i + 1, once
        acc[1:],
        np.sort(olds[:, 1]),  # cas tickets
        np.array([len(winners), int(losers_saw_winner)]),
        np.array([flag[0] == winners[0] + 1 if len(winners) == 1 else False]),
    ]


CASES = [
    # coordinates
    Case(
        "axpy",
        "axpy",
        lambda g: [
            np.float32(1.5),
            f32(g, 100, 0, 1),
            f32(g, 100, 0, 1),
            np.zeros(100, np.float32),
            100,
        ],
        grid=4,
    ),
    Case(
        "grid_stride",
        "grid_stride",
        lambda g: [f32(g, 1000), np.zeros(1000, np.float32), np.zeros(1000, np.int64), 1000],
        grid=2,
        block=64,
    ),
    Case(
        "coords_2d",
        "coords_2d",
        lambda g: [np.full((7, 20, 6), -1, np.int64)],
        grid=(3, 2),
        block=(8, 4),
    ),
    Case(
        "coords_3d",
        "coords_3d",
        lambda g: [np.full((6, 6, 8, 5), -1, np.int64)],
        grid=(2, 3, 2),
        block=(4, 2, 3),
    ),
    Case(
        "transpose_tiled",
        "transpose_tiled",
        lambda g: [f32(g, 130).reshape(10, 13), np.zeros((13, 10), np.float32)],
        grid=(2, 2),
        block=(8, 8),
    ),
    # memory spaces
    Case(
        "block_sum",
        "block_sum",
        lambda g: [f32(g, 300), np.zeros(3, np.float32), 300],
        grid=3,
        block=K.THREADS,
    ),
    Case(
        "dynamic_shared_reverse",
        "dynamic_shared_reverse",
        lambda g: [f32(g, 90), np.zeros(90, np.float32), 90],
        grid=3,
        block=32,
        shared=256,
    ),
    Case("local_prefix", "local_prefix", lambda g: [f32(g, 64), np.zeros(64, np.float32)]),
    Case(
        "local_matrix",
        "local_matrix",
        lambda g: [g.integers(-1000, 1000, 8), np.zeros((8, 4), np.int64)],
        block=8,
    ),
    Case(
        "const_poly",
        "const_poly",
        lambda g: [np.linspace(0, 1, 100, dtype=np.float32), np.zeros(100, np.float32)],
        grid=4,
    ),
    Case(
        "barrier_predicates",
        "barrier_predicates",
        lambda g: [
            np.concatenate([f32(g, 64), f32(g, 64, 0.5, 1), f32(g, 64, -1, 0)]),
            np.zeros((3, 3), np.int32),
        ],
        grid=3,
        block=64,
    ),
    # warps
    Case(
        "warp_shuffles",
        "warp_shuffles",
        lambda g: [
            f32(g, 64),
            *(np.zeros(64, np.float32) for _ in range(4)),
            np.zeros(64, np.int64),
        ],
        block=64,
    ),
    Case(
        "warp_reduce_xor",
        "warp_reduce_xor",
        lambda g: [f32(g, 64), np.zeros(64, np.float32)],
        block=64,
    ),
    Case(
        "warp_reduce_down",
        "warp_reduce_down",
        lambda g: [f32(g, 128), np.zeros(4, np.float32)],
        grid=2,
        block=64,
    ),
    Case(
        "warp_votes",
        "warp_votes",
        lambda g: [
            np.concatenate([f32(g, 32), f32(g, 32, 0.5, 1), f32(g, 32, -1, 0)]),
            np.zeros((96, 7), np.int64),
        ],
        block=96,
    ),
    Case(
        "match_and_select",
        "match_and_select",
        lambda g: [
            np.concatenate([g.integers(0, 4, 32), g.integers(0, 200, 32)]).astype(np.int32),
            g.choice(np.array([0.0, -0.0, np.nan, 1.0], np.float32), 64),
            np.zeros((64, 5), np.int64),
        ],
        block=64,
    ),
    Case(
        "record_fields",
        "record_fields",
        lambda g: [record_array(g, 40), np.zeros(40, np.float32)],
        block=64,
    ),
    Case(
        "integer_powers",
        "integer_powers",
        lambda g: [
            f32(g, 40) + np.float32(1.5),
            g.standard_normal(40) + 1.5,
            g.integers(-4, 9, 40).astype(np.int32),
            np.zeros((40, 3), np.float32),
            np.zeros((40, 2), np.float64),
        ],
        block=64,
        exact=True,
    ),
    Case(
        "bit_counts",
        "bit_counts",
        lambda g: [
            g.integers(-(2**31), 2**31, 40).astype(np.int32),
            g.integers(0, 2**63, 40, dtype=np.uint64) * np.uint64(2) + np.uint64(1),
            np.zeros((40, 3), np.int32),
            np.zeros((40, 5), np.uint64),
        ],
        block=64,
    ),
    Case(
        "libdevice_calls",
        "libdevice_calls",
        lambda g: [
            f32(g, 40).astype(np.float64),
            g.integers(-50, 50, 40).astype(np.int32),
            np.zeros((40, 6), np.float64),
            np.zeros(40, np.float32),
        ],
        block=64,
    ),
    Case(
        "half_warp_ballots",
        "half_warp_ballots",
        lambda g: [f32(g, 32), np.zeros((32, 2), np.int64)],
    ),
    Case(
        "warp_exchange_syncwarp",
        "warp_exchange_syncwarp",
        lambda g: [f32(g, 64), np.zeros(64, np.float32)],
        block=64,
    ),
    # atomics
    Case(
        "atomic_add_sub",
        "atomic_add_sub",
        lambda g: [np.array([0, 1000], np.int32), np.zeros((128, 2), np.int64)],
        grid=2,
        block=64,
        view=lambda a: [a[0], *sorted_columns(a[1])],
    ),
    Case(
        "atomic_max_min",
        "atomic_max_min",
        lambda g: [
            g.integers(-1000, 1000, 64).astype(np.int32),
            f32(g, 64),
            np.array([-5000, 5000], np.int32),
            np.array([-1e30, 1e30], np.float32),
            np.zeros((64, 2), np.int64),
            np.zeros((64, 2), np.float32),
        ],
        block=64,
        view=lambda a: [a[2], a[3]],
    ),
    Case(
        "atomic_exch_cas",
        "atomic_exch_cas",
        lambda g: [np.zeros(2, np.int32), np.zeros(1, np.int32), np.zeros((64, 3), np.int64)],
        block=64,
        view=_exch_cas_view,
    ),
    Case(
        "atomic_bitwise",
        "atomic_bitwise",
        lambda g: [np.array([0, FULL, 0], np.uint32), np.zeros((32, 3), np.int64)],
        view=lambda a: [
            a[0],
            *(popcounts(a[1][:, k]) for k in range(3)),
            (a[1][:, 0] >> np.arange(32)) & 1,
            (a[1][:, 1] >> np.arange(32)) & 1,
        ],
    ),
    Case(
        "atomic_inc_dec",
        "atomic_inc_dec",
        lambda g: [np.array([0, 5], np.uint32), np.zeros((40, 2), np.int64), 9],
        block=40,
        view=lambda a: [a[0], *sorted_columns(a[1])],
    ),
    Case(
        "histogram",
        "histogram",
        lambda g: [
            g.integers(0, 100, 200).astype(np.int32),
            np.zeros(8, np.int32),
            np.zeros(1, np.int32),
        ],
        grid=2,
        block=128,
    ),
    Case(
        "atomic_float_sums",
        "atomic_float_sums",
        lambda g: [
            g.integers(-50, 50, 100).astype(np.float32),
            np.zeros(1, np.float32),
            np.zeros(1, np.float64),
        ],
        block=128,
    ),
    # device functions
    Case(
        "device_clamp",
        "device_clamp",
        lambda g: [f32(g, 50, -3, 3), np.zeros(50, np.float32), np.float32(-1), np.float32(1.5)],
        grid=2,
    ),
    Case(
        "device_mirror",
        "device_mirror",
        lambda g: [f32(g, 256), np.zeros(256, np.float32)],
        grid=2,
        block=K.THREADS,
    ),
    Case(
        "device_warp_total",
        "device_warp_total",
        lambda g: [f32(g, 64), np.zeros(64, np.float32)],
        block=64,
    ),
    Case(
        "device_block_total",
        "device_block_total",
        lambda g: [f32(g, 192), np.zeros(2, np.float32)],
        grid=2,
        block=96,
    ),
    # math and typing
    Case(
        "math_functions",
        "math_functions",
        lambda g: [f32(g, 64, 0.1, 4.0), np.zeros((5, 64), np.float32)],
        grid=2,
    ),
    Case(
        "typing_rules",
        "typing_rules",
        lambda g: [
            np.array([1.1, 3.3, -2.7, 3e38], np.float32),
            np.array([-7, 2, 7, -2, 2**31 + 5, 2**32 - 3, 5], np.int64),
            np.zeros(11),
            np.zeros(10, np.int64),
        ],
        exact=True,
    ),
    Case("long_barrier_loop", "long_barrier_loop", lambda g: [np.zeros(32, np.float32), 100]),
    Case("many_shuffles", "many_shuffles", lambda g: [np.zeros(32, np.float32), 255]),
    # where the simulator disagrees with numba (tests/simt/test_simt.py says why)
    Case(
        "eq_sync_truthy",
        "eq_sync_truthy",
        lambda g: [np.zeros(32, np.int64)],
    ),
    Case(
        "activemask_after_vote",
        "activemask_after_vote",
        lambda g: [np.ones(32, np.float32), np.zeros((32, 2), np.int64)],
    ),
    Case(
        "atomic_add_float64_value",
        "atomic_add_float64_value",
        lambda g: [np.ones(1, np.float32), np.array([2.0**-24 + 2.0**-50])],
        block=1,
        exact=True,
    ),
    Case(
        "float_power",
        "float_power",
        lambda g: [np.array([1.1, 3.3, -2.7, 0.3], np.float32), np.zeros(4)],
    ),
    Case(
        "floor_product",
        "floor_product",
        lambda g: [np.array([1.1, 3.3, -2.7, 0.3], np.float32), np.zeros(4)],
    ),
    Case(
        "floor_large",
        "floor_large",
        lambda g: [np.array([1e30, -1e30], np.float32), np.zeros(2)],
    ),
    Case(
        "numpy_int32_square",
        "numpy_int32_square",
        lambda g: [np.array([70000, 3], np.int64), np.zeros(2, np.int64)],
        xfail="simulator bug: np.int32 * np.int32 wraps in the simulator, is int64 in numba",
    ),
    Case(
        "uint32_difference",
        "uint32_difference",
        lambda g: [np.array([1], np.uint32), np.array([3], np.uint32), np.zeros(1)],
        xfail="simulator bug: uint32 - uint32 is int64 in the simulator, uint64 in numba",
    ),
    Case(
        "round_product",
        "round_product",
        lambda g: [np.array([1.1, 3.3, -2.7, 0.3], np.float32), np.zeros(4)],
    ),
    Case(
        "math_pow_int",
        "math_pow_int",
        lambda g: [np.array([1.1, 3.3, -2.7, 0.3], np.float32), np.zeros(4)],
    ),
    Case(
        "tuple_constant",
        "tuple_constant",
        lambda g: [np.array([1.1, 3.3, -2.7, 0.3], np.float32), np.zeros(4)],
        xfail="simulator bug: tuple constants are Python floats in the simulator, float64 in numba",
    ),
    Case(
        "unified_variable",
        "unified_variable",
        lambda g: [
            np.array([0.3, 1.1, -2.0], np.float32),
            np.array([3.3], np.float32),
            np.zeros(1),
        ],
        block=1,
        xfail="simulator limitation: numba unifies a variable's type over the function",
    ),
    Case(
        "uint64_plus_literal",
        "uint64_plus_literal",
        lambda g: [np.array([2**60 + 1], np.uint64), np.zeros(1, np.int64)],
        block=1,
        xfail="simulator bug: uint64 + 1 is float64 in the simulator, int64 in numba",
    ),
    Case(
        "dynamic_shared_two_dtypes",
        "dynamic_shared_two_dtypes",
        lambda g: [np.zeros(4, np.int64)],
        block=4,
        shared=16,
    ),
    Case(
        "long_barrier_loop_8192",
        "long_barrier_loop",
        lambda g: [np.zeros(32, np.float32), 8192],
    ),
    Case(
        "many_shuffles_256",
        "many_shuffles",
        lambda g: [np.zeros(32, np.float32), 256],
    ),
    Case(
        "ballot_after_exit",
        "ballot_after_exit",
        lambda g: [np.ones(32, np.float32), np.full(32, -1, np.int64), 20],
    ),
    Case(
        "small_block_warp_sum",
        "small_block_warp_sum",
        lambda g: [f32(g, 16), np.zeros(16, np.float32)],
        block=16,
        xfail="stricter than a GPU: a full mask in a block of 16 threads",
    ),
    Case(
        "negative_index_wraps",
        "negative_index_wraps",
        lambda g: [np.arange(8, dtype=np.float32), np.zeros(8, np.float32)],
        block=8,
        xfail="doubtful semantic: numba wraps x[-1], the simulator reports it",
    ),
]


def _params():
    for case in CASES:
        marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
        yield pytest.param(case, id=case.id, marks=marks)


def _copy(args: Args) -> Args:
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def run_simulator(case: Case, args: Args) -> Args:
    config = LaunchConfig(_dims(case.grid), _dims(case.block), case.shared)
    kernel = getattr(K, case.kernel)
    # scripts/gpu.sh runs this file once per engine, through PORTKIT_SIMT_ENGINE.
    Machine(engine=Settings.from_environment().simt_engine).launch(
        case.kernel, kernel, config, args
    )
    return args


def run_gpu(case: Case, args: Args) -> Args:
    from numba import cuda

    kernel = getattr(K, case.kernel)
    on_device = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    kernel[case.grid, case.block, 0, case.shared](*on_device)
    cuda.synchronize()
    return [d.copy_to_host() if isinstance(a, np.ndarray) else a for a, d in zip(args, on_device)]


def assert_agree(what: str, simulated: np.ndarray, gpu: np.ndarray, exact: bool) -> None:
    simulated, gpu = np.asarray(simulated), np.asarray(gpu)
    assert simulated.shape == gpu.shape, f"{what}: shape {simulated.shape} vs {gpu.shape}"
    assert simulated.dtype == gpu.dtype, f"{what}: dtype {simulated.dtype} vs {gpu.dtype}"
    if simulated.dtype.kind == "f" and not exact:
        tolerance = TWIN_TOLERANCE[str(simulated.dtype)]
        mismatch = compare(
            what,
            torch.from_numpy(np.ascontiguousarray(simulated)),
            torch.from_numpy(np.ascontiguousarray(gpu)),
            tolerance,
        )
        assert mismatch is None, mismatch.report()
    else:
        np.testing.assert_array_equal(simulated, gpu, err_msg=f"{what}: simulator vs GPU")


@pytest.mark.parametrize("case", list(_params()))
def test_simulator_agrees_with_the_gpu(case: Case):
    inputs = case.make_args(np.random.default_rng(zlib.crc32(case.id.encode())))
    gpu = run_gpu(case, _copy(inputs))
    simulated = run_simulator(case, _copy(inputs))
    view = case.view or (lambda args: [a for a in args if isinstance(a, np.ndarray)])
    gpu_view, simulated_view = view(gpu), view(simulated)
    assert len(gpu_view) == len(simulated_view)
    for k, (s, g) in enumerate(zip(simulated_view, gpu_view)):
        assert_agree(f"{case.kernel} output {k}", s, g, case.exact)
