"""Run an op's cases against each mutant, in a temporary copy of the op's files.

The user's files are never written: each mutant gets its own folder with the op's
prototype and twin (one of them mutated), a configuration that points there, and a
fresh catalog, so the prototype is imported anew and the twin is compiled by content.
The cases are the harness's own (``run_case``, what ``portkit check`` runs), on the
backends of the mutated side that this machine has: a prototype mutant on the
prototype backends (the simulator; numba on a GPU), a twin mutant on the twin backends
(the CPU twin; the GPU twin on a GPU). The first failing check kills the mutant and the
remaining cases are not run.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from portkit.checking.harness import plan_suite, run_case
from portkit.errors import OpDefinitionError, PortkitError
from portkit.mutate.c_operators import twin_mutants
from portkit.mutate.model import HINTS, KILLED, STILLBORN, SURVIVED, Mutant, MutantResult
from portkit.mutate.py_operators import prototype_mutants
from portkit.project.discovery import MODULE_PREFIX, discover
from portkit.results import CheckResult, Outcome, Stage

if TYPE_CHECKING:
    from portkit.backends import Backend
    from portkit.project.cases import Case
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op

DETAIL_CHARS = 200  # of a killing check's or compiler's first line


def mutants_of(op: Op, config: ProjectConfig, kinds: set[str] | None = None) -> list[Mutant]:
    """Every mutant of ``op``'s twin, then of its prototype's kernels."""
    found: list[Mutant] = []
    if op.twin_path is not None:
        name = _shown(op.twin_path, config)
        found += twin_mutants(op.twin_path.read_text(), name, kinds)
    name = _shown(op.prototype_path, config)
    found += prototype_mutants(op.prototype_path.read_text(), name, kinds)
    return found


def _shown(path: Path, config: ProjectConfig) -> str:
    try:
        return str(path.resolve().relative_to(config.root.resolve()))
    except ValueError:
        return str(path)


def select(mutants: Sequence[Mutant], limit: int | None) -> list[Mutant]:
    """At most ``limit`` mutants, taken in turn from each (side, kind), so a limit keeps
    every kind present; the selection keeps the original order."""
    if limit is None or limit >= len(mutants):
        return list(mutants)
    groups: dict[tuple[str, str], list[int]] = {}
    for i, m in enumerate(mutants):
        groups.setdefault((m.side, m.kind), []).append(i)
    chosen: list[int] = []
    queues = [list(reversed(g)) for g in groups.values()]
    while len(chosen) < limit and any(queues):
        for queue in queues:
            if queue and len(chosen) < limit:
                chosen.append(queue.pop())
    return [mutants[i] for i in sorted(chosen)]


def side_backends(backends: Sequence[Backend], op: Op) -> dict[str, list[Backend]]:
    """side -> the backends that run its mutants on this machine (none: not mutated)."""
    usable = [b for b in backends if not (b.unavailable_reason or b.unsupported_reason(op))]
    return {
        "prototype": [b for b in usable if b.role == "prototype" and b.default],
        "twin": [b for b in usable if b.role == "twin" and b.default],
    }


@dataclass
class MutationRun:
    """One op's mutants against its cases on ``backends`` (every backend created for
    this machine; each side picks its own)."""

    op: Op
    config: ProjectConfig
    backends: Sequence[Backend]
    quick: bool = False
    case_names: frozenset[str] = frozenset()  # only these cases (`--case`); none: all

    def __post_init__(self) -> None:
        plan = plan_suite([self.op], set(self.case_names), self.quick)
        self.cases: list[Case] = [case for _, case in plan]
        self.sides = side_backends(self.backends, self.op)

    def baseline(self) -> CheckResult | None:
        """The first failing check of the unmutated op on every side's backends, or None:
        a mutant can only be judged against cases the op itself passes."""
        chosen = [b for side in self.sides.values() for b in side]
        for case in self.cases:
            for result in run_case(self.op, case, chosen, unbuilt={}):
                if result.status is Outcome.FAIL:
                    return result
        return None

    def run(self, mutant: Mutant, scratch: Path) -> MutantResult:
        """Run ``mutant`` in its own folder under ``scratch``; the folder is removed."""
        t0 = time.perf_counter()
        folder = Path(tempfile.mkdtemp(prefix=f"{mutant.kind}-", dir=scratch))
        try:
            result = self._judge(mutant, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        result.seconds = time.perf_counter() - t0
        return result

    def _judge(self, mutant: Mutant, folder: Path) -> MutantResult:
        backends = self.sides.get(mutant.side, [])
        try:
            with _mutated_op(self.op, self.config, mutant, folder) as op:
                unbuilt: dict[str, str] = {}
                for case in self.cases:
                    for result in run_case(op, case, backends, unbuilt=unbuilt):
                        if result.status is Outcome.FAIL:
                            return _verdict(mutant, result)
        except OpDefinitionError as exc:
            return MutantResult(mutant, STILLBORN, "import", _first_line(str(exc)))
        return MutantResult(mutant, SURVIVED, "", HINTS[mutant.kind])


def _verdict(mutant: Mutant, result: CheckResult) -> MutantResult:
    detail = _first_line(result.detail)
    if result.stage is Stage.COMPILE:
        return MutantResult(mutant, STILLBORN, f"{result.backend} compile", detail)
    by = f"{result.backend} {result.check} {result.case}"
    return MutantResult(mutant, KILLED, by, detail)


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    line = lines[0].strip() if lines else ""
    return line if len(line) <= DETAIL_CHARS else line[: DETAIL_CHARS - 3] + "..."


@contextmanager
def _mutated_op(op: Op, config: ProjectConfig, mutant: Mutant, folder: Path) -> Iterator[Op]:
    """``op`` loaded from a copy of its files in ``folder``, ``mutant`` applied to one."""
    prototypes, cuda_src = folder / "prototypes", folder / "cuda_src"
    prototypes.mkdir()
    cuda_src.mkdir()
    prototype = prototypes / op.prototype_path.name
    prototype.write_text(
        mutant.source if mutant.side == "prototype" else op.prototype_path.read_text()
    )
    if op.twin_path is not None:
        twin = cuda_src / op.twin_path.name
        twin.write_text(mutant.source if mutant.side == "twin" else op.twin_path.read_text())
    copy = replace(config, root=folder, prototypes_dir=prototypes, cuda_src_dir=cuda_src)
    module = f"{MODULE_PREFIX}.{op.name}"
    before = sys.modules.get(module)
    try:
        yield discover(copy).get(op.name)
    finally:  # the user's op stays what `sys.modules` knows it by
        if before is not None:
            sys.modules[module] = before
        else:
            sys.modules.pop(module, None)


def run_mutants(
    run: MutationRun,
    mutants: Sequence[Mutant],
    advance: Callable[[str], None] = lambda label: None,
) -> list[MutantResult]:
    """Every mutant of ``run``'s op whose side has a backend here, in order."""
    results: list[MutantResult] = []
    scratch = Path(tempfile.mkdtemp(prefix="portkit-mutate-"))
    try:
        for mutant in mutants:
            advance(f"{run.op.name} {mutant.where} {mutant.kind}")
            if not run.sides.get(mutant.side):
                continue
            results.append(run.run(mutant, scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return results


@contextmanager
def private_cache(config: ProjectConfig) -> Iterator[ProjectConfig]:
    """``config`` with a cache folder of its own, removed afterwards: every twin mutant is
    a build of its own, and hundreds of them would fill the user's twin cache."""
    folder = Path(tempfile.mkdtemp(prefix="portkit-mutate-cache-"))
    try:
        yield replace(config, cache_dir=folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def check_kinds(kinds: set[str]) -> None:
    from portkit.mutate.model import KINDS

    unknown = sorted(kinds - set(KINDS))
    if unknown:
        raise PortkitError(
            f"unknown mutation kind(s) {', '.join(unknown)}; kinds: {', '.join(KINDS)}"
        )
