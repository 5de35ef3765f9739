"""The one rule for red (docs/simulator.md): what a GPU can get wrong is an error, what
the CUDA C++ guide leaves undefined but GPUs run right is a warning, with kernel,
thread, line and rule; strict mode makes the warnings errors. Each rule: a kernel that
is a warning beside its buggy sibling, which is an error."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from portkit.launch.kernel_set import LaunchConfig
from portkit.simt.machine import Machine
from portkit.simt.records import SimulationFault
from tests.simt import rule_kernels

SOURCE = Path(rule_kernels.__file__)
TPB = rule_kernels.TPB
ENGINES = ("auto", "per-thread")


def marked_line(tag: str, name: str) -> int:
    for number, text in enumerate(SOURCE.read_text().splitlines(), 1):
        if re.search(rf"# {tag}: {name}\b", text):
            return number
    raise AssertionError(f"no '# {tag}: {name}' in {SOURCE}")


def launch(name: str, args, grid: int, engine: str = "auto", strict: bool = False) -> Machine:
    machine = Machine(engine=engine, strict=strict)
    config = LaunchConfig((grid, 1, 1), (TPB, 1, 1), 0)
    machine.launch(name, getattr(rule_kernels, name), config, args)
    return machine


def warned(name: str, args, grid: int, engine: str = "auto"):
    """The one warning a kernel gives, checked to name its WARN line."""
    machine = launch(name, args, grid, engine)
    [warning] = machine.warnings
    assert warning.kernel == name
    assert warning.place is not None and warning.place.file == str(SOURCE)
    assert warning.place.line == marked_line("WARN", name), warning.describe()
    assert warning.rule and "rule: " in warning.describe()
    return warning


def faulted(name: str, args, grid: int, engine: str = "auto", strict: bool = False):
    with pytest.raises(SimulationFault) as caught:
        launch(name, args, grid, engine, strict)
    fault = caught.value
    assert fault.place is not None and fault.place.file == str(SOURCE)
    return fault


# -- barriers --------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
def test_threads_that_returned_count_as_arrived_at_a_barrier(engine):
    n = 70  # block 2 has 6 live threads, 26 returned
    x = np.arange(n, dtype=np.float32)
    out = np.full(3, np.nan, np.float32)
    warning = warned("block_sum_early_return", [x, out, n], 3, engine)
    assert warning.kind == "barrier-after-exit"
    assert warning.place.block == (2, 0, 0)
    assert "reached by 6 of the block's 32 threads; 26 exited" in warning.detail
    expected = [x[k * TPB : (k + 1) * TPB].sum() for k in range(3)]
    np.testing.assert_array_equal(out, np.array(expected, np.float32))


def test_barrier_after_exit_is_an_error_in_strict_mode():
    n = 70
    x = np.arange(n, dtype=np.float32)
    fault = faulted("block_sum_early_return", [x, np.zeros(3, np.float32), n], 3, strict=True)
    assert fault.kind == "barrier-divergence" and "strict" in fault.detail
    assert fault.place.line == marked_line("WARN", "block_sum_early_return")


@pytest.mark.parametrize("engine", ENGINES)
def test_reading_the_exited_threads_slots_is_an_error(engine):
    n = 70
    x = np.arange(n, dtype=np.float32)
    fault = faulted("block_sum_reads_exited_slots", [x, np.zeros(3, np.float32), n], 3, engine)
    assert fault.kind == "uninitialised"
    assert "stored to global memory out[2]" in fault.detail
    assert "shared memory s[6]" in fault.detail
    assert fault.place.line == marked_line("BUG", "block_sum_reads_exited_slots")


@pytest.mark.parametrize("engine", ENGINES)
def test_exited_threads_cast_no_vote_in_syncthreads_count(engine):
    n = 40
    x = np.arange(n, dtype=np.float32) - 35  # block 1: i = 32..39, x > 0 for i >= 36
    out = np.full(n, -1, np.int32)
    warning = warned("count_positive_early_return", [x, out, n], 2, engine)
    assert "they cast no vote" in warning.detail
    assert (out[:32] == 0).all() and (out[32:] == 4).all()


# -- uninitialised values --------------------------------------------------------------
def test_an_uninitialised_tile_slot_folded_into_a_dropped_sum_is_a_warning():
    n = 20
    x = np.arange(n, dtype=np.float32)
    out = np.full(TPB, np.nan, np.float32)
    warning = warned("tile_slot_dropped", [x, out, n], 1)
    assert warning.kind == "uninitialised-read"
    assert "tile[20]" in warning.detail and warning.place.thread == (20, 0, 0)
    np.testing.assert_array_equal(out[:n], 1 + 2 * x)


def test_the_same_sum_stored_is_an_error():
    n = 20
    x = np.arange(n, dtype=np.float32)
    fault = faulted("tile_slot_stored", [x, np.zeros(TPB, np.float32), n], 1)
    assert fault.kind == "uninitialised"
    assert "stored to global memory out[20]" in fault.detail and "tile[20]" in fault.detail
    assert fault.place.thread == (20, 0, 0)
    assert fault.place.line == marked_line("BUG", "tile_slot_stored")


def test_the_dropped_read_is_an_error_in_strict_mode():
    n = 20
    x = np.arange(n, dtype=np.float32)
    fault = faulted("tile_slot_dropped", [x, np.zeros(TPB, np.float32), n], 1, strict=True)
    assert fault.kind == "uninitialised" and "tile[20]" in fault.detail


def test_a_dropped_local_read_is_a_warning():
    x = np.arange(TPB, dtype=np.float32)
    out = np.zeros(TPB, np.float32)
    warning = warned("local_dropped", [x, out, TPB], 1)
    assert warning.kind == "uninitialised-read" and "local memory tmp[1]" in warning.detail
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize(
    ("name", "how"),
    [
        ("local_branched_on", "used in a branch condition"),
        ("local_as_index", "used as an index"),
        ("local_math_then_index", "used as an index"),
        ("shared_atomic_operand", "used as an atomic's operand"),
        ("poison_through_shared", "stored to global memory out[0]"),
        ("vote_on_uninitialised", "used in a branch condition"),
    ],
)
def test_an_uninitialised_value_used_is_an_error(name, how):
    x = np.arange(TPB, dtype=np.float32)
    out = np.zeros(TPB, np.float32)
    fault = faulted(name, [x, out, TPB], 1)
    assert fault.kind == "uninitialised"
    assert f"uninitialised value {how}" in fault.detail, fault.detail
    assert fault.place.line == marked_line("BUG", name)


# -- write-write races -----------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
def test_threads_storing_the_same_value_is_a_warning(engine):
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(1, np.float32)
    warning = warned("everyone_stores_one", [x, out, 64], 2, engine)
    assert warning.kind == "same-value-race" and "of the same value" in warning.detail
    assert warning.other is not None and warning.count == 63
    assert out[0] == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_threads_storing_different_values_is_an_error(engine):
    x = np.arange(64, dtype=np.float32)
    fault = faulted("everyone_stores_theirs", [x, np.zeros(1, np.float32), 64], 2, engine)
    assert fault.kind == "race" and "of another value" in fault.detail
    assert fault.place.line == marked_line("BUG", "everyone_stores_theirs")


def test_same_value_race_is_an_error_in_strict_mode():
    x = np.arange(64, dtype=np.float32)
    fault = faulted("everyone_stores_one", [x, np.zeros(1, np.float32), 64], 2, strict=True)
    assert fault.kind == "race"


# -- reads racing with atomics ---------------------------------------------------------
def histogram_args(n: int = 64):
    x = (np.arange(n, dtype=np.int64) * 7) % 11
    return [x, np.zeros(4, np.int64), np.full(n, -1, np.int64), n]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_peek_at_an_atomic_counter_the_outputs_do_not_depend_on_is_a_warning(engine):
    args = histogram_args()
    warning = warned("histogram_peek_unused", args, 2, engine)
    assert warning.kind == "atomic-read-race"
    assert "happened not to depend on the order" in warning.detail
    assert "reversed schedule gave the same bits" in warning.detail
    np.testing.assert_array_equal(args[2], args[0])
    np.testing.assert_array_equal(args[1], np.bincount(args[0] % 4, minlength=4))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_stored_peek_at_an_atomic_counter_is_an_error(engine):
    fault = faulted("histogram_peek_stored", histogram_args(), 2, engine)
    assert fault.kind == "race"
    assert "races with another thread's atomic" in fault.detail
    assert "the outputs differ between the forward and reversed schedules: out[" in fault.detail
    assert fault.place.line == marked_line("BUG", "histogram_peek_stored")


def test_a_read_racing_with_atomics_is_an_error_in_strict_mode():
    fault = faulted("histogram_peek_unused", histogram_args(), 2, strict=True)
    assert fault.kind == "race"


def test_min_max_reading_what_others_update_atomically_is_a_warning():
    """numba-examples' histogram: portkit's simulator reported a race; the
    reversed schedule gives the same minmax, so it is a warning (per thread; the lockstep
    engine, where it vectorises such a kernel, sees every read before any atomic)."""
    x = np.array([5, -3, 9, 2, 7, 1] * 11, np.float32)
    config = LaunchConfig((3, 1, 1), (TPB, 1, 1), 0)
    minmax = np.array([x[0], x[0]], np.float32)
    warning = warned("min_max", [x, minmax], 3, "per-thread")
    assert warning.kind == "atomic-read-race" and "minmax[0]" in warning.detail
    np.testing.assert_array_equal(minmax, [-3, 9])
    minmax = np.array([x[0], x[0]], np.float32)
    Machine().launch("min_max", rule_kernels.min_max, config, [x, minmax])  # no fault
    np.testing.assert_array_equal(minmax, [-3, 9])
