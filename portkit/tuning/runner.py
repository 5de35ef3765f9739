"""``portkit tune``'s measurements: each candidate configuration of an op's knobs timed on
this machine's GPU at the op's bench cases, with ``portkit bench``'s runner.

Per case, a batch of configurations runs as one benchmark: each configuration is the
twin pinned to it (``checking.configurations.PinnedBackend``), the batch interleaved
rep by rep, L2 flushed, every timed output checked against the reference within the
op's tolerance (what ``portkit check`` allows). A configuration's time is its forward's
median plus its backward's (each knob acts on one of them, and a model runs both); a
configuration whose output or gradient is wrong in any timed call has no time, so the
search never picks it. The table entry is keyed by the shape bucket the launcher asked
about (``portkit.knobs(k, x)``), recorded while it ran.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from portkit.bench.runner import DIRECTIONS, Bench
from portkit.checking.configurations import PinnedBackend
from portkit.project.tuning_table import knob_choice
from portkit.results import Outcome
from portkit.runtime.knob_choice import describe
from portkit.tuning.search import Config, Trials, defaults, search

if TYPE_CHECKING:
    from portkit.backends import Backend
    from portkit.bench.timing import Clock
    from portkit.project.cases import Case
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op


@dataclass
class CaseTuning:
    """What tuning one case found."""

    case: str
    buckets: tuple[str, ...]  # the table keys: the buckets the launchers asked about
    trials: Trials
    default: Config
    failures: dict[Config, str]  # why a configuration has no time
    # configuration -> direction ("forward", "backward") -> median us, of those timed
    directions: dict[Config, dict[str, float]] = field(default_factory=dict)

    def directions_us(self, config: Config) -> dict[str, float | None]:
        """forward_us and backward_us of ``config`` (None: not timed, or wrong)."""
        split = self.directions.get(config, {})
        return {f"{d}_us": split.get(d) for d in DIRECTIONS}

    @property
    def default_us(self) -> float | None:
        return self.trials.times.get(self.default)

    @property
    def best(self) -> tuple[Config, float] | None:
        return self.trials.best()

    def entry(self) -> dict[str, Any] | None:
        best = self.best
        if best is None:
            return None
        config, time = best
        return {
            "config": dict(config),
            "us": round(time, 3),
            "default_us": None if self.default_us is None else round(self.default_us, 3),
            "case": self.case,
            "tried": len(self.trials.times),
        }


class CaseEvaluator:
    """``evaluate(batch)`` for ``search``: times a batch of configurations at one case."""

    def __init__(
        self, op: Op, case: Case, backend: Backend, config: ProjectConfig, bench: Bench
    ) -> None:
        self.op, self.case, self.backend, self.bench = op, case, backend, bench
        self.choice = knob_choice(op, config)
        self.buckets: dict[str, None] = {}
        self.failures: dict[Config, str] = {}
        self.directions: dict[Config, dict[str, float]] = {}

    def __call__(self, batch: list[Config]) -> dict[Config, float | None]:
        pinned = {}
        for config in batch:
            label = describe(dict(config))
            choice = self.choice.pinned(dict(config), label)
            choice.asked = self.buckets  # record the buckets the launchers ask about
            backend = PinnedBackend(self.backend, choice, label)
            pinned[f"{self.backend.name} ({label})"] = (config, backend)
        rows = self.bench.run_case(self.op, self.case, [b for _, b in pinned.values()])
        times: dict[Config, float | None] = {config: 0.0 for config, _ in pinned.values()}
        for row in rows:
            config = pinned[row.implementation][0]
            if row.status is not Outcome.PASS or row.time is None or times[config] is None:
                if row.status is not Outcome.PASS:
                    self.failures[config] = f"{row.direction}: {row.status.value}: {row.detail}"
                times[config] = None
                continue
            times[config] = (times[config] or 0.0) + row.time.median
            self.directions.setdefault(config, {})[row.direction] = row.time.median
        return times


def tune_case(
    op: Op,
    case: Case,
    backend: Backend,
    config: ProjectConfig,
    clock: Clock,
    *,
    strategy: str = "auto",
    budget: int = 32,
    reps: int = 30,
    warmup: int = 3,
    advance: Callable[[str], None] | None = None,
) -> CaseTuning:
    declared = dict(op.definition.knobs)
    bench = Bench(clock, reps=reps, warmup=warmup, advance=advance)
    evaluate = CaseEvaluator(op, case, backend, config, bench)
    trials = search(declared, evaluate, strategy, budget)
    return CaseTuning(
        case.name,
        tuple(evaluate.buckets),
        trials,
        defaults(declared),
        evaluate.failures,
        evaluate.directions,
    )


def try_case(
    op: Op,
    case: Case,
    backend: Backend,
    config: ProjectConfig,
    clock: Clock,
    current: Config,
    tries: Sequence[Config],
    *,
    reps: int = 30,
    warmup: int = 3,
    advance: Callable[[str], None] | None = None,
) -> CaseTuning:
    """``current`` and each of ``tries`` timed in one batch at one case (no search): the
    tuning's ``default`` is ``current``, what the others are measured against."""
    bench = Bench(clock, reps=reps, warmup=warmup, advance=advance)
    evaluate = CaseEvaluator(op, case, backend, config, bench)
    batch = list(dict.fromkeys([current, *tries]))
    trials = Trials(dict(evaluate(batch)))
    return CaseTuning(
        case.name, tuple(evaluate.buckets), trials, current, evaluate.failures, evaluate.directions
    )


def tune_op(
    op: Op,
    cases: Sequence[Case],
    backend: Backend,
    config: ProjectConfig,
    clock: Clock,
    *,
    deadline: float | None = None,
    tuned: Callable[[CaseTuning], None] | None = None,
    **options: Any,
) -> list[CaseTuning]:
    """The cases in order, each handed to ``tuned`` as soon as it is done (the CLI writes
    it to the table then, so a run that is stopped keeps what it finished). No case starts
    once ``time.monotonic()`` has reached ``deadline``: the tunings returned are then the
    first cases only."""
    tunings: list[CaseTuning] = []
    for case in cases:
        if deadline is not None and time.monotonic() >= deadline:
            break
        tunings.append(tune_case(op, case, backend, config, clock, **options))
        if tuned is not None:
            tuned(tunings[-1])
    return tunings


def table_results(tunings: Sequence[CaseTuning]) -> dict[str, dict[str, Any]]:
    """bucket -> table entry, for the cases that found a correct configuration."""
    results: dict[str, dict[str, Any]] = {}
    for tuning in tunings:
        entry = tuning.entry()
        if entry is not None:
            for bucket in tuning.buckets:
                results[bucket] = entry
    return results
