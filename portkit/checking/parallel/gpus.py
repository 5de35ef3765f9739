"""Which GPUs this machine lets a process use, and the process setup of worker ``slot``
of ``jobs``: its own GPU (round robin), its share of the cores for torch's threads."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence


def visible_gpus() -> list[str]:
    """GPU ids this process may use: CUDA_VISIBLE_DEVICES, else ``nvidia-smi -L``.
    Process setup: the process's environment, through the table (docs/environment.md)."""
    from portkit.project.environment import process_variable

    listed = process_variable("CUDA_VISIBLE_DEVICES")
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


def worker_environment(
    slot: int, jobs: int, gpus: Sequence[str], base: Mapping[str, str], cores: int | None = None
) -> dict[str, str]:
    """``base`` with worker ``slot``'s setup: GPU ``gpus[slot mod len(gpus)]`` alone
    (none set where the machine has none), and ``OMP_NUM_THREADS`` = its share of the
    cores unless ``base`` sets it, so N workers do not each start a thread per core."""
    env = dict(base)
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = gpus[slot % len(gpus)]
    if "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = str(thread_share(jobs, cores))
    return env


def usable_cores() -> int:
    """The cores this process may run on (its affinity: a runner pinned with taskset or a
    container's cpuset has fewer than the machine)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # pragma: no cover - no affinity on this platform
        return os.cpu_count() or 1


def thread_share(jobs: int, cores: int | None = None) -> int:
    """Threads for each of ``jobs`` processes sharing ``cores`` (default: usable_cores):
    torch starts a thread per core in every process, so 16 workers on 16 cores would
    otherwise run 256 threads and each wait for the others' CPU work."""
    return max(1, (cores or usable_cores()) // max(1, jobs))
