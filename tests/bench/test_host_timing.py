"""The host-side timing loop every script uses (portkit.bench.timing.host_call and
host_rounds), against a scripted clock so the numbers are exact."""

from __future__ import annotations

import pytest

from portkit.bench import timing


@pytest.fixture
def clock(monkeypatch):
    """time.perf_counter as a counter the timed functions advance by hand."""
    now = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])
    return now


def test_host_call_returns_the_result_and_the_seconds(clock):
    def work():
        clock[0] += 2.5
        return "done"

    assert timing.host_call(work) == ("done", 2.5)


def test_host_rounds_interleaves_and_divides_by_the_calls(clock):
    order = []

    def step(name, cost):
        def fn():
            order.append(name)
            clock[0] += cost

        return fn

    def finish():
        order.append("sync")
        clock[0] += 1.0

    samples = timing.host_rounds(
        {"a": step("a", 1.0), "b": step("b", 3.0)}, rounds=2, calls={"a": 2, "b": 1},
        finish=finish,
    )
    # a: two calls of 1 s plus the 1 s finish over 2 calls; b: 3 s + 1 s over 1 call
    assert samples == {"a": [1.5, 1.5], "b": [4.0, 4.0]}
    assert order == ["a", "a", "sync", "b", "sync"] * 2


def test_host_rounds_refuses_no_rounds():
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        timing.host_rounds({"a": lambda: None}, rounds=0)
