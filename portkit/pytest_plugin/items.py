"""The generated tests: one collector per prototype file (``OpFile``) and its items
(compile, lint, bench, and one per case and implementation or pair), each running the
harness and failing with the harness's own report."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from portkit.results import comparison_check

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr, TracebackStyle

    from portkit.backends import Backend
    from portkit.project.cases import Case
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op
    from portkit.project.environment import Settings
    from portkit.project.session import Session

BASELINE_OPTION = "--portkit-bench-baseline"
_PROJECT_KEY = pytest.StashKey[Any]()
_SETTINGS_KEY = pytest.StashKey[Any]()


class CheckFailed(Exception):
    """Raised by generated tests; its message is the harness's report."""


def project_session(config: pytest.Config) -> Session:
    """The project's ``Session`` (configuration, settings, op catalog), built once per
    test session with the settings ``pytest_configure`` read."""
    if _PROJECT_KEY not in config.stash:
        from portkit.project.session import Session

        config.stash[_PROJECT_KEY] = Session.from_environment(
            config.rootpath,
            settings=environment_settings(config),
            require=False,
            strict=bool(config.getoption("portkit_strict", False)),
        )
    return config.stash[_PROJECT_KEY]


def project_config(config: pytest.Config) -> ProjectConfig:
    """The project's configuration (with the session's settings)."""
    return project_session(config).config


def environment_settings(config: pytest.Config) -> Settings:
    """portkit's settings from the environment, read once per test session."""
    if _SETTINGS_KEY not in config.stash:
        from portkit.project.environment import Settings

        config.stash[_SETTINGS_KEY] = Settings.from_environment()
    return config.stash[_SETTINGS_KEY]


def _marker(backend: Backend) -> str:
    if backend.role == "reference":
        return "reference"
    if backend.device == "cuda":
        return "gpu"
    return "twin_cpu" if backend.role == "twin" else "sim"


def _phase(backend: Backend) -> str:
    """The phase marker: ``cpu`` (no GPU needed) or ``gpu`` (already the tier marker)."""
    return "gpu" if backend.device == "cuda" else "cpu"


class OpFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        from portkit.backends import create_all, twin_pairs
        from portkit.checking.harness import skip_reason

        session = project_session(self.config)
        project, catalog = session.config, session.catalog
        name = self.path.stem
        if name in catalog.broken:
            yield BrokenOpItem.from_parent(self, name="load", message=catalog.broken[name])
            return
        op = catalog.ops[name]
        yield CompileItem.from_parent(self, name="compile[numba]", op=op, side="numba")
        if op.has_twin:
            yield CompileItem.from_parent(self, name="compile[twin]", op=op, side="twin")
        yield LintItem.from_parent(self, name="lint", op=op)
        yield BenchItem.from_parent(self, name="bench", op=op)
        backends = {b.name: b for b in create_all(project)}
        for case in op.definition.cases:
            for backend in backends.values():
                if backend.role == "reference" and not (
                    case.gradcheck and op.definition.has_backward
                ):
                    continue  # the reference is only checked by gradcheck
                item = CaseItem.from_parent(
                    self,
                    name=f"{backend.name}[{case.name}]",
                    op=op,
                    case=case,
                    backends=[backend],
                    only_check=None,
                )
                item.add_marker(_marker(backend))
                item.add_marker(_phase(backend))
                reason = skip_reason(op, case, backend, backends.values())
                if reason:
                    item.add_marker(pytest.mark.skip(reason=reason))
                yield item
            for pair in twin_pairs(backends.values()):
                prototype, twin = pair
                item = CaseItem.from_parent(
                    self,
                    name=f"{prototype.name}~{twin.name}[{case.name}]",
                    op=op,
                    case=case,
                    backends=list(pair),
                    only_check=comparison_check(twin.name),
                )
                item.add_marker(_marker(twin))
                item.add_marker(_phase(twin))
                reasons = [skip_reason(op, case, b, backends.values()) for b in pair]
                if any(reasons):
                    item.add_marker(pytest.mark.skip(reason=next(r for r in reasons if r)))
                yield item


class PortkitItem(pytest.Item):
    """Reports a harness failure as the harness's own text, not a Python traceback."""

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, CheckFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.path.stem}::{self.name}"


class CaseItem(PortkitItem):
    def __init__(
        self,
        *,
        op: Op,
        case: Case,
        backends: Sequence[Backend],
        only_check: str | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.op, self.case, self.backends, self.only_check = op, case, backends, only_check
        if case.large:
            self.add_marker("large")

    def runtest(self) -> None:
        from portkit.checking.harness import run_case
        from portkit.checking.seeds import seeded
        from portkit.results import Outcome

        settings = None
        tool = self.config.getoption("portkit_under_sanitizer", None)
        if tool:  # the child of --portkit-sanitize: set up as `portkit check --sanitize`'s
            from portkit.sanitize.tools import prepare_checks

            settings = prepare_checks(tool, self.backends)
        from portkit.pytest_plugin import verdicts as stored

        # None with --portkit-no-cache, under a sanitizer, with --portkit-seeds N
        known = stored.session_verdicts(self.config, project_config(self.config))
        units = stored.case_units(known, self.op, self.case, self.backends)
        own = f"{self.backends[0].name} {self.only_check}" if self.only_check else None
        unit = units[own or self.backends[0].name][0] if units else None
        results = stored.served(self, known, unit) or []
        seeds = max(1, self.config.getoption("--portkit-seeds", default=1) or 1)
        for round_ in range(0 if results else seeds):  # --portkit-seeds N: one run per seed
            results += run_case(self.op, seeded(self.case, round_), self.backends, settings)
        if units and not any(r.cached for r in results):
            stored.record(known, units, self.op, self.case.name, results)
        margins = [r.margin for r in results if r.margin is not None]
        if seeds > 1 and margins:
            self.user_properties.append(("portkit_worst_margin", max(margins)))
        if self.only_check:
            twin = self.backends[-1].name  # a pair item's: [prototype, twin]
            wanted = [r for r in results if r.compared_with == twin]
            if not wanted:
                # The cross-comparison needs both sides to produce outputs.
                problems = [f"{r.backend} {r.check}: {r.detail}" for r in results if r.failed]
                raise CheckFailed("no comparison was possible:\n" + "\n".join(problems))
            results = wanted
        from portkit.simt.warning_log import SimulatorWarning

        for result in results:  # shown in pytest's warnings summary, never a failure
            for w in result.warnings:
                where = f" at block {w['block']} thread {w['thread']} {w['file']}:{w['line']}"
                warnings.warn(
                    SimulatorWarning(
                        f"[{w['kind']}] kernel {w['kernel']}: {w['detail']}{where} "
                        f"(rule: {w['rule']}; --portkit-strict makes it an error)"
                    ),
                    stacklevel=1,
                )
        failures = [r for r in results if r.status == Outcome.FAIL]
        if failures:
            raise CheckFailed("\n".join(f"{r.backend} {r.check}: {r.detail}" for r in failures))
        if not any(r.status == Outcome.PASS for r in results):
            ran = [(r.check, str(r.status), r.detail) for r in results]
            raise CheckFailed(f"no check ran: {ran}")


class CompileItem(PortkitItem):
    def __init__(self, *, op: Op, side: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.op, self.side = op, side
        self.add_marker("compile")
        self.add_marker("cpu")

    def runtest(self) -> None:
        from portkit.build.compile_checks import check_prototype, check_twin
        from portkit.pytest_plugin import verdicts as stored

        known = stored.session_verdicts(self.config, project_config(self.config))
        unit = stored.op_unit(known, self.op, self.name)
        if stored.served(self, known, unit) is not None:
            return
        check = check_prototype if self.side == "numba" else check_twin
        result = check(self.op, project_config(self.config))  # the PTX cache is in its cache dir
        if result is None or result.failed:
            raise CheckFailed(result.detail if result else "no twin to compile")
        if unit is not None:
            stored.record(known, {self.name: (unit, stored.every_row)}, self.op, "all", [result])


class LintItem(PortkitItem):
    """The ``lint`` row of ``portkit check``: fails on an error finding, and on a
    warning where the project sets ``lint-warnings = "error"``. A deliberate finding is
    silenced on its line with `# portkit: allow-<kind>`."""

    def __init__(self, *, op: Op, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.op = op
        self.add_marker("compile")
        self.add_marker("cpu")

    def runtest(self) -> None:
        from portkit.checking.harness import lint_result
        from portkit.pytest_plugin import verdicts as stored

        known = stored.session_verdicts(self.config, project_config(self.config))
        unit = stored.op_unit(known, self.op, "lint")
        if stored.served(self, known, unit) is not None:
            return
        result = lint_result(self.op, project_config(self.config))
        if result.failed:
            raise CheckFailed(result.detail)
        if unit is not None:
            stored.record(known, {"lint": (unit, stored.every_row)}, self.op, "all", [result])


class BrokenOpItem(PortkitItem):
    def __init__(self, *, message: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.message = message
        self.add_marker("cpu")  # the CPU phase fails on it (the GPU phase has no items of it)

    def runtest(self) -> None:
        raise CheckFailed(self.message)


class BenchItem(PortkitItem):
    """``portkit bench OP --compare BASELINE`` as a test, for a GPU CI job; skipped unless
    ``--portkit-bench-baseline`` names the baseline."""

    def __init__(self, *, op: Op, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.op = op
        self.add_marker("bench")
        if not self.config.getoption(BASELINE_OPTION):
            self.add_marker(
                pytest.mark.skip(reason=f"timing runs only with {BASELINE_OPTION} FILE")
            )

    def runtest(self) -> None:
        from portkit.backends.base import cuda_unavailable_reason
        from portkit.bench.cases import bench_cases
        from portkit.bench.model import Report
        from portkit.bench.regression import compare_reports
        from portkit.bench.runner import DIRECTIONS
        from portkit.bench.session import IMPLEMENTATIONS, implementations, run_bench

        reason = cuda_unavailable_reason()
        if reason:
            pytest.skip(f"portkit bench needs an NVIDIA GPU: {reason}")
        baseline = Report.load(self.config.getoption(BASELINE_OPTION))
        ours = tuple(m for m in baseline.measurements if m.op == self.op.name)
        baseline = Report(baseline.machine, baseline.copy, baseline.reps, baseline.warmup, ours)
        project = project_config(self.config)
        backends = implementations(IMPLEMENTATIONS, project)
        report = run_bench([(self.op, bench_cases(self.op))], backends, DIRECTIONS, 30, 3)
        threshold = self.config.getoption("--portkit-bench-threshold")
        problems = [
            f"{m.implementation} {m.direction} {m.case}: {m.status.value}: {m.detail}"
            for m in report.failures
        ]
        problems += [
            f"{' '.join(v.key[1:])}: {v.status} ({v.detail})"
            for v in compare_reports(baseline, report, threshold)
            if v.failed
        ]
        if problems:
            raise CheckFailed("\n".join(problems))
