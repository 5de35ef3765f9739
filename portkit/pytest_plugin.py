"""pytest plugin (entry point ``pytest11``): the harness as generated tests.

Point pytest at the prototypes folder (``pytest prototypes``, or list it in
``testpaths``) and every ``prototypes/<op>.py`` becomes a collector of tests:

    prototypes/sigmoid.py::compile[numba]          prototype compiles for sm_90   (compile)
    prototypes/sigmoid.py::compile[twin]           twin compiles for sm_90        (compile)
    prototypes/sigmoid.py::lint                    portkit lint finds nothing     (compile)
    prototypes/sigmoid.py::sim[float32-n129]       prototype in the simulator     (sim)
    prototypes/sigmoid.py::twin[float32-n129]      twin on the GPU                (gpu)
    prototypes/sigmoid.py::numba~twin[float32-n129] prototype against twin         (gpu)
    prototypes/sigmoid.py::sim~twin-cpu[float32-n129] and twin-cpu[...]: the CPU twin (twin_cpu)

Select tiers with markers (``-m sim``, ``-m "not gpu"``). GPU tests skip with the
reason the backend gives when the machine has no GPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

MARKERS = {
    "sim": "runs an op's prototype in the CUDA simulator on the CPU",
    "gpu": "needs an NVIDIA GPU (prototype compiled by numba, or the C CUDA twin)",
    "compile": "compiles prototypes and twins for sm_90; needs no GPU",
    "reference": "gradchecks an op's PyTorch reference",
    "twin_cpu": "runs an op's C CUDA twin compiled for the CPU (needs a C++ compiler, no GPU)",
}

_PROJECT_KEY = pytest.StashKey[Any]()


class CheckFailed(Exception):
    """Raised by generated tests; its message is the harness's report."""


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


def _project(config: pytest.Config):
    if _PROJECT_KEY not in config.stash:
        from portkit.project.config import load_config

        config.stash[_PROJECT_KEY] = load_config(config.rootpath)
    return config.stash[_PROJECT_KEY]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix != ".py" or file_path.name.startswith("_"):
        return None
    project = _project(parent.config)
    if file_path.parent.resolve() != project.prototypes_dir.resolve():
        return None
    return OpFile.from_parent(parent, path=file_path)


def _marker(backend) -> str:
    if backend.role == "reference":
        return "reference"
    if backend.device == "cuda":
        return "gpu"
    return "twin_cpu" if backend.role == "twin" else "sim"


class OpFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        from portkit.backends import create_all, twin_pairs
        from portkit.check.harness import skip_reason
        from portkit.project.discovery import discover

        project = _project(self.config)
        catalog = discover(project)
        name = self.path.stem
        if name in catalog.broken:
            yield BrokenOpItem.from_parent(self, name="load", message=catalog.broken[name])
            return
        op = catalog.ops[name]
        yield CompileItem.from_parent(self, name="compile[numba]", op=op, side="numba")
        if op.has_twin:
            yield CompileItem.from_parent(self, name="compile[twin]", op=op, side="twin")
        yield LintItem.from_parent(self, name="lint", op=op)
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
                reason = skip_reason(op, case, backend)
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
                    only_check=f"vs {twin.name}",
                )
                item.add_marker(_marker(twin))
                reasons = [skip_reason(op, case, b) for b in pair]
                if any(reasons):
                    item.add_marker(pytest.mark.skip(reason=next(r for r in reasons if r)))
                yield item


class PortkitItem(pytest.Item):
    """Reports a harness failure as the harness's own text, not a Python traceback."""

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> str:
        if isinstance(excinfo.value, CheckFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, f"{self.path.stem}::{self.name}"


class CaseItem(PortkitItem):
    def __init__(self, *, op, case, backends, only_check: str | None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.op, self.case, self.backends, self.only_check = op, case, backends, only_check

    def runtest(self) -> None:
        from portkit.check.harness import run_case
        from portkit.results import FAIL, PASS

        results = run_case(self.op, self.case, self.backends)
        if self.only_check:
            wanted = [r for r in results if r.check == self.only_check]
            if not wanted:
                # The cross-comparison needs both sides to produce outputs.
                problems = [f"{r.backend} {r.check}: {r.detail}" for r in results if r.failed]
                raise CheckFailed("no comparison was possible:\n" + "\n".join(problems))
            results = wanted
        failures = [r for r in results if r.status == FAIL]
        if failures:
            raise CheckFailed("\n".join(f"{r.backend} {r.check}: {r.detail}" for r in failures))
        if not any(r.status == PASS for r in results):
            raise CheckFailed(f"no check ran: {[(r.check, r.status, r.detail) for r in results]}")


class CompileItem(PortkitItem):
    def __init__(self, *, op, side: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.op, self.side = op, side
        self.add_marker("compile")

    def runtest(self) -> None:
        from portkit.lint.compile import check_prototype, check_twin

        result = (
            check_prototype(self.op)
            if self.side == "numba"
            else check_twin(self.op, _project(self.config))
        )
        if result is None or result.failed:
            raise CheckFailed(result.detail if result else "no twin to compile")


class LintItem(PortkitItem):
    """`portkit lint --strict` without the resource table: any finding fails. A
    deliberate one is silenced on its line with `# portkit: allow-<kind>`."""

    def __init__(self, *, op, **kwargs) -> None:
        super().__init__(**kwargs)
        self.op = op
        self.add_marker("compile")

    def runtest(self) -> None:
        from portkit.lint.findings import code_findings

        findings = code_findings(self.op)
        if findings:
            raise CheckFailed(
                "\n".join(
                    f"{f.kind} {f.kernel} {f.where}: {f.message} (fix: {f.fix})" for f in findings
                )
            )


class BrokenOpItem(PortkitItem):
    def __init__(self, *, message: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.message = message

    def runtest(self) -> None:
        raise CheckFailed(self.message)
