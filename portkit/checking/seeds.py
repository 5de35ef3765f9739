"""Seeds as a dimension: every case with N seeds, and the worst margin per check.

A case's inputs come from its seed (drawn on the CPU, then moved to the device:
project/cases.py), so one seed is one set of inputs on every machine. A verdict from one
seed says nothing about how close the next comes to its bound; running the case with
seeds ``s, s+1, ..., s+N-1`` (``s`` the case's own) and keeping, per check, the largest
margin (an error over its bound; 1 is the bound) shows a near-miss before a GPU runner
draws the seed that fails. ``--first-seed K`` starts at ``s+K``: one failing seed
re-run alone (its reproduce line says so), or a long run split between machines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from portkit.results import CheckResult

if TYPE_CHECKING:
    from portkit.backends import Backend
    from portkit.checking.case_runner import CheckSettings
    from portkit.checking.harness import Reuse
    from portkit.project.cases import Case
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op


def seeds_label(seeds: int, first: int = 0) -> str:
    """What a run's seeds are, for the worst-margin heading."""
    if not first:
        return f"{seeds} seeds"
    return f"seed {first}" if seeds == 1 else f"seeds {first} to {first + seeds - 1}"


def seeded(case: Case, round_: int) -> Case:
    """``case`` with the ``round_``-th of its seeds (0: its own)."""
    return case if round_ == 0 else replace(case, seed=case.seed + round_, seed_round=round_)


@dataclass(frozen=True)
class WorstMargin:
    op: str
    backend: str
    check: str
    margin: float
    case: str
    seed: int

    def line(self) -> str:
        margin = "inf" if self.margin == float("inf") else f"{self.margin:.3g}"
        return (
            f"{self.op} {self.backend} {self.check}: worst margin {margin} "
            f"(case {self.case}, seed {self.seed})"
        )


def worst_margins(tagged: Sequence[tuple[CheckResult, int]]) -> list[WorstMargin]:
    """Per (op, backend, check), the result with the largest margin and its seed."""
    worst: dict[tuple[str, str, str], WorstMargin] = {}
    for result, seed in tagged:
        if result.margin is None:
            continue
        key = (result.op, result.backend, result.check)
        found = worst.get(key)
        if found is None or result.margin > found.margin:
            worst[key] = WorstMargin(*key, result.margin, result.case, seed)
    return sorted(worst.values(), key=lambda w: -w.margin)


def run_seeds(
    plan: Sequence[tuple[Op, Case]],
    backends: Sequence[Backend],
    config: ProjectConfig,
    seeds: int,
    *,
    first: int = 0,
    compile_first: bool = True,
    advance: Callable[[str], None] = lambda label: None,
    settings: CheckSettings | None = None,
    reuse: Reuse | None = None,
    op_notes: bool = True,
) -> tuple[list[CheckResult], list[WorstMargin]]:
    """``run_suite`` once per seed, rounds ``first`` to ``first + seeds - 1`` (the compile
    checks and op-wide rows once), and the worst margin per check over all cases and
    seeds; with only the cases' own seeds, ``run_suite``'s rows and no margins
    (`portkit check` lists them only under ``--seeds N`` or ``--first-seed K``)."""
    from portkit.checking.harness import run_suite

    if seeds == 1 and first == 0:
        suite = run_suite(
            plan,
            backends,
            config,
            compile_first=compile_first,
            advance=advance,
            settings=settings,
            reuse=reuse,
            op_notes=op_notes,
        )
        return suite, []
    results: list[CheckResult] = []
    tagged: list[tuple[CheckResult, int]] = []
    for round_ in range(first, first + seeds):
        round_plan = [(op, seeded(case, round_)) for op, case in plan]
        found = run_suite(
            round_plan,
            backends,
            config,
            compile_first=compile_first and round_ == first,
            advance=advance,
            settings=settings,
            reuse=reuse,
            op_notes=op_notes,
        )
        seed_of = {(op.name, case.name): case.seed for op, case in round_plan}
        for result in found:
            if round_ != first and result.case == "all":
                continue  # the op-wide rows (gradcheck notes) once, not per seed
            results.append(result)
            tagged.append((result, seed_of.get((result.op, result.case), -1)))
    return results, worst_margins(tagged)
