"""The machine a run measured: the GPU, the versions, and its copy bandwidth, measured in
the same run with the same clock, so every % of copy bandwidth is against this GPU as
it was during the run."""

from __future__ import annotations

import platform
from datetime import datetime, timezone
from importlib import metadata

from portkit.bench.model import CopyBandwidth, Machine
from portkit.bench.stats import Summary
from portkit.bench.timing import Clock

COPY_ELEMENTS = 1 << 26  # 256 MiB of float32: five times an H100's L2
PACKAGES = ("torch", "numba", "numba-cuda", "cuda-core", "numpy")


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    try:
        import torch

        found["cuda (torch)"] = str(torch.version.cuda)
    except ImportError:  # pragma: no cover - portkit needs torch
        pass
    return found


def describe_machine(l2_bytes: int) -> Machine:
    import torch

    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    return Machine(
        gpu=props.name,
        sms=props.multi_processor_count,
        l2_bytes=l2_bytes,
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        versions=versions(),
    )


def measure_copy(clock: Clock, reps: int, elements: int = COPY_ELEMENTS) -> CopyBandwidth:
    """``torch.clone`` of a large float32 buffer, timed like every implementation."""
    import torch

    source = torch.randn(elements, device="cuda")
    clock.cover_us = 200.0
    for _ in range(3):
        source.clone()
    samples = []
    for _ in range(reps):
        clock.prepare()
        start = clock.mark()
        copy = source.clone()
        end = clock.mark()
        samples.append(clock.elapsed_us(start, end))
        del copy
    copy = source.clone()
    if not torch.equal(copy, source):  # pragma: no cover - a broken GPU
        raise RuntimeError("torch.clone did not copy: the machine is not fit to measure")
    return CopyBandwidth(2 * source.numel() * source.element_size(), Summary.of(samples))
