"""How one call is timed: CUDA events on torch's current stream, L2 flushed before each
call, the GPU kept busy while the host issues it.

Before each timed call the clock writes a buffer twice the size of L2 (so the inputs
come from device memory, as they would in a model) and queues a spin kernel
(``torch.cuda._sleep``) long enough to cover the host's time to issue the call. The
start event then runs on the GPU only after the call's kernels are queued behind it, so
the events measure the kernels and not the host; the host's time is measured apart.

For the prototype and the twin the events bracket the kernel launches themselves
(``LaunchSpan`` wraps every launch target): output allocation, and the NaN poison that
lets the benchmark catch an unwritten output, happen before the first launch and are
not timed. torch's reference is timed around the whole call.

A call that waits for the GPU inside itself (a size read back to the host, as a boolean
mask's indexing does) keeps the host busy for as long as the spin runs, however long
that is: no spin covers it. Such a call is timed with plain events instead (``EVENTS``):
no spin, the marks around the call, the host's time to issue it included, which is
what such a call costs a model anyway.

``Clock`` is the seam the unit tests use: a fake clock gives scripted times on a CPU.

The host's own time (a launcher's Python, a cold process, a simulated launch) is timed
by ``host_call`` and ``host_rounds``, the one wall-clock loop every script in
``scripts/`` uses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from portkit.launch.kernel_set import LaunchTarget

if TYPE_CHECKING:
    from portkit.launch.kernel_set import KernelSet, LaunchConfig

MIN_FLUSH_BYTES = 64 << 20
MIN_COVER_US = 100.0
MAX_COVER_US = 20_000.0
R = TypeVar("R")
SPIN = "spin"  # the host's issue hidden behind a GPU spin: kernel time alone
EVENTS = "events"  # plain events around the call: the host's issue time included


class Clock(Protocol):
    cover_us: float

    def prepare(self, spin: bool = True) -> None:
        """Before a timed call: flush L2 and (``spin``) keep the GPU busy while the host
        issues it."""

    def mark(self) -> Any:
        """A point in the stream's timeline (a recorded CUDA event)."""

    def elapsed_us(self, start: Any, end: Any) -> float:
        """Microseconds between two marks (waits for the second)."""

    def covers(self, host_us: float) -> bool:
        """Whether the GPU stayed busy while the host spent ``host_us`` issuing a call."""


class CudaClock:
    def __init__(self, cover_us: float = 1000.0) -> None:
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = int(getattr(props, "L2_cache_size", 0) or 50 << 20)
        self.l2_bytes = l2
        self._flush = torch.empty(max(2 * l2, MIN_FLUSH_BYTES), dtype=torch.int8, device="cuda")
        self.cover_us = cover_us
        self._cycles_per_us = self._calibrate()

    @staticmethod
    def _calibrate() -> float:
        """GPU clock cycles per microsecond of ``torch.cuda._sleep``."""
        import torch

        from portkit.runtime.torch_private import cuda_sleep

        cycles = 2_000_000
        cuda_sleep(cycles // 10)  # warm-up
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        cuda_sleep(cycles)
        end.record()
        end.synchronize()
        return cycles / max(start.elapsed_time(end) * 1000.0, 1.0)

    def prepare(self, spin: bool = True) -> None:
        from portkit.runtime.torch_private import cuda_sleep

        self._flush.zero_()
        if spin:
            cuda_sleep(int(self.cover_us * self._cycles_per_us))

    def mark(self) -> Any:
        import torch

        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def elapsed_us(self, start: Any, end: Any) -> float:
        end.synchronize()
        return float(start.elapsed_time(end)) * 1000.0

    def covers(self, host_us: float) -> bool:
        return host_us < self.cover_us


def cover_for(host_us: Sequence[float]) -> float:
    """Enough GPU spin to hide the slowest host issue seen in warm-up, with margin."""
    slowest = max(host_us, default=0.0)
    return min(max(3.0 * slowest + 50.0, MIN_COVER_US), MAX_COVER_US)


class LaunchSpan:
    """The marks of one call's first kernel launch and last kernel end."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.armed = False
        self.start: Any = None
        self.end: Any = None
        self.launches = 0

    def arm(self) -> None:
        self.armed, self.start, self.end, self.launches = True, None, None, 0

    def disarm(self) -> None:
        self.armed = False

    def wrap(self, kernels: KernelSet) -> KernelSet:
        return kernels.wrapped(lambda name, target: _TimedTarget(target, self))


class _TimedTarget(LaunchTarget):
    def __init__(self, target: LaunchTarget, span: LaunchSpan) -> None:
        self._target, self._span = target, span

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
        span = self._span
        if span.armed and span.start is None:
            span.start = span.clock.mark()
        self._target.launch(config, args)
        if span.armed:
            span.end = span.clock.mark()
            span.launches += 1


# -- the host's time -----------------------------------------------------------------------
def host_call(fn: Callable[..., R], *args: Any, **kwargs: Any) -> tuple[R, float]:
    """Call ``fn(*args, **kwargs)`` once: what it returned and the host's wall-clock
    seconds (``time.perf_counter``)."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def host_rounds(
    timed: Mapping[str, Callable[[], object]],
    rounds: int,
    calls: int | Mapping[str, int] = 1,
    finish: Callable[[], object] | None = None,
) -> dict[str, list[float]]:
    """Wall-clock seconds per call of each entry of ``timed``, one sample per round.

    Rounds are interleaved: in each, every entry runs ``calls`` times back to back (a
    number, or one per entry) followed by ``finish`` (e.g. ``torch.cuda.synchronize``,
    so queued GPU work counts), and the sample is the span over the number of calls. A
    slow spell of a shared machine hits every entry of a round alike, so ratios taken
    within a round compare side by side. No warm-up: call the entries once first.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, not {rounds}")
    counts = {name: calls[name] if isinstance(calls, Mapping) else calls for name in timed}
    samples: dict[str, list[float]] = {name: [] for name in timed}
    for _ in range(rounds):
        for name, fn in timed.items():
            count = counts[name]
            start = time.perf_counter()
            for _ in range(count):
                fn()
            if finish is not None:
                finish()
            samples[name].append((time.perf_counter() - start) / count)
    return samples
