"""How the runner times a call it cannot hide behind a spin, and ops with integer inputs,
on a CPU: the simulator runs the kernels, a scripted clock decides which calls the spin
covered. Nothing here measures or asserts a time."""

from __future__ import annotations

import json

import pytest

from portkit.bench.model import Measurement, Report
from portkit.bench.runner import MAX_ATTEMPTS
from portkit.bench.timing import EVENTS, MAX_COVER_US, SPIN
from portkit.results import Outcome
from tests.bench.test_bench import FakeClock, report, roles_report


class ScriptedClock(FakeClock):
    """``covers`` answers from a script, call by call (True once the script runs out);
    every ``prepare`` is recorded with the spin it asked for."""

    def __init__(self, uncovered: set[int] | None = None, never: bool = False):
        super().__init__()
        self.uncovered, self.never = uncovered or set(), never
        self.asked = 0
        self.spins: list[tuple[bool, float]] = []

    def prepare(self, spin=True):
        super().prepare(spin)
        self.spins.append((spin, self.cover_us))

    def covers(self, host_us):
        self.asked += 1
        return not self.never and (self.asked - 1) not in self.uncovered


def run_scripted(make_project, load_op, sources, name, clock, reps=4):
    from portkit.backends import create
    from portkit.bench.runner import Bench
    from portkit.project.cases import Case

    prototype = sources.unary_op(name, "out[i] = x[i] * 2.0", backward="dx[i] = dy[i] * 2.0")
    config, op = load_op(make_project({name: (prototype, None)}), name)
    backends = [create("torch", config), create("sim", config)]
    bench = Bench(clock, reps=reps, warmup=1)
    return {
        (m.direction, m.implementation): m
        for m in bench.run_op(op, [Case("n40", ((40,),))], backends)
    }


def test_a_call_no_spin_covers_is_timed_with_plain_events(make_project, load_op, sources):
    """A call that waits for the GPU inside itself (torch's histogram indexes by a mask)
    keeps the host busy however long the spin: it is timed, not failed."""
    clock = ScriptedClock(never=True)
    rows = run_scripted(make_project, load_op, sources, "bench_never", clock)
    assert len(rows) == 4
    for m in rows.values():
        assert m.status is Outcome.PASS and m.time is not None and m.time.n == 4, m
        assert m.timing == EVENTS
    # per task: MAX_ATTEMPTS spins that failed to cover, then every call without a spin
    spins = [spin for spin, _ in clock.spins]
    assert spins.count(True) == 4 * MAX_ATTEMPTS and spins.count(False) == 4 * 4
    # each try spins longer; the next implementation starts from the cover the first had
    tries = [cover for spin, cover in clock.spins if spin]
    assert tries[:MAX_ATTEMPTS] == [min(tries[0] * 2**i, MAX_COVER_US) for i in range(MAX_ATTEMPTS)]
    assert tries[MAX_ATTEMPTS : 2 * MAX_ATTEMPTS] == tries[:MAX_ATTEMPTS]


def test_only_the_uncovered_implementation_falls_back_and_drops_its_spin_samples(
    make_project, load_op, sources
):
    # Forward, round 0: torch (ask 0), sim (ask 1) covered. Round 1 starts with sim:
    # asks 2-5 uncovered, so sim switches to events and its round-0 sample is dropped.
    clock = ScriptedClock(uncovered={2, 3, 4, 5})
    rows = run_scripted(make_project, load_op, sources, "bench_mixed", clock)
    sim = rows[("forward", "sim")]
    assert sim.timing == EVENTS and sim.status is Outcome.PASS
    assert sim.time is not None and sim.time.n == 3  # rounds 1-3, by one method
    for key in (("forward", "torch"), ("backward", "torch"), ("backward", "sim")):
        assert rows[key].timing == SPIN and rows[key].time.n == 4, rows[key]


def test_timing_method_survives_json_and_is_marked_in_the_table():
    from rich.console import Console

    from portkit.bench.table import results_table

    base = roles_report()
    twin = base.find("op", "c", "forward", "twin")
    marked = report(*[m for m in base.measurements if m is not twin], _with(twin, EVENTS))
    assert Report.from_dict(json.loads(json.dumps(marked.to_dict()))) == marked
    old = marked.to_dict()
    for row in old["results"]:
        del row["timing"]  # a report saved before the field existed
    assert {m.timing for m in Report.from_dict(old).measurements} == {SPIN}
    console = Console(width=250, record=True)
    console.print(results_table(marked))
    text = console.export_text()
    assert "2.0 *" in text and "1.0 *" not in text
    assert "timed with plain events" in " ".join(text.split())


def _with(m: Measurement, timing: str) -> Measurement:
    from dataclasses import replace

    return replace(m, timing=timing)


INT_WEIGHT = """\
import torch
from numba import cuda

import portkit

THREADS = 32


@cuda.jit
def {name}_fwd(x, w, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] * w[i]


@cuda.jit
def {name}_bwd(w, dy, dx, n):
    i = cuda.grid(1)
    if i < n:
        dx[i] = dy[i] * w[i]


CASE = portkit.cases.custom("n40", [(40,), (40,)], input_dtypes=("float32", "int64"))


@portkit.op(reference=lambda x, w: x * w, cases=[CASE], input_dtypes=(None, "int64"))
class IntWeight:
    def forward(k, x, w):
        out = k.empty_like(x)
        n = x.numel()
        k.{name}_fwd[portkit.cdiv(n, THREADS), THREADS](x, w, out, n)
        return out, (w,)

    def backward(k, saved, dy):
        (w,) = saved
        dx = k.empty_like(dy)
        n = dy.numel()
        k.{name}_bwd[portkit.cdiv(n, THREADS), THREADS](w, dy, dx, n)
        return dx, None
"""


@pytest.mark.parametrize("wrong", [False, True])
def test_an_integer_input_is_timed_without_gradients(make_project, load_op, wrong):
    """A class index or a weight in int64: no gradient is asked of it, the float input's
    gradient is timed and checked (a wrong one still fails)."""
    from portkit.backends import create
    from portkit.bench.runner import Bench

    name = "bench_int_weight_bad" if wrong else "bench_int_weight"
    source = INT_WEIGHT.format(name=name)
    if wrong:
        source = source.replace("dx[i] = dy[i] * w[i]", "dx[i] = dy[i] * w[i] + 1.0")
    config, op = load_op(make_project({name: (source, None)}), name)
    backends = [create("torch", config), create("sim", config)]
    result = Bench(FakeClock(), reps=5, warmup=1).run_op(op, op.definition.cases, backends)
    rows = {(m.direction, m.implementation): m for m in result}
    assert set(rows) == {(d, i) for d in ("forward", "backward") for i in ("torch", "sim")}
    for (direction, impl), m in rows.items():
        if wrong and (direction, impl) == ("backward", "sim"):
            assert m.status is Outcome.FAIL and m.time is None, m
        else:
            assert m.status is Outcome.PASS and m.time is not None and m.time.n == 5, m
