"""Which configurations ``portkit tune`` tries, and which one wins.

A configuration is one value per declared knob. ``search`` asks ``evaluate`` for a batch
of configurations at a time (so one benchmark run interleaves them, as ``portkit bench``
interleaves implementations) and gets back, per configuration, its time or None where
its outputs did not match the reference: a configuration that computes a wrong result is
never chosen, however fast. Strategies:

- ``grid``: every configuration, when the grid has at most ``budget`` of them;
- ``greedy`` (coordinate descent, the default past ``budget``): from the defaults, try
  every value of one knob with the others fixed, keep the best, move to the next knob,
  and sweep again until a sweep changes nothing or ``budget`` configurations were timed;
- ``random``: ``budget`` configurations drawn from the grid (the defaults among them).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from portkit.errors import PortkitError

Config = tuple[tuple[str, Any], ...]  # (name, value) per knob, in declaration order
STRATEGIES = ("auto", "grid", "greedy", "random")
DEFAULT_BUDGET = 32


@dataclass
class Trials:
    """What was timed: configuration -> microseconds (None: wrong results or no run)."""

    times: dict[Config, float | None] = field(default_factory=dict)

    def best(self) -> tuple[Config, float] | None:
        timed = [(t, c) for c, t in self.times.items() if t is not None]
        if not timed:
            return None
        time, config = min(timed, key=lambda tc: tc[0])
        return config, time


def grid(declared: Mapping[str, Sequence[Any]]) -> list[Config]:
    names = list(declared)
    return [tuple(zip(names, values)) for values in itertools.product(*declared.values())]


def defaults(declared: Mapping[str, Sequence[Any]]) -> Config:
    return tuple((name, values[0]) for name, values in declared.items())


def search(
    declared: Mapping[str, Sequence[Any]],
    evaluate: Callable[[list[Config]], Mapping[Config, float | None]],
    strategy: str = "auto",
    budget: int = DEFAULT_BUDGET,
    seed: int = 0,
) -> Trials:
    """Time configurations of ``declared`` through ``evaluate`` under ``strategy``."""
    if strategy not in STRATEGIES:
        raise PortkitError(f"unknown strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
    if budget < 1:
        raise PortkitError(f"--budget is the most configurations to time, at least 1; got {budget}")
    everything = grid(declared)
    if strategy == "auto":
        strategy = "grid" if len(everything) <= budget else "greedy"
    trials = Trials()

    def run(batch: list[Config]) -> None:
        fresh = [c for c in dict.fromkeys(batch) if c not in trials.times]
        fresh = fresh[: max(0, budget - len(trials.times))]
        if fresh:
            results = evaluate(fresh)
            trials.times.update({c: results.get(c) for c in fresh})

    if strategy == "grid":
        if len(everything) > budget:
            raise PortkitError(
                f"the grid has {len(everything)} configurations, more than --budget {budget}: "
                f"raise --budget, or use --strategy greedy or random"
            )
        run(everything)
    elif strategy == "random":
        rest = [c for c in everything if c != defaults(declared)]
        random.Random(seed).shuffle(rest)
        run([defaults(declared), *rest[: budget - 1]])
    else:
        _greedy(declared, trials, run, budget)
    return trials


def _greedy(
    declared: Mapping[str, Sequence[Any]],
    trials: Trials,
    run: Callable[[list[Config]], None],
    budget: int,
) -> None:
    current = defaults(declared)
    run([current])
    while len(trials.times) < budget:
        start = current
        for position, (name, values) in enumerate(declared.items()):
            batch = [current[:position] + ((name, v),) + current[position + 1 :] for v in values]
            run(batch)
            timed = [(trials.times.get(c), c) for c in batch]
            correct = [(t, c) for t, c in timed if t is not None]
            if correct:
                current = min(correct, key=lambda tc: tc[0])[1]
            if len(trials.times) >= budget:
                return
        if current == start:
            return
