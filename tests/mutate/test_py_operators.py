"""The prototype's mutation operators, each on a small numba kernel; only kernels (and
device functions) are mutated, never the launcher, the reference or the cases."""

from __future__ import annotations

import ast

from portkit.mutate.py_operators import prototype_mutants

PROTOTYPE = """\
from numba import cuda

import portkit

FULL = 0xFFFFFFFF


@cuda.jit(device=True)
def warp_sum(v):
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(FULL, v, offset)
        offset //= 2
    return v


@cuda.jit
def kernel(x, out, hist, n):
    i = cuda.grid(1)
    if i >= n:
        return
    part = cuda.shared.array(32, dtype=x.dtype)
    part[cuda.threadIdx.x] = x[i]
    cuda.syncthreads()
    if i < n:
        out[i] = warp_sum(part[cuda.threadIdx.x])
        cuda.atomic.add(hist, i, 1)
    for c in range(4 * n + i, n, 32):
        out[c] = x[c]


def launcher(x, n):
    if n < 3:  # not a kernel: never mutated
        return x[n]
"""


def mutants(kind: str):
    return prototype_mutants(PROTOTYPE, "prototypes/p.py", {kind})


def line_of(m) -> str:
    return m.source.splitlines()[m.line - 1].strip()


def test_barrier_becomes_pass():
    (m,) = mutants("barrier")
    assert m.line == 24 and line_of(m) == "pass" and m.side == "prototype"


def test_bound_makes_less_than_less_or_equal_and_range_stops_inclusive():
    found = {(m.line, line_of(m)) for m in mutants("bound")}
    assert (25, "if i <= n:") in found
    assert (28, "for c in range(4 * n + i, n + 1, 32):") in found
    assert not any(line > 30 for line, _ in found)  # the launcher's `n < 3` stays


def test_index_shifts_a_name_subscript():
    found = {line_of(m) for m in mutants("index")}
    assert "out[i + 1] = warp_sum(part[cuda.threadIdx.x])" in found
    assert "part[cuda.threadIdx.x] = x[i + 1]" in found
    assert not any("return x[n + 1]" in m.source for m in mutants("index"))


def test_atomic_becomes_a_plain_update():
    (m,) = mutants("atomic")
    assert line_of(m) == "hist[i] += 1"


def test_tail_loop_is_dropped_keeping_line_numbers():
    (m,) = mutants("tail")
    assert m.line == 28 and line_of(m) == "pass"
    assert m.source.count("\n") == PROTOTYPE.count("\n")
    assert m.source.splitlines()[29] == ""  # the body's line, kept blank


def test_shuffle_direction_and_offset_in_a_device_function():
    found = {line_of(m) for m in mutants("shuffle")}
    assert found == {
        "v += cuda.shfl_up_sync(FULL, v, offset)",
        "v += cuda.shfl_down_sync(FULL, v, offset // 2)",
    }


def test_guards_and_early_returns():
    found = {(m.line, line_of(m)) for m in mutants("guard")}
    assert found == {(25, "if True:"), (20, "if False:")}


def test_every_mutant_parses_and_twin_kinds_have_no_python_operator():
    every = prototype_mutants(PROTOTYPE, "p.py")
    for m in every:
        ast.parse(m.source)
    assert {m.kind for m in every} == {
        "barrier", "bound", "index", "atomic", "tail", "shuffle", "guard"
    }
    assert prototype_mutants(PROTOTYPE, "p.py", {"int32", "accum"}) == []


def test_a_file_that_does_not_parse_has_no_mutants():
    assert prototype_mutants("def broken(:\n", "p.py") == []
