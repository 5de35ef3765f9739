"""What a re-run does with one op, case by case, in each mode:

- ``sim``: the case ``portkit sim`` would pick (or each ``--case``) in portkit's
  simulator against the reference: forward, backward, gradcheck rows;
- ``check``: ``portkit check --quick --no-compile`` for the op (every case but the
  GPU-sized ones, on every backend this machine has; the compile and lint rows are
  ``portkit compile`` and ``portkit lint``'s);
- ``diff``: ``portkit diff`` for the op (prototype against twin, down to the thread).

Backends are created once per mode and kept, so a resident process keeps the CPU twin's
check worker, the simulator's math library and the CUDA context between runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from portkit.errors import PortkitError

if TYPE_CHECKING:
    from portkit.diffing.model import CaseDiff, Plan
    from portkit.project.cases import Case
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op
    from portkit.results import CheckResult

MODES = ("sim", "check", "diff")


class Mode:
    name = ""

    def __init__(self, config: ProjectConfig, cases: Sequence[str], quick: bool) -> None:
        self.config, self.case_names, self.quick = config, list(cases), quick

    def begin(self, op: Op) -> None:
        """Before the op's cases run in a re-run: forget what a previous run learnt."""

    def cases(self, op: Op) -> list[Case]:
        """The op's cases to run: those named, else all but the GPU-sized ones (with
        ``quick``), and none of those a simulated run skips anyway."""
        if self.case_names:
            return [c for c in op.definition.cases if c.name in self.case_names]
        return [c for c in op.definition.cases if not (self.quick and c.large)]

    def run(self, op: Op, case: Case) -> tuple[list[CheckResult], list[CaseDiff]]:
        raise NotImplementedError

    def closing_rows(self, op: Op) -> list[CheckResult]:
        """Rows about the op as a whole, after its cases (gradcheck's note)."""
        return []

    def not_run(self) -> list[str]:
        """What was asked for and cannot run on this machine (exit 3, not a pass)."""
        return []


class SimMode(Mode):
    name = "sim"

    def __init__(self, config: ProjectConfig, cases: Sequence[str], quick: bool) -> None:
        from portkit.backends import create

        super().__init__(config, cases, quick)
        self.backend = create("sim", config)
        if self.backend.unavailable_reason:
            raise PortkitError(f"the simulator cannot run here: {self.backend.unavailable_reason}")

    def cases(self, op: Op) -> list[Case]:
        from portkit.project.case_choice import choose_case

        if self.case_names:
            return [op.case(name) for name in self.case_names if op.has_any_case([name])]
        return [choose_case(op, None, None, None, None)]

    def run(self, op: Op, case: Case) -> tuple[list[CheckResult], list[CaseDiff]]:
        from portkit.checking.case_runner import CaseRunner
        from portkit.checking.show_case import sim_command

        runner = CaseRunner(op, case, rerun=sim_command(op, case))
        reason = self.backend.unsupported_reason(op)
        if reason:
            raise PortkitError(f"sim cannot run {op.name}: {reason}")
        runner.run_implementation(self.backend)
        return runner.results, []


class CheckMode(Mode):
    name = "check"

    def __init__(
        self,
        config: ProjectConfig,
        cases: Sequence[str],
        quick: bool,
        backends: Sequence[str] = (),
    ) -> None:
        from portkit.backends import create_all

        super().__init__(config, cases, quick)
        self.backends = create_all(config, list(backends) or None)
        self._unbuilt: dict[str, str] = {}
        self.requested = bool(backends)

    def not_run(self) -> list[str]:
        """Backends named with --backend that cannot run here, with why: not a pass."""
        if not self.requested:
            return []
        return [f"{b.name} ({b.unavailable_reason})" for b in self.backends if b.unavailable_reason]

    def begin(self, op: Op) -> None:
        self._unbuilt = {}  # a twin that did not build last run may build now

    def run(self, op: Op, case: Case) -> tuple[list[CheckResult], list[CaseDiff]]:
        from portkit.checking.harness import run_case

        return run_case(op, case, self.backends, None, self._unbuilt), []

    def closing_rows(self, op: Op) -> list[CheckResult]:
        from portkit.checking.harness import gradcheck_note

        note = gradcheck_note(op)
        return [note] if note is not None else []


class DiffMode(Mode):
    name = "diff"

    def __init__(self, config: ProjectConfig, cases: Sequence[str], quick: bool) -> None:
        super().__init__(config, cases, quick)
        self._plans: dict[tuple[str, bool], Plan] = {}  # (op, has a twin) -> its plan

    def plan(self, op: Op) -> Plan:
        from portkit.diffing.case_diff import plan_diff

        key = (op.name, op.has_twin)
        if key not in self._plans:
            self._plans[key] = plan_diff(op, self.config)
        return self._plans[key]

    def begin(self, op: Op) -> None:
        self.plan(op).unbuilt.clear()  # a twin that did not build last run may build now

    def cases(self, op: Op) -> list[Case]:
        simulated = self.plan(op).prototype.simulated
        return [c for c in super().cases(op) if not ((c.gpu_only or c.large) and simulated)]

    def run(self, op: Op, case: Case) -> tuple[list[CheckResult], list[CaseDiff]]:
        from portkit.diffing.case_diff import diff_case

        return [], [diff_case(op, case, self.plan(op), 3)]


def make_mode(
    name: str,
    config: ProjectConfig,
    cases: Sequence[str] = (),
    quick: bool = True,
    backends: Sequence[str] = (),
) -> Mode:
    if name not in MODES:
        raise PortkitError(f"unknown mode {name!r}; modes: {', '.join(MODES)}")
    if backends and name != "check":
        raise PortkitError(f"backends are chosen in check mode only, not in {name}")
    if name == "check":
        return CheckMode(config, cases, quick, backends)
    return (SimMode if name == "sim" else DiffMode)(config, cases, quick)
