"""Interrupts, timeouts and budgets get through a simulated launch: in any thread, in
both engines, never taken for a lockstep failure and re-run per thread."""

from __future__ import annotations

import signal
import threading
import time

import numpy as np
import pytest
from numba import cuda

from portkit.simt import simulate
from portkit.simt.budget import BudgetExceeded
from portkit.simt.launcher import launch_config
from portkit.simt.lockstep_launch import LockstepFallback
from portkit.simt.machine import Machine
from portkit.simt.records import SimulationFault

ENGINES = ["auto", "per-thread"]


@cuda.jit
def spin(out):
    i = cuda.grid(1)
    j = i
    while j >= 0:
        j = (j + 1) % 7
    out[i] = j


@cuda.jit
def grid_ids(grid_error, gridsize_error):  # numba-cuda's test_issue_9229
    i1 = cuda.grid(1)
    i2 = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    gs1 = cuda.gridsize(1)
    gs2 = cuda.blockDim.x * cuda.gridDim.x
    if i1 != i2:
        grid_error[0] = 1
    if gs1 != gs2:
        gridsize_error[0] = 1


@cuda.jit
def prints(out):
    i = cuda.grid(1)
    if i == 0:
        print("hello")
    out[i] = i


@cuda.jit
def past_the_end(out):
    i = cuda.grid(1)
    print("x")
    out[i + 1] = i


@pytest.mark.parametrize("engine", ENGINES)
def test_budget_stops_a_spinning_kernel_in_a_thread(engine):
    caught: list[BaseException] = []

    def launch() -> None:
        try:
            simulate(spin, engine=engine, budget=0.3)[2, 32](np.zeros(64))
        except BaseException as exc:
            caught.append(exc)

    worker = threading.Thread(target=launch, daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the budget did not stop the launch off the main thread"
    assert time.monotonic() - started < 10
    assert len(caught) == 1 and isinstance(caught[0], BudgetExceeded), caught
    message = str(caught[0])
    assert "kernel spin: still running after 0.3 s" in message
    assert "test_interrupts.py:" in message and "block (0, 0, 0)" in message


def test_budgets_in_two_threads_stop_their_own_launch():
    caught: dict[str, BaseException] = {}

    def launch(tag: str, budget: float) -> None:
        try:
            simulate(spin, budget=budget)[1, 32](np.zeros(32))
        except BaseException as exc:
            caught[tag] = exc

    workers = [threading.Thread(target=launch, args=(t, b)) for t, b in (("a", 0.2), ("b", 0.6))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert sorted(caught) == ["a", "b"]
    assert "after 0.2 s" in str(caught["a"]) and "after 0.6 s" in str(caught["b"])


def test_a_launch_that_ends_in_time_is_not_stopped_later():
    out = np.zeros(64)
    kernel = simulate(prints, budget=0.2)
    kernel[2, 32](out)
    time.sleep(0.4)  # past the budget: no stray exception arrives now
    assert out.tolist() == list(range(64))


class _TestTimeout(Exception):
    """What a test runner's timeout handler raises (an Exception, not a BaseException)."""


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("raised", [_TestTimeout, MemoryError, KeyboardInterrupt])
def test_signal_handler_exception_propagates_without_a_rerun(engine, raised):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")

    fired: list[float] = []

    def handler(signum, frame):
        fired.append(time.monotonic())
        raise raised("timed out")

    kernel = simulate(grid_ids, engine=engine, budget=0)
    grid_error, gridsize_error = np.zeros(1, np.uint64), np.zeros(1, np.uint64)
    previous = signal.signal(signal.SIGALRM, handler)
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(raised, match="timed out"):
            kernel[22121216, 256](grid_error, gridsize_error)  # 5.7e9 threads
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    arrived = time.monotonic()
    # No re-run: the handler's exception arrives at once (a per-thread re-run of 5.7e9
    # threads would take hours); loose bounds, for a loaded machine.
    assert len(fired) == 1 and arrived - fired[0] < 5 and arrived - started < 60
    assert not any("re-run" in c.reason or c.fallback for c in kernel.engines), kernel.engines


def _machine_launch(kernel, threads: int, mode: str) -> Machine:
    machine = Machine(lockstep_fallback=mode)
    config = launch_config((1, threads, 0), kernel.py_func.__name__)
    machine.launch(kernel.py_func.__name__, kernel, config, [np.zeros(threads)])
    return machine


def test_a_fallback_is_counted():
    machine = _machine_launch(prints, 32, "allow")
    (choice,) = machine.engines
    assert choice.engine == "per-thread" and choice.fallback
    assert "print" in choice.reason


def test_a_fallback_is_an_error_when_asked():
    with pytest.raises(LockstepFallback, match=r"kernel prints: ran in the per-thread engine"):
        _machine_launch(prints, 32, "error")


def test_a_fault_found_per_thread_is_the_error_not_the_fallback():
    with pytest.raises(SimulationFault, match="past_the_end"):
        _machine_launch(past_the_end, 32, "error")


def test_a_lockstep_launch_is_no_fallback():
    @cuda.jit
    def copy(out):
        out[cuda.grid(1)] = 1.0

    machine = _machine_launch(copy, 32, "error")
    assert [(c.engine, c.fallback) for c in machine.engines] == [("lockstep", False)]
