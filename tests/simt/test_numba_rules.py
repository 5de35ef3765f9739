"""numba's compile-time rules in portkit's simulator: globals frozen at the first
launch, whole-array ufuncs, and the shapes and dtypes numba accepts for allocations."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from numba import cuda, float32

import portkit.simt as simt
from portkit.errors import KernelError
from portkit.simt.numba_check import NumbaRejects
from tests.simt import allocation_forms as forms

ENGINES = ["lockstep", "per-thread"]
PRICES = np.array([10.0, 25.0, 5.0, 15.0, 30.0])


@cuda.jit
def priced(quantities, totals):
    i = cuda.grid(1)
    if i < totals.size:
        totals[i] = quantities[i] * PRICES[i]


@cuda.jit
def writes_prices(quantities):
    i = cuda.grid(1)
    if i < quantities.size:
        PRICES[i] += quantities[i]


@cuda.jit
def sine(r, x):
    np.sin(x, r)  # numba-cuda's doc_examples/test_ufunc.py


@cuda.jit
def sine_by_keyword(r, x):
    np.sin(x, out=r)


@cuda.jit
def row_maxima(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        np.maximum(x[i], out[i], out[i])  # out starts at zero: a ReLU of the row


@cuda.jit
def row_sums(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        np.add(x[i], x[i], out[i])  # numba-cuda's CUDA ufunc table has no np.add


@cuda.jit
def everyone_writes(r, x):
    np.sin(x, r)


def test_numba_doc_example_global_capture():
    """numba-cuda's doc_examples/test_globals.py, as written there."""
    with simt.simulated_cuda():
        tax_rate = 0.08
        prices = np.array([10.0, 25.0, 5.0, 15.0, 30.0], dtype=np.float64)

        @cuda.jit
        def compute_totals(quantities, totals):
            i = cuda.grid(1)
            if i < totals.size:
                totals[i] = quantities[i] * prices[i] * (1 + tax_rate)

        d_quantities = cuda.to_device(np.array([1, 2, 3, 4, 5], dtype=np.float64))
        d_totals = cuda.device_array(5, dtype=np.float64)
        compute_totals[1, 32](d_quantities, d_totals)
        tax_rate = 0.10  # noqa: F841
        prices[:] = [20.0, 50.0, 10.0, 30.0, 60.0]
        compute_totals[1, 32](d_quantities, d_totals)
        expected = np.array([10.8, 54.0, 16.2, 64.8, 162.0])
        np.testing.assert_allclose(d_totals.copy_to_host(), expected)


def test_numba_doc_example_global_device_array_is_live():
    with simt.simulated_cuda():
        prices = cuda.to_device(np.array([10.0, 25.0, 5.0, 15.0, 30.0], dtype=np.float32))

        @cuda.jit
        def compute_totals(quantities, totals):
            i = cuda.grid(1)
            if i < totals.size:
                totals[i] = quantities[i] * prices[i]

        d_quantities = cuda.to_device(np.ones(5, dtype=np.float32))
        d_totals = cuda.device_array(5, dtype=np.float32)
        compute_totals[1, 32](d_quantities, d_totals)
        prices.copy_to_device(np.array([20.0, 50.0, 10.0, 30.0, 60.0], dtype=np.float32))
        compute_totals[1, 32](d_quantities, d_totals)
        np.testing.assert_allclose(d_totals.copy_to_host(), [20.0, 50.0, 10.0, 30.0, 60.0])


@pytest.mark.parametrize("engine", ENGINES)
def test_module_level_array_is_frozen_at_first_launch(engine):
    quantities = np.arange(1.0, 6.0)
    first, second = np.zeros(5), np.zeros(5)
    kernel = simt.simulate(priced, engine)
    original = PRICES.copy()
    try:
        kernel[1, 32](quantities, first)
        PRICES[:] *= 2
        kernel[1, 32](quantities, second)
        fresh = np.zeros(5)
        simt.simulate(priced, engine)[1, 32](quantities, fresh)  # a new compile sees it
    finally:
        PRICES[:] = original
    np.testing.assert_array_equal(first, quantities * original)
    np.testing.assert_array_equal(second, first)
    np.testing.assert_array_equal(fresh, 2 * first)


def test_store_into_a_global_array_is_refused_as_numba_does():
    with pytest.raises(KernelError) as caught:
        simt.simulate(writes_prices)[1, 8](np.ones(5))
    message = str(caught.value)
    assert message.startswith("kernel writes_prices, ")
    source, first = inspect.getsourcelines(writes_prices.py_func)
    line = first + next(k for k, text in enumerate(source) if "PRICES[" in text)
    assert f"test_numba_rules.py:{line}: writes to PRICES, a global NumPy array" in message
    assert "pass the array as an argument" in message and "\n" not in message


@pytest.mark.parametrize("engine", ENGINES)
def test_numba_doc_example_ufunc_over_whole_arrays(engine):
    x = np.arange(10, dtype=np.float32) - 5
    r = np.zeros_like(x)
    kernel = simt.simulate(sine, engine)
    kernel[1, 1](r, x)
    np.testing.assert_allclose(r, np.sin(x))
    assert r.dtype == np.float32
    assert kernel.engines[0].engine == "per-thread"  # the lockstep engine hands it over


@pytest.mark.parametrize("engine", ENGINES)
def test_ufunc_over_each_threads_row(engine):
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 6
    out = np.zeros_like(x)
    simt.simulate(row_maxima, engine)[1, 4](x, out)
    np.testing.assert_array_equal(out, np.maximum(x, 0))


def test_a_ufunc_numba_cuda_does_not_lower_is_refused_before_the_launch():
    """numba-cuda lowers the ufuncs of its CUDA table (numba/cuda/ufuncs.py: np.maximum,
    np.sin...) and fails on others (np.add over arrays: a KeyError in its lowering), which
    the simulator would run; its type check says so first."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises(NumbaRejects, match=r"numba failed on it \(KeyError: <ufunc 'add'>\)"):
        simt.simulate(row_sums)[1, 4](x, np.zeros_like(x))


def test_threads_that_all_write_one_output_race_with_the_same_values():
    """Every thread stores the same values to all of r: whichever lands last, r holds
    them. A warning (a same-value race), shown as a Python warning; strict: an error."""
    x = np.arange(4, dtype=np.float32)
    from portkit.simt.records import SimulationFault
    from portkit.simt.warning_log import SimulatorWarning

    kernel = simt.simulate(everyone_writes)
    r = np.zeros_like(x)
    with pytest.warns(SimulatorWarning, match=r"\[same-value-race\] kernel everyone_writes"):
        kernel[1, 2](r, x)
    np.testing.assert_allclose(r, np.sin(x))
    assert [w.kind for w in kernel.warnings] == ["same-value-race"]
    assert kernel.warnings[0].count == 4  # thread 1 rewrites each of the 4 elements
    from portkit.launch.kernel_set import LaunchConfig
    from portkit.simt.machine import Machine

    with pytest.raises(SimulationFault, match="race"):
        Machine(strict=True).launch(
            "everyone_writes", everyone_writes, LaunchConfig((1, 1, 1), (2, 1, 1), 0), [r, x]
        )


def test_ufunc_out_keyword_is_refused_as_numba_does():
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(KernelError, match=r"refuses keyword arguments \(out=\) to np.sin"):
        simt.simulate(sine_by_keyword)[1, 1](np.zeros_like(x), x)


@pytest.mark.parametrize("kernel", forms.ACCEPTED, ids=lambda k: k.__name__)
def test_allocations_numba_accepts_run(kernel):
    x = np.array([3.0], dtype=np.float32)
    out = np.zeros(1, np.float32)
    simt.simulate(kernel)[1, 1](x, out)
    assert out[0] == 3.0


@pytest.mark.parametrize(("kernel", "why"), forms.REFUSED, ids=lambda k: getattr(k, "__name__", ""))
def test_allocations_numba_refuses_are_one_line_errors(kernel, why):
    x = np.array([3.0], dtype=np.float32)
    with pytest.raises(KernelError) as caught:
        simt.simulate(kernel)[1, 1](x, np.zeros(1, np.float32))
    message = str(caught.value)
    assert message.startswith(f"kernel {kernel.__name__}, ") and "allocation_forms.py:" in message
    assert why in message and "\n" not in message


def _numba_compiles(kernel, monkeypatch) -> bool:
    import types

    import numba.cuda.dispatcher
    from numba.core.errors import TypingError

    # numba compiles a device function a kernel calls for the current device's compute
    # capability; with no driver here, say which
    device = types.SimpleNamespace(compute_capability=(8, 0))
    monkeypatch.setattr(numba.cuda.dispatcher, "get_current_device", lambda: device)
    try:
        cuda.compile_ptx(kernel.py_func, (float32[:], float32[:]), cc=(8, 0))
    except TypingError:
        return False
    return True


@pytest.mark.parametrize(
    ("kernel", "accepted"),
    [(k, True) for k in forms.ACCEPTED] + [(k, False) for k, _ in forms.REFUSED],
    ids=lambda k: getattr(k, "__name__", str(k)),
)
def test_numba_agrees_on_each_allocation_form(kernel, accepted, monkeypatch):
    try:
        from numba.cuda.cudadrv import nvvm

        nvvm.NVVM()
    except Exception as exc:  # noqa: BLE001 - no NVVM library: nothing to compare with
        pytest.skip(f"numba cannot compile here: {exc}")
    assert _numba_compiles(kernel, monkeypatch) is accepted
