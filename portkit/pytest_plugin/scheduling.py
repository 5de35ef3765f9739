"""How pytest-xdist's workers share the generated items: GPU-sized cases spread apart in
the collection, and work stealing instead of xdist's default ``load``.

Why (the generated suite on one H200, 16 workers, 2026-11-28): xdist's ``load`` sends each
worker runs of neighbouring items, and an op's GPU-sized cases are neighbours
(``numba[bfloat16-16384x4096]``, ``twin[...]``, ``numba~twin[...]``, then the float32
case's three). One worker ran add_rmsnorm's six, 10-35 s each, back to back: 112 s of a
115 s run whose items add up to 325 s over 16 workers, and a shard holding that op took
as long as the whole suite on one GPU. Spread through the collection, each lands in
another worker's run; with work stealing, an idle worker takes the back half of the
busiest one's queue instead of waiting while a long item holds the rest behind it.

Work stealing, with each case drawing its upstream gradients once, took that run to 41 s;
the spread is not timed on a GPU yet (docs/scale.md). xdist resets each worker's own
``--dist`` to "no", so the controller tells the workers whether to spread
(``tell_worker``, through pytest-xdist's ``pytest_configure_node``).

Only the order in which workers take items changes: every item runs once, as before.
Without xdist (``-n`` not given) the collection keeps its order. ``--dist MODE`` on the
command line or in addopts is the user's choice and is left alone.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pytest

Item = TypeVar("Item")
# xdist's modes that take items one by one in collection order (not by file or group)
_ORDERED_MODES = ("load", "worksteal")


def spread(items: Sequence[Item], heavy: Callable[[Item], bool]) -> list[Item]:
    """``items`` with the heavy ones moved to evenly spaced places (the first at 0), the
    rest in their order: heavy item j of h goes to index j * len(items) // h."""
    weighty = [item for item in items if heavy(item)]
    light = [item for item in items if not heavy(item)]
    if not weighty or not light:
        return list(items)
    spread_out: list[Item] = []
    rest = iter(light)
    for j, item in enumerate(weighty):
        place = j * len(items) // len(weighty)
        while len(spread_out) < place:
            spread_out.append(next(rest))
        spread_out.append(item)
    spread_out.extend(rest)
    return spread_out


# What the controller tells each worker (xdist resets a worker's own --dist to "no").
SPREAD_KEY = "portkit_spread"


def tell_worker(config: pytest.Config, workerinput: dict[str, Any]) -> None:
    """On xdist's controller, for each worker it starts: whether to spread the collection
    (a mode that takes items in collection order)."""
    workerinput[SPREAD_KEY] = config.getoption("dist", "no") in _ORDERED_MODES


def spreads(config: pytest.Config) -> bool:
    """Whether this process orders the collection for xdist: a worker (each collects, and
    all must agree on one order) whose controller said its mode takes items in
    collection order."""
    workerinput = getattr(config, "workerinput", None)
    return bool(workerinput and workerinput.get(SPREAD_KEY))


def dist_chosen(config: pytest.Config) -> bool:
    """Whether the user named a ``--dist`` mode (command line, PYTEST_ADDOPTS or addopts)
    rather than taking the one ``-n`` implies."""
    from portkit.project.environment import process_variable

    words = list(config.invocation_params.args)
    words += shlex.split(process_variable("PYTEST_ADDOPTS") or "")
    words += list(config.getini("addopts"))
    return any(str(word).startswith("--dist") for word in words)


def make_scheduler(config: pytest.Config, log: Any) -> Any | None:
    """xdist's work-stealing scheduler where ``-n`` implied ``load``; None (xdist's own
    choice) where the user named a mode or this xdist has no work stealing."""
    if config.getoption("dist", "no") != "load" or dist_chosen(config):
        return None
    try:
        from xdist.scheduler import WorkStealingScheduling  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - pytest-xdist before 3.2
        return None
    return WorkStealingScheduling(config, log)
