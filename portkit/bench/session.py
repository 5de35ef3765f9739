"""One benchmark run on this machine's GPU, as ``portkit bench`` and the pytest plugin
start it: the clock, the copy bandwidth, then every op's cases."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from portkit.bench.model import Report
from portkit.errors import PortkitError

if TYPE_CHECKING:
    from portkit.project.cases import Case
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op

# torch eager (the reference), the op's baseline=, torch.compile of the reference, the
# numba prototype, the twin
IMPLEMENTATIONS = ("torch", "baseline", "torch.compile", "numba", "twin")


def implementations(names: Sequence[str], config: ProjectConfig) -> list[Any]:
    """The backends (and torch.compile's stand-in) that ``names`` time."""
    from portkit.backends import create
    from portkit.bench.model import BASELINE
    from portkit.bench.tasks import COMPILE, Baseline, CompiledReference

    stand_ins = {COMPILE: CompiledReference, BASELINE: Baseline}
    return [stand_ins[n]() if n in stand_ins else create(n, config) for n in names]


def require_gpu() -> None:
    from portkit.backends.base import cuda_unavailable_reason

    reason = cuda_unavailable_reason()
    if reason:
        raise PortkitError(f"portkit bench needs an NVIDIA GPU: {reason}")


def run_bench(
    plan: Sequence[tuple[Op, Sequence[Case]]],
    backends: Sequence[Any],
    directions: Sequence[str],
    reps: int,
    warmup: int,
    advance: Callable[[str], None] | None = None,
) -> Report:
    from portkit.bench.machine import describe_machine, measure_copy
    from portkit.bench.runner import Bench
    from portkit.bench.timing import CudaClock

    require_gpu()
    advance = advance or (lambda label: None)
    clock = CudaClock()
    advance("copy bandwidth")
    copy = measure_copy(clock, reps)
    runner = Bench(clock, reps=reps, warmup=warmup, directions=directions, advance=advance)
    measurements = []
    for op, cases in plan:
        measurements += runner.run_op(op, cases, backends)
    return Report(describe_machine(clock.l2_bytes), copy, reps, warmup, tuple(measurements))


def units(plan: Sequence[tuple[Op, Sequence[Case]]], directions: Sequence[str]) -> int:
    """Steps of a run, for a progress bar."""
    return sum(len(cases) for _, cases in plan) * len(directions) + 1
