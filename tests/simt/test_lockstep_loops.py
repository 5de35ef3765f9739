"""Loops whose threads run unequal counts (advent-of-numba's find_contiguous shape), and
the two things that make them fast in the lockstep engine: inputs no thread writes
record no reads (lockstep/unwritten.py), and lanes that leave the kernel's last loop
have ended. Both engines must agree bit for bit, faults included."""

from __future__ import annotations

import ast
import inspect
import textwrap

import numpy as np
import pytest
from numba import cuda

from portkit.launch.kernel_set import LaunchConfig
from portkit.simt.lockstep.unwritten import unwritten_parameters
from portkit.simt.machine import LOCKSTEP, PER_THREAD, Machine
from portkit.simt.records import SimulationFault


@cuda.jit(device=True)
def _bump(a, i):
    a[i] += 1


@cuda.jit
def find_contiguous(target, stop, seq, answer):
    i = cuda.grid(1)
    if i >= stop:
        return
    for j in range(stop - i):
        total = 0
        smallest = 999999999
        largest = 0
        for k in range(i, i + j):
            value = seq[k]
            total += value
            smallest = min(smallest, value)
            largest = max(largest, value)
        if total == target:
            answer[0] = smallest + largest


@cuda.jit
def scan_while(data, out, limit):
    i = cuda.grid(1)
    n = len(data)
    if i < n:
        j = i
        total = 0
        while j < n and total + data[j] <= limit:
            total += data[j]
            j += 1
        out[i] = j - i


@cuda.jit
def last_loop_with_break(data, out):
    i = cuda.grid(1)
    k = 0
    while True:
        if i + k >= data.size or data[i + k] == 0:
            break
        k += 1
        if i < out.size:
            out[i] = k


@cuda.jit
def equal_trips_with_break_and_continue(data, out, m):
    # range(i, i + m): bounds differ per thread, the trip count does not.
    i = cuda.grid(1)
    if i < out.size:
        total = 0
        for k in range(i, i + m):
            if data[k] % 3 == 0:
                continue
            if data[k] == 7:
                break
            total += data[k]
        out[i] = total


@cuda.jit
def scan_past_the_end(data, out):
    i = cuda.grid(1)
    if i < out.size:
        j = i
        while data[j] != 0:  # no bound: runs past the end where no zero follows
            j += 1
        out[i] = j


@cuda.jit
def shift_left_racing(x):
    i = cuda.grid(1)
    if i + 1 < x.size:
        x[i] = x[i + 1]


@cuda.jit
def writes_through_a_row(a, out):
    i = cuda.grid(1)
    if i < a.shape[0]:
        row = a[i]
        row[0] = out[i]
        out[i] = a[i, 1]


@cuda.jit
def uses(a, b, c, d, e, f, g, n):
    out = a[n] + b[n, n] + len(c) + d.shape[0]
    e[n] = out
    cuda.atomic.add(f, n, 1)
    _bump(g, n)


def _launch(engine, kernel, args, grid, block):
    machine = Machine(engine=engine)
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    fault = None
    try:
        config = LaunchConfig((grid, 1, 1), (block, 1, 1), 0)
        machine.launch(kernel.__name__, kernel, config, copies)
    except SimulationFault as exc:
        fault = (exc.kind, exc.detail, exc.place, exc.other)
    return copies, fault, machine.engines[-1]


def _compare(kernel, args, grid, block):
    slow = _launch(PER_THREAD, kernel, args, grid, block)
    fast = _launch(LOCKSTEP, kernel, args, grid, block)
    for k, (a, b) in enumerate(zip(slow[0], fast[0])):
        if isinstance(a, np.ndarray):
            assert a.tobytes() == b.tobytes(), f"argument {k} differs between the engines"
    assert fast[1] == slow[1]
    return fast


def test_only_parameters_read_element_by_element_are_unwritten():
    source = textwrap.dedent(inspect.getsource(uses.py_func))
    definition = ast.parse(source).body[0]
    found = unwritten_parameters(definition, ("a", "b", "c", "d", "e", "f", "g", "n"), {})
    assert found == {"a": frozenset({1}), "b": frozenset({2})}


def test_find_contiguous_runs_in_lockstep_as_per_thread():
    rng = np.random.default_rng(0)
    seq = rng.integers(1, 10**6, 90).astype(np.uint32)
    target = int(seq[30:41].sum())
    copies, fault, engine = _compare(
        find_contiguous, [target, 90, seq, np.zeros(1, np.uint32)], 3, 32
    )
    assert fault is None and engine.engine == LOCKSTEP, engine.reason
    assert copies[3][0] == int(seq[30:41].min()) + int(seq[30:41].max())


def test_scan_while_with_unequal_trips_runs_in_lockstep_as_per_thread():
    data = np.random.default_rng(1).integers(0, 10, 500).astype(np.int32)
    copies, fault, engine = _compare(scan_while, [data, np.zeros(500, np.int64), 40], 4, 128)
    assert fault is None and engine.engine == LOCKSTEP, engine.reason
    expected = []
    for i in range(500):
        j, total = i, 0
        while j < 500 and total + data[j] <= 40:
            total, j = total + data[j], j + 1
        expected.append(j - i)
    assert copies[1].tolist() == expected


def test_lanes_leaving_the_last_loop_by_break_end_as_per_thread():
    data = np.random.default_rng(2).integers(0, 4, 300).astype(np.int32)
    copies, fault, engine = _compare(last_loop_with_break, [data, np.zeros(200, np.int32)], 3, 128)
    assert fault is None and engine.engine == LOCKSTEP, engine.reason
    assert copies[1].any()


def test_equal_trip_counts_with_break_and_continue_run_as_per_thread():
    data = np.random.default_rng(3).integers(0, 10, 300).astype(np.int32)
    copies, fault, engine = _compare(
        equal_trips_with_break_and_continue, [data, np.zeros(250, np.int64), 40], 2, 128
    )
    assert fault is None and engine.engine == LOCKSTEP, engine.reason
    expected = []
    for i in range(250):
        total = 0
        for k in range(i, i + 40):
            if data[k] % 3 == 0:
                continue
            if data[k] == 7:
                break
            total += int(data[k])
        expected.append(total)
    assert copies[1].tolist() == expected


@pytest.mark.parametrize(
    "kernel, args",
    [
        (scan_past_the_end, [np.array([3, 0, 2, 1, 1], np.int32), np.zeros(5, np.int64)]),
        (shift_left_racing, [np.arange(300, dtype=np.float32)]),
    ],
    ids=["read-past-the-end", "race-on-a-written-input"],
)
def test_faults_in_loops_and_on_written_inputs_are_the_per_thread_ones(kernel, args):
    _, fault, _ = _compare(kernel, args, 3, 128)
    assert fault is not None


def test_a_row_view_written_keeps_its_array_checked():
    a = np.arange(40, dtype=np.float32).reshape(20, 2)
    copies, fault, _ = _compare(writes_through_a_row, [a, np.arange(20, dtype=np.float32)], 1, 32)
    assert fault is None
    assert copies[0][:, 0].tolist() == list(range(20))
