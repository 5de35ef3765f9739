"""pytest plugin (entry point ``pytest11``): the harness as generated tests.

Point pytest at the prototypes folder (``pytest prototypes``, or list it in
``testpaths``) and every ``prototypes/<op>.py`` becomes a collector of tests:

    prototypes/sigmoid.py::compile[numba]          prototype compiles for sm_90   (compile)
    prototypes/sigmoid.py::compile[twin]           twin compiles for sm_90        (compile)
    prototypes/sigmoid.py::lint                    portkit lint finds nothing     (compile)
    prototypes/sigmoid.py::sim[float32-n129]       prototype in the simulator     (sim)
    prototypes/sigmoid.py::twin[float32-n129]      twin on the GPU                (gpu)
    prototypes/sigmoid.py::numba~twin[float32-n129] prototype against twin         (gpu)
    prototypes/sigmoid.py::bench                   timed against a saved baseline (bench)
    prototypes/sigmoid.py::sim~twin-cpu[float32-n129] and twin-cpu[...]: the CPU twin (twin_cpu)

Select tiers with markers (``-m sim``, ``-m "not gpu"``). GPU tests skip with the
reason the backend gives when the machine has no GPU.

``--portkit-sanitize=TOOL`` (memcheck, racecheck, initcheck, synccheck) reruns the
session's ``gpu`` items in a child pytest under ``compute-sanitizer --tool TOOL`` with
the settings of ``portkit check --sanitize`` (docs/sanitizer.md), prints the findings in
the project's kernels and fails the session if there are any.

``bench`` items time the op (``portkit bench``) and compare with a saved report; they
skip unless a GPU CI job passes ``--portkit-bench-baseline FILE``, so the normal suite
never asserts a time.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

MARKERS = {
    "sim": "runs an op's prototype in the CUDA simulator on the CPU",
    "gpu": "needs an NVIDIA GPU (prototype compiled by numba, or the C CUDA twin)",
    "compile": "compiles prototypes and twins for sm_90; needs no GPU",
    "reference": "gradchecks an op's PyTorch reference",
    "bench": "times an op against a saved `portkit bench` report (--portkit-bench-baseline)",
    "twin_cpu": "runs an op's C CUDA twin compiled for the CPU (needs a C++ compiler, no GPU)",
    "large": "a GPU-sized case; on a CPU only the simulator runs it (-m 'not large' skips)",
}
BASELINE_OPTION = "--portkit-bench-baseline"

_PROJECT_KEY = pytest.StashKey[Any]()
SANITIZE_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")


class CheckFailed(Exception):
    """Raised by generated tests; its message is the harness's report."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("portkit")
    group.addoption(
        BASELINE_OPTION,
        metavar="FILE",
        default=None,
        help="run the `bench` items: time each op and fail on a regression against FILE "
        "(saved with `portkit bench --all --save FILE` on the same GPU)",
    )
    group.addoption(
        "--portkit-bench-threshold",
        type=float,
        default=0.10,
        metavar="FRACTION",
        help="slowdown that counts as a regression when outside the spread (default 0.10)",
    )
    group.addoption(
        "--portkit-sanitize",
        choices=SANITIZE_TOOLS,
        default=None,
        help="rerun the gpu items under compute-sanitizer with this tool",
    )
    # Set by --portkit-sanitize on the child session: exact allocations, line info.
    group.addoption(
        "--portkit-under-sanitizer", choices=SANITIZE_TOOLS, default=None, help=argparse.SUPPRESS
    )
    group.addoption(
        "--portkit-simt",
        action="store_true",
        default=False,
        help="run numba.cuda kernels of the tests in portkit's simulator (every check on): "
        "cuda.jit, cuda.to_device, cuda.device_array... are simulated; no GPU needed",
    )


_SWITCH_KEY = pytest.StashKey[Any]()


def _visible_gpus() -> list[str]:
    """GPU ids this process may use: CUDA_VISIBLE_DEVICES, else ``nvidia-smi -L``."""
    import os
    import shutil
    import subprocess

    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g.strip() for g in listed.split(",") if g.strip()]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(k) for k, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


def pin_worker_gpu() -> str | None:
    """Under pytest-xdist on a machine with several GPUs, give worker ``gwN`` GPU
    ``N mod GPUs`` alone (CUDA_VISIBLE_DEVICES), before anything initialises CUDA, so
    workers spread over the GPUs instead of all queueing on the first."""
    import os

    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or os.environ.get("PORTKIT_PIN_GPUS", "1") == "0":
        return None
    gpus = _visible_gpus()
    if len(gpus) < 2:
        return None
    chosen = gpus[int(worker[2:]) % len(gpus)]
    os.environ["CUDA_VISIBLE_DEVICES"] = chosen
    return chosen


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    pin_worker_gpu()
    if config.getoption("--portkit-simt", default=False):
        from portkit.simt.numba_switch import simulated_cuda

        switch = simulated_cuda()
        switch.__enter__()  # before collection, so test modules' @cuda.jit are simulated
        config.stash[_SWITCH_KEY] = switch


def pytest_unconfigure(config: pytest.Config) -> None:
    switch = config.stash.get(_SWITCH_KEY, None)
    if switch is not None:
        switch.__exit__(None, None, None)


def pytest_cmdline_main(config: pytest.Config) -> int | None:
    tool = config.getoption("portkit_sanitize", None)
    if not tool or config.getoption("portkit_under_sanitizer", None):
        return None
    return _rerun_under_sanitizer(config, tool)


def _rerun_under_sanitizer(config: pytest.Config, tool: str) -> int:
    """``pytest ... --portkit-sanitize=TOOL``: the same session, gpu items only, in a child
    under compute-sanitizer; returns the exit code (1 if it found anything in our kernels)."""
    import sys
    import time

    from portkit.sanitize.runner import run_under
    from portkit.sanitize.tools import ERROR_EXITCODE, skip_reason

    reason = skip_reason()
    if reason:
        print(f"SKIP sanitizer ({tool}): {reason}")
        return pytest.ExitCode.NO_TESTS_COLLECTED
    args = [a for a in config.invocation_params.args if not a.startswith("--portkit-sanitize")]
    child = [
        sys.executable,
        "-m",
        "pytest",
        *args,
        "-m",
        "gpu",
        "-p",
        "no:cacheprovider",
        f"--portkit-under-sanitizer={tool}",
    ]
    project = _project(config)
    from portkit.project.discovery import discover

    catalog = discover(project)
    kernels_of = {name: sorted(op.kernels) for name, op in catalog.ops.items()}
    log_dir = project.cache_dir / "sanitize" / f"pytest-{time.strftime('%Y%m%d-%H%M%S')}"
    run = run_under(tool, child, kernels_of, log_dir, config.invocation_params.dir, stream=True)
    own = run.own_findings
    for finding in own:
        print(
            f"SANITIZER {tool} / {finding.op} / {finding.implementation} / {finding.kernel} / "
            f"{finding.where} / block {finding.block} thread {finding.thread} / {finding.kind}"
        )
    print(
        f"compute-sanitizer {tool}: {len(own)} finding(s) in the project's kernels; "
        f"raw log {run.log_path}"
    )
    if own:
        return 1
    # The tool's error exit code with no finding of ours: torch's kernels, not the project's.
    return 0 if run.returncode == ERROR_EXITCODE else run.returncode


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
                    only_check=f"vs {twin.name}",
                )
                item.add_marker(_marker(twin))
                reasons = [skip_reason(op, case, b, backends.values()) for b in pair]
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
        if case.large:
            self.add_marker("large")

    def runtest(self) -> None:
        from portkit.check.harness import CheckSettings, run_case
        from portkit.results import FAIL, PASS

        settings = None
        tool = self.config.getoption("portkit_under_sanitizer", None)
        if tool:
            settings = CheckSettings.under_sanitizer(tool)
            for backend in self.backends:
                if hasattr(backend, "lineinfo"):
                    backend.lineinfo = True
        results = run_case(self.op, self.case, self.backends, settings)
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

        check = check_prototype if self.side == "numba" else check_twin
        result = check(self.op, _project(self.config))  # the PTX cache is in its cache dir
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


class BenchItem(PortkitItem):
    """``portkit bench OP --compare BASELINE`` as a test, for a GPU CI job; skipped unless
    ``--portkit-bench-baseline`` names the baseline."""

    def __init__(self, *, op, **kwargs) -> None:
        super().__init__(**kwargs)
        self.op = op
        self.add_marker("bench")
        if not self.config.getoption(BASELINE_OPTION):
            self.add_marker(
                pytest.mark.skip(reason=f"timing runs only with {BASELINE_OPTION} FILE")
            )

    def runtest(self) -> None:
        from portkit.backends import create
        from portkit.backends.base import cuda_unavailable_reason
        from portkit.bench.cases import bench_cases
        from portkit.bench.model import Report
        from portkit.bench.regression import compare_reports
        from portkit.bench.runner import DIRECTIONS
        from portkit.bench.session import IMPLEMENTATIONS, run_bench

        reason = cuda_unavailable_reason()
        if reason:
            pytest.skip(f"portkit bench needs an NVIDIA GPU: {reason}")
        baseline = Report.load(self.config.getoption(BASELINE_OPTION))
        ours = tuple(m for m in baseline.measurements if m.op == self.op.name)
        baseline = Report(baseline.machine, baseline.copy, baseline.reps, baseline.warmup, ours)
        project = _project(self.config)
        backends = [create(name, project) for name in IMPLEMENTATIONS]
        report = run_bench([(self.op, bench_cases(self.op))], backends, DIRECTIONS, 30, 3)
        threshold = self.config.getoption("--portkit-bench-threshold")
        problems = [
            f"{m.implementation} {m.direction} {m.case}: {m.check}"
            for m in report.wrong
            if not m.check.startswith("skip")
        ]
        problems += [
            f"{' '.join(v.key[1:])}: {v.status} ({v.detail})"
            for v in compare_reports(baseline, report, threshold)
            if v.failed
        ]
        if problems:
            raise CheckFailed("\n".join(problems))
