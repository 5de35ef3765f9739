"""How the machine (``machine.Machine``) reports what is not an error at once: warnings
(simt/warning_log.py), reads racing with atomics waiting for a second schedule
(second_schedule.py), and uninitialised shared values stored to global memory, waiting
for the next barrier (poison.py). A mixin: the machine holds the state it names."""

from __future__ import annotations

import traceback
from typing import Any

from portkit.errors import KernelError
from portkit.simt.intrinsics import SimulatedCuda
from portkit.simt.kernel_exceptions import raised
from portkit.simt.memory_fault import MemoryFault
from portkit.simt.records import Place, SimulationFault, unflatten
from portkit.simt.second_schedule import Suspect
from portkit.simt.stamps import line_of, stamp_block, stamp_thread
from portkit.simt.warning_log import SimWarning, WarningLog


class Reporting:
    """The machine's warnings and deferred reports of the running launch."""

    cuda: SimulatedCuda
    files: dict[str, int]
    thread_index: int
    confirming: bool  # this machine is a second schedule's: no suspects kept
    _log: WarningLog
    _kernel: str
    _suspects: list[Suspect] | None
    _poison_stores: list[SimulationFault]
    _block: tuple[int, int, int]
    rewriter: Any  # the machine's kernel rewriter: the files its frames come from

    def place(self, thread: int, file: str, line: int) -> Place:
        dims = tuple(int(v) for v in self.cuda.blockDim)
        return Place(self._block, unflatten(thread, dims), file, line)

    def fault(self, name: str, exc: BaseException, thread: int) -> KernelError:
        files = set(self.rewriter.files)
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename in files]
        place = self.place(thread, frames[-1].filename, frames[-1].lineno or 0) if frames else None
        if isinstance(exc, MemoryFault):
            other = other_what = None
            if exc.other is not None:
                other = self._stamp_place(*exc.other)
                other_what = "the other access"
            detail = exc.detail
            if exc.kind == "race":
                detail = f"data race: {detail} with no barrier between them"
            return SimulationFault(name, exc.kind, detail, place, other, other_what or "")
        dims = tuple(int(v) for v in self.cuda.blockDim)
        return raised(name, exc, place, self._block, unflatten(thread, dims))

    def warn(
        self, kind: str, detail: str, place: Place | None, other: Place | None = None
    ) -> None:
        """A warning of the running launch (callers raise instead in strict mode)."""
        self._log.add(SimWarning(self._kernel, kind, detail, place, other))

    def memory_warning(
        self, kind: str, detail: str, frame: Any, other: tuple[int, int] | None = None
    ) -> None:
        """A warning from simulated memory, at the running thread and ``frame``'s line;
        ``other``: (stamp, line key) of another thread's access."""
        place = self.place(self.thread_index, frame.f_code.co_filename, frame.f_lineno)
        self.warn(kind, detail, place, self._stamp_place(*other) if other else None)

    def _stamp_place(self, stamp: int, key: int) -> Place:
        """Where the access of ``stamp`` at line key ``key`` happened."""
        file, line = line_of(key, list(self.files))
        dims = tuple(int(v) for v in self.cuda.blockDim)
        grid = tuple(int(v) for v in self.cuda.gridDim)
        return Place(
            unflatten(stamp_block(stamp), grid), unflatten(stamp_thread(stamp), dims), file, line
        )

    def suspect_race(self, fault: MemoryFault, frame: Any) -> None:
        """A read racing with another thread's atomic: judged by a second schedule at
        the launch's end, or an error at once when the launch cannot be re-run."""
        if self.confirming:
            return
        if self._suspects is None:
            raise fault
        if len(self._suspects) >= 8:
            return
        place = self.place(self.thread_index, frame.f_code.co_filename, frame.f_lineno)
        other = self._stamp_place(*fault.other) if fault.other else None
        self._suspects.append(Suspect(fault, place, other))

    def defer_poison_store(self, fault: MemoryFault, frame: Any) -> None:
        """An uninitialised shared value stored to global memory, reported at the next
        barrier unless a write by another thread shows a race first (memory.py)."""
        place = self.place(self.thread_index, frame.f_code.co_filename, frame.f_lineno)
        self._poison_stores.append(SimulationFault(self._kernel, fault.kind, fault.detail, place))
