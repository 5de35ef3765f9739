"""The drop-in as numba's own tests see it: the switch says "simulated" where numba's
tests ask, and kernels written for numba behave as numba's simulator runs them (array
iteration, kernels calling kernels, a kernel's own exception type, numba's launch
error types)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from numba import cuda, int64

import portkit.simt as simt
from portkit.errors import KernelError, LaunchError
from portkit.simt import simulate
from portkit.simt.numba_check import NumbaRejects
from portkit.simt.records import SimulationFault

ENGINES = ["per-thread", "lockstep"]


def test_the_switch_sets_numbas_simulator_flag_and_the_childrens_variable_and_restores_them():
    from numba.cuda.core import config

    before_flag, before_env = config.ENABLE_CUDASIM, os.environ.get("NUMBA_ENABLE_CUDASIM")
    assert not before_flag
    with simt.simulated_cuda():
        assert config.ENABLE_CUDASIM
        assert os.environ["NUMBA_ENABLE_CUDASIM"] == "1"
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                "from numba.cuda.core import config; print(config.ENABLE_CUDASIM)",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert child.stdout.strip() == "1"
    assert config.ENABLE_CUDASIM == before_flag
    assert os.environ.get("NUMBA_ENABLE_CUDASIM") == before_env


SUITE = """
import subprocess, sys
import numpy as np
from numba import cuda
from numba.cuda.testing import skip_on_cudasim, skip_unless_cudasim
from numba.cuda.core.config import ENABLE_CUDASIM

SIMULATED_AT_IMPORT = ENABLE_CUDASIM

@skip_on_cudasim("needs a GPU")
def test_gpu_branch():
    raise AssertionError("ran the GPU branch")

@skip_unless_cudasim("simulator only")
def test_simulator_branch():
    assert SIMULATED_AT_IMPORT

def test_a_child_process_is_simulated_too():
    code = "from numba import cuda; print(cuda.is_available(), cuda.jit.__module__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert out.startswith("True numba.cuda.simulator"), out
"""


def test_pytest_option_makes_import_time_skips_take_the_simulator_branch(tmp_path):
    from tests.simt.plugin_run import run_pytest

    result = run_pytest(tmp_path, "test_flagged.py", SUITE, "--portkit-simt", "-rs")
    assert "2 passed, 1 skipped" in result.stdout, result.stdout[-2000:]
    assert "needs a GPU" in result.stdout


@cuda.jit
def _iterate(a, rec, out):
    total = 0.0
    for v in a:
        total += v
    for i, v in enumerate(a):
        total += i * v
    for x, y in zip(a, a):
        total += x * y
    out[cuda.threadIdx.x] = total


@pytest.mark.parametrize("engine", ENGINES)
def test_iterating_over_an_array_reads_its_elements_and_not_one_past_the_end(engine):
    a = np.arange(4.0)
    out = np.zeros(4)
    simulate(_iterate, engine=engine)[1, 4](a, a, out)
    expected = a.sum() + (np.arange(4) * a).sum() + (a * a).sum()
    assert out.tolist() == [expected] * 4


def test_a_kernel_may_call_a_plain_cuda_jit_function_as_numba_compiles_it_for_the_device():
    with simt.simulated_cuda():

        @cuda.jit
        def double(a, i):
            a[i] = i * 2

        @cuda.jit
        def caller(a):
            double(a, cuda.threadIdx.x)

        a = np.zeros(4)
        caller[1, 4](a)
        assert a.tolist() == [0.0, 2.0, 4.0, 6.0]


class _Custom(Exception):
    pass


@cuda.jit
def _raises(x, a):
    if x == 1:
        raise IndexError("past the edge")
    if x == 2:
        raise _Custom
    if x == 3:
        raise KeyError("missing")
    a[cuda.threadIdx.x] = x


@pytest.mark.parametrize(
    ("x", "kind", "words"),
    [
        (1, IndexError, "tid=[0, 0, 0] ctaid=[0, 0, 0]: past the edge"),
        (2, _Custom, "tid=[0, 0, 0] ctaid=[0, 0, 0]"),
        (3, KeyError, "tid=[0, 0, 0] ctaid=[0, 0, 0]: 'missing'"),
    ],
)
def test_a_kernels_exception_arrives_as_its_own_type_with_the_place_added(x, kind, words):
    with pytest.raises(kind) as caught:
        simulate(_raises)[1, 1](x, np.zeros(1))
    fault = caught.value
    assert isinstance(fault, SimulationFault) and isinstance(fault, KernelError)
    assert words in str(fault)
    assert "kernel _raises" in str(fault) and "block (0, 0, 0), thread (0, 0, 0)" in str(fault)
    assert fault.place is not None and fault.place.line > 0


@cuda.jit
def _noop(x):
    pass


@pytest.mark.parametrize(
    ("launch", "kind", "words"),
    [
        (lambda k: k[(1, 2, 3, 4), (5, 6)], ValueError, "griddim must be a sequence of 1, 2 or 3"),
        (lambda k: k[1, (3, 4, 5, 6)], ValueError, "blockdim must be a sequence of 1, 2 or 3"),
        (lambda k: k[2.0, 3], TypeError, "griddim must be a sequence of integers, got [2.0]"),
        (lambda k: k[2, 3.0], TypeError, "blockdim must be a sequence of integers, got [3.0]"),
        (lambda k: k(0), ValueError, "launch configuration was not specified"),
        (lambda k: k[1, 1](0, 1), TypeError, "takes 1 arguments"),
    ],
)
def test_launch_mistakes_raise_the_types_numba_raises(launch, kind, words):
    with pytest.raises(kind) as caught:
        launch(simulate(_noop))
    assert isinstance(caught.value, LaunchError)
    assert words in str(caught.value)


def test_a_launch_matching_no_declared_signature_is_numbas_type_error():
    def add(r, x, y):
        r[0] = x + y

    with simt.simulated_cuda():
        kernel = cuda.jit(["void(int64[::1], int64, int64)", "void(float64[::1], f8, f8)"])(add)
        r = np.zeros(1, dtype=np.float64)
        kernel[1, 1](r, 1.5, 2.5)
        assert r[0] == 4.0
        with pytest.raises(TypeError, match="No matching definition"):
            kernel[1, 1](np.zeros(1, dtype=np.complex128), 1j, 1j)


@cuda.jit
def _views(a, c, words, out):
    grid = a.reshape(2, -1)
    out[0] = grid[1, 0]
    as_int = words[4:8].view(np.int32)
    out[1] = as_int[0]
    c.imag[1] = 7.0
    cuda.atomic.add(c.real, 0, 2.0)
    out[2] = c.real[1]


@pytest.mark.parametrize("engine", ENGINES)
def test_reshape_view_real_and_imag_are_views_of_the_same_memory(engine):
    a = np.arange(6.0)
    c = np.array([1 + 2j, 3 + 4j])
    words = np.arange(16, dtype=np.uint8)
    out = np.zeros(3)
    simulate(_views, engine=engine)[1, 1](a, c, words, out)
    assert out.tolist() == [3.0, float(words[4:8].view(np.int32)[0]), 3.0]
    assert c.tolist() == [3 + 2j, 3 + 7j]


@cuda.jit
def _is_true(flag, out):
    if flag is True:
        out[cuda.threadIdx.x] = 1
    if flag is not False:
        out[cuda.threadIdx.x] += 10


@pytest.mark.parametrize("engine", ENGINES)
def test_is_true_compares_a_boolean_argument_as_numba_does(engine):
    out = np.zeros(2, dtype=np.int64)
    simulate(_is_true, engine=engine)[1, 2](True, out)
    assert out.tolist() == [11, 11]
    out[:] = 0
    simulate(_is_true, engine=engine)[1, 2](False, out)
    assert out.tolist() == [0, 0]


@cuda.jit(device=True)
def _fib(n):
    if n < 2:
        return n
    return _fib(n - 1) + _fib(n - 2)


@cuda.jit
def _fibs(out):
    i = cuda.threadIdx.x
    out[i] = _fib(int64(i))


@cuda.jit
def _fibs_of_int32(out):
    i = cuda.threadIdx.x
    out[i] = _fib(i)  # int32 first, int64 (n - 1) in the recursive calls


@pytest.mark.parametrize("engine", ENGINES)
def test_a_recursive_device_function_runs_as_numba_compiles_it(engine):
    out = np.zeros(8, dtype=np.int64)
    simulate(_fibs, engine=engine)[1, 8](out)
    assert out.tolist() == [0, 1, 1, 2, 3, 5, 8, 13]


def test_a_recursion_whose_argument_type_changes_is_refused_as_numba_does():
    """numba-cuda cannot compile self-recursion whose argument types change between calls
    (its own test of it is skipped: "Needs insert_unresolved_ref support in target"): the
    type check says so, naming the recursion, before the simulator would run it."""
    with pytest.raises(NumbaRejects, match=r"recursion \(_fib calls itself; numba-cuda"):
        simulate(_fibs_of_int32)[1, 8](np.zeros(8, dtype=np.int64))


@cuda.jit
def _arguments(point, colour, dates, words, out, deltas, names):
    out[0] = point.x + point.y
    out[1] = colour == _Colour.RED
    deltas[0] = dates[1] - dates[0]
    names[0] = b"XYZ"
    out[2] = len(words)


class _Colour(__import__("enum").IntEnum):
    RED = 1
    GREEN = 2


def test_namedtuple_enum_datetime_and_bytes_arguments_reach_the_kernel():
    from collections import namedtuple

    point = namedtuple("Point", ("x", "y"))(3, 4)
    dates = np.array(["2005-02-01", "2005-03-01"], dtype="datetime64[D]")
    deltas = np.zeros(1, dtype="timedelta64[D]")
    names = np.zeros(2, dtype="S4")
    out = np.zeros(3, dtype=np.int64)
    simulate(_arguments)[1, 1](point, _Colour.RED, dates, names, out, deltas, names)
    assert out.tolist() == [7, 1, 2]
    assert deltas[0] == np.timedelta64(28, "D")
    assert names.tolist() == [b"XYZ", b""]


def test_boolean_shared_arrays_vector_types_ldexp_and_debug_division():
    import math

    from numba import types

    with simt.simulated_cuda():

        @cuda.jit
        def kernel(flags, out, exponent):
            seen = cuda.shared.array(2, dtype=types.boolean)
            seen[0] = flags[0]
            seen[1] = not flags[0]
            v = cuda.float64x4(1.0, 2.0, 3.0, 4.0)
            w = cuda.float32x2(cuda.float32x1(5.0), 6.0)
            out[0] = v.w + w.x
            out[1] = math.ldexp(1.5, exponent)
            out[2] = 1.0 if seen[1] else 0.0

        @cuda.jit(debug=True, opt=False)
        def divide(r, x):
            r[0] = 1.0 / x[0]

        out = np.zeros(3)
        kernel[1, 1](np.array([False]), out, np.int32(3))
        assert out.tolist() == [9.0, 12.0, 1.0]
        with pytest.raises(FloatingPointError):
            divide[1, 1](np.zeros(1), np.zeros(1))


@cuda.jit
def _rounds(x, out, whole):
    i = cuda.threadIdx.x
    out[i] = round(x[i], 3)
    whole[i] = round(x[i]) * 2


@pytest.mark.parametrize("engine", ENGINES)
def test_round_keeps_float32_and_rounds_as_numba_cuda(engine):
    # 0.3425 in float32 is 0.34250001: scaled by 1000.0 in float64 (numba-cuda's
    # round_ndigits) it rounds to 0.343; NumPy's float32 round scales in float32, meets
    # 342.5 exactly and rounds to even (0.342)
    assert round(np.float32(0.3425), 3) == np.float32(0.342)
    x = np.array([0.3425, 2.5], dtype=np.float32)
    out = np.zeros(2, dtype=np.float32)
    whole = np.zeros(2, dtype=np.int64)
    simulate(_rounds, engine=engine)[1, 2](x, out, whole)
    assert out.tolist() == [np.float32(0.343), np.float32(2.5)]
    assert whole.tolist() == [0, 4]


@cuda.jit
def _aligned(out):
    buffer = cuda.local.array(4, dtype=np.uint8, alignment=16)
    tile = cuda.shared.array(2, dtype=np.float32, alignment=128)
    buffer[0] = 3
    tile[0] = 2.0
    out[0] = buffer[0] * tile[0]


@pytest.mark.parametrize("engine", ENGINES)
def test_alignment_of_local_and_shared_arrays_is_accepted(engine):
    out = np.zeros(1, dtype=np.float32)
    simulate(_aligned, engine=engine)[1, 1](out)
    assert out[0] == 6.0


def test_an_alignment_that_is_not_a_power_of_two_is_refused():
    @cuda.jit
    def bad(out):
        buffer = cuda.local.array(4, dtype=np.uint8, alignment=12)
        out[0] = buffer[0]

    with pytest.raises(KernelError, match="alignment must be a constant power of two"):
        simulate(bad)[1, 1](np.zeros(1))
