"""How xdist's workers share the generated items: GPU-sized cases spread through the
collection, and work stealing where ``-n`` alone implied xdist's ``load``."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from portkit.pytest_plugin import scheduling
from tests.test_plugin import plugin_args


@pytest.mark.parametrize("seed", range(20))
def test_spread_moves_only_the_heavy_items_and_spaces_them(seed):
    rng = random.Random(seed)
    items = [(i, rng.random() < 0.1) for i in range(rng.randint(0, 300))]
    got = scheduling.spread(items, lambda item: item[1])
    assert sorted(got) == sorted(items)  # a permutation: every item once
    light = [item for item in items if not item[1]]
    heavy = [item for item in items if item[1]]
    assert [item for item in got if not item[1]] == light  # the rest keep their order
    assert [item for item in got if item[1]] == heavy
    if heavy and light:
        places = [got.index(item) for item in heavy]
        assert places == [j * len(items) // len(heavy) for j in range(len(heavy))]


def test_neighbouring_heavy_items_end_up_far_apart():
    """An op's GPU-sized cases, neighbours in the collection, each in another stretch."""
    items = [f"light{i}" for i in range(120)]
    items[60:60] = ["numba[big]", "twin[big]", "numba~twin[big]"]
    got = scheduling.spread(items, lambda item: "big" in item)
    assert [got.index(n) for n in ("numba[big]", "twin[big]", "numba~twin[big]")] == [0, 41, 82]


def config(dist: str, args: tuple = (), addopts: tuple = (), worker: bool = False):
    found = SimpleNamespace(
        invocation_params=SimpleNamespace(args=args),
        getoption=lambda name, default=None: dist if name == "dist" else default,
        getini=lambda name: list(addopts),
    )
    if worker:
        found.workerinput = {}
    return found


def test_work_stealing_only_where_n_implied_load(monkeypatch):
    import xdist.scheduler

    class WorkStealing:  # xdist's own needs a whole session's config: the e2e test below
        def __init__(self, config, log):
            self.config = config

    monkeypatch.setattr(xdist.scheduler, "WorkStealingScheduling", WorkStealing)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    implied = config("load", ("-n", "4"))
    assert scheduling.make_scheduler(implied, log=None).config is implied
    for chosen in (config("load", ("-n", "4", "--dist", "load")), config("load", ("--dist=load",))):
        assert scheduling.make_scheduler(chosen, log=None) is None
    assert scheduling.make_scheduler(config("load", addopts=("--dist", "load")), None) is None
    monkeypatch.setenv("PYTEST_ADDOPTS", "-n 2 --dist load")
    assert scheduling.make_scheduler(config("load"), log=None) is None
    for mode in ("loadscope", "loadgroup", "no"):
        assert scheduling.make_scheduler(config(mode), log=None) is None


def test_only_a_worker_told_by_a_controller_in_an_ordered_mode_spreads():
    for mode, spread in (("load", True), ("worksteal", True), ("loadscope", False)):
        workerinput: dict = {}
        scheduling.tell_worker(config(mode), workerinput)  # on the controller
        worker = config("no", worker=True)  # xdist sets a worker's own --dist to "no"
        worker.workerinput = workerinput
        assert scheduling.spreads(worker) is spread, mode
    assert not scheduling.spreads(config("load"))  # the controller does not collect
    assert not scheduling.spreads(config("no", worker=True))  # told nothing


def test_an_xdist_run_steals_work_spreads_the_large_items_and_runs_each_once(pytester):
    """End to end under pytest-xdist: the plugin's scheduler hook is taken, the workers'
    collection has the large items spread apart, and every item runs exactly once."""
    pytester.makeconftest(
        """
import os
import pytest

@pytest.hookimpl(hookwrapper=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    outcome = yield
    with open("scheduler.txt", "w") as f:
        f.write(type(outcome.get_result()).__name__)

def pytest_collection_finish(session):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    with open(f"order-{worker}.txt", "w") as f:
        f.write(" ".join(item.name for item in session.items))
"""
    )
    tests = [
        ("@pytest.mark.large\n" if 5 <= i <= 7 else "") + f"def test_{i}(): pass" for i in range(12)
    ]
    pytester.makepyfile(test_items="import pytest\n\n" + "\n".join(tests))
    result = pytester.runpytest_subprocess(*plugin_args(), "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=12)
    assert (pytester.path / "scheduler.txt").read_text() == "WorkStealingScheduling"
    for worker in ("gw0", "gw1"):  # both collect, in one order, the large ones 4 apart
        order = (pytester.path / f"order-{worker}.txt").read_text().split()
        assert [order.index(f"test_{i}") for i in (5, 6, 7)] == [0, 4, 8], order
