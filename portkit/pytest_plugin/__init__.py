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
reason the backend gives when the machine has no GPU. Two phases: ``-m cpu`` is what
needs no GPU (compile, lint, reference, sim, twin_cpu), ``-m gpu`` the rest (bench
items carry neither: ``-m "gpu or bench"`` with a baseline).

An item whose verdict is stored (it passed before, nothing it depends on changed) is
served from the verdict store and reported as ``cached`` (verdicts.py);
``--portkit-no-cache`` runs everything.

``--portkit-sanitize=TOOL`` (memcheck, racecheck, initcheck, synccheck) reruns the
session's ``gpu`` items in a child pytest under ``compute-sanitizer --tool TOOL`` with
the settings of ``portkit check --sanitize`` (docs/sanitizer.md), prints the findings in
the project's kernels and fails the session if there are any.

``--portkit-shard K/N`` keeps shard K of N of the collected items (whole ops, balanced by
the durations in ``--portkit-durations FILE``, else by item count; shards.py), so a CI
matrix of N machines runs the suite once between them; xdist workers inside each shard
still get a GPU each. Each xdist worker also gets its share of the cores for torch's
threads (``OMP_NUM_THREADS`` = cores / workers, unless set): workers that each start a
thread per core slow every CPU reference and simulator case (the generated suite on one
H200, 16 workers: 114 s before on all 64 cores, 91 s after on 16).
Under ``-n`` the workers steal work from each other (xdist's ``worksteal``, unless
``--dist`` names a mode) and the GPU-sized cases are spread through the collection, so
no worker runs an op's slowest items back to back (scheduling.py).

``bench`` items time the op (``portkit bench``) and compare with a saved report; they
skip unless a GPU CI job passes ``--portkit-bench-baseline FILE``, so the normal suite
never asserts a time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pytest

from portkit.pytest_plugin import scheduling, shards, verdicts
from portkit.pytest_plugin.items import (
    BASELINE_OPTION,
    OpFile,
    environment_settings,
    project_config,
    project_session,
)

MARKERS = {
    "sim": "runs an op's prototype in the CUDA simulator on the CPU",
    "gpu": "needs an NVIDIA GPU (prototype compiled by numba, or the C CUDA twin)",
    "compile": "compiles prototypes and twins for sm_90; needs no GPU",
    "reference": "gradchecks an op's PyTorch reference",
    "bench": "times an op against a saved `portkit bench` report (--portkit-bench-baseline)",
    "twin_cpu": "runs an op's C CUDA twin compiled for the CPU (needs a C++ compiler, no GPU)",
    "large": "a GPU-sized case; on a CPU only the simulator runs it (-m 'not large' skips)",
    "cpu": "needs no GPU: the CPU phase (-m cpu on a hosted runner, -m gpu on the GPU one)",
}
SANITIZE_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")


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
        "--portkit-strict",
        action="store_true",
        default=False,
        help="simulator warnings (a barrier after threads returned, an uninitialised "
        "value never used, threads storing one value...) fail the generated tests, as "
        "[tool.portkit] strict = true does",
    )
    group.addoption(
        "--portkit-seeds",
        type=int,
        default=1,
        metavar="N",
        help="run every case item with N seeds (its own and the next N-1) and list the "
        "worst margin per item (largest error over its bound) at the end",
    )
    group.addoption(
        "--portkit-simt",
        action="store_true",
        default=False,
        help="run numba.cuda kernels of the tests in portkit's simulator (every check on): "
        "cuda.jit, cuda.to_device, cuda.device_array... are simulated; no GPU needed",
    )
    verdicts.add_options(group)
    group.addoption(
        "--portkit-simt-cc",
        default="9.0",
        metavar="MAJOR.MINOR",
        help="under --portkit-simt, the compute capability the simulated device reports "
        "(default 9.0: an H100's attributes)",
    )
    group.addoption(
        "--portkit-shard",
        type=shards.parse_shard,
        default=None,
        metavar="K/N",
        help="run shard K of N (1 <= K <= N): whole ops spread over N shards, balanced by "
        "--portkit-durations (else by item count); the N shards run every item exactly "
        "once between them, e.g. one per CI runner in a matrix",
    )
    group.addoption(
        "--portkit-durations",
        type=Path,
        default=None,
        metavar="FILE",
        help="recorded seconds per item (JSON): read to balance --portkit-shard, and "
        "written after the run with this run's items (a shard writes its own only; "
        "merge the shards' files with `jq -s add`); keep it as a CI artefact",
    )


_SWITCH_KEY = pytest.StashKey[Any]()
_SHARD_DURATIONS_KEY = pytest.StashKey[dict[str, float]]()


def pin_worker_gpu(pin: bool = True) -> str | None:
    """Under pytest-xdist on a machine with several GPUs, give worker ``gwN`` GPU
    ``N mod GPUs`` alone (CUDA_VISIBLE_DEVICES), before anything initialises CUDA, so
    workers spread over the GPUs instead of all queueing on the first. ``pin``: the
    session's setting (PORTKIT_PIN_GPUS). Process setup, so it reads and writes the
    process's environment, through the table (docs/environment.md)."""
    from portkit.checking.parallel.gpus import visible_gpus
    from portkit.project.environment import process_variable, set_process_variable

    worker = process_variable("PYTEST_XDIST_WORKER") or ""
    if not worker.startswith("gw") or not pin:
        return None
    gpus = visible_gpus()
    if len(gpus) < 2:
        return None
    chosen = gpus[int(worker[2:]) % len(gpus)]
    set_process_variable("CUDA_VISIBLE_DEVICES", chosen)
    return chosen


def share_worker_threads() -> int | None:
    """Under pytest-xdist, give each worker its share of the cores for torch's threads
    (OMP_NUM_THREADS, unless set), before the prototypes import torch: N workers each
    starting a thread per core slow every CPU reference and simulator case by their
    contention. Returns the threads set, or None."""
    from portkit.checking.parallel.gpus import thread_share
    from portkit.project.environment import process_variable, set_process_variable

    workers = process_variable("PYTEST_XDIST_WORKER_COUNT")
    if not (workers or "").isdigit() or process_variable("OMP_NUM_THREADS") is not None:
        return None
    threads = thread_share(int(workers or 1))
    set_process_variable("OMP_NUM_THREADS", str(threads))
    torch = sys.modules.get("torch")
    if torch is not None:  # imported already (by a conftest): tell it as well
        torch.set_num_threads(threads)
    return threads


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    settings = environment_settings(config)
    pin_worker_gpu(settings.pin_gpus)
    share_worker_threads()
    durations = config.getoption("portkit_durations", None)
    sharded = config.getoption("portkit_shard", None) is not None
    if durations is not None:
        try:  # read once, before the run writes it; a bad file is a usage error
            config.stash[_SHARD_DURATIONS_KEY] = shards.read_durations(durations)
        except shards.DurationsError as exc:
            raise pytest.UsageError(f"--portkit-durations: {exc}") from None
        if not hasattr(config, "workerinput"):  # no xdist, or xdist's controller
            config.pluginmanager.register(shards.DurationRecorder(durations, sharded))
    if config.getoption("--portkit-simt", default=False):
        from portkit.simt.numba_switch import simulated_cuda

        switch = simulated_cuda(settings.simt_engine, config.getoption("--portkit-simt-cc"))
        switch.__enter__()  # before collection, so test modules' @cuda.jit are simulated
        config.stash[_SWITCH_KEY] = switch


@pytest.hookimpl(trylast=True)  # after -m/-k deselected theirs: shard what will run
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    shard = config.getoption("portkit_shard", None)
    if shard is not None:
        durations = config.stash.get(_SHARD_DURATIONS_KEY, {})
        mine = shards.partition([item.nodeid for item in items], shard.count, durations)
        chosen = mine[shard.index - 1]
        kept = [item for item in items if item.nodeid in chosen]
        dropped = [item for item in items if item.nodeid not in chosen]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    if scheduling.spreads(config):  # GPU-sized cases apart, each in another worker's run
        items[:] = scheduling.spread(
            items, lambda item: item.get_closest_marker("large") is not None
        )


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's, called only where it runs
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any | None:
    return scheduling.make_scheduler(config, log)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's controller, before a worker starts
def pytest_configure_node(node: Any) -> None:
    scheduling.tell_worker(node.config, node.workerinput)


def pytest_report_header(config: pytest.Config) -> str | None:
    shard = config.getoption("portkit_shard", None)
    if shard is None:
        return None
    path = config.getoption("portkit_durations", None)
    how = f"durations {path}" if config.stash.get(_SHARD_DURATIONS_KEY, {}) else "item count"
    return f"portkit shard {shard} (whole ops, balanced by {how})"


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
    session = project_session(config)
    project, catalog = session.config, session.catalog
    kernels_of = {name: sorted(op.kernels) for name, op in catalog.ops.items()}
    log_dir = project.cache_dir / "sanitize" / f"pytest-{time.strftime('%Y%m%d-%H%M%S')}"
    run = run_under(
        tool,
        child,
        kernels_of,
        log_dir,
        config.invocation_params.dir,
        stream=True,
        environment=project.settings.as_environment(),
    )
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


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix != ".py" or file_path.name.startswith("_"):
        return None
    project = project_config(parent.config)
    if file_path.parent.resolve() != project.prototypes_dir.resolve():
        return None
    return OpFile.from_parent(parent, path=file_path)


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    """An item served from the verdict store is reported as cached, never as a plain pass."""
    return verdicts.report_status(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    verdicts.save(session.config)  # each xdist worker merges its own under the file's lock


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Items served from stored verdicts, counted; with --portkit-seeds N: the items
    closest to their bound, worst first."""
    cached = len(terminalreporter.stats.get("cached", ()))
    if cached:
        terminalreporter.write_line(
            f"portkit: {cached} item(s) passed before and are unchanged: served from the "
            f"verdict store, not run (--portkit-no-cache runs them)"
        )
    seeds = config.getoption("--portkit-seeds", default=1)
    if seeds <= 1:
        return
    found = [
        (value, report.nodeid)
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", "") == "call"
        for name, value in getattr(report, "user_properties", ())
        if name == "portkit_worst_margin"
    ]
    if found:
        terminalreporter.section(f"portkit: worst margin over {seeds} seeds (1 = the bound)")
        for value, nodeid in sorted(found, key=lambda f: -f[0])[:20]:
            terminalreporter.write_line(f"{value:.3g}  {nodeid}")
