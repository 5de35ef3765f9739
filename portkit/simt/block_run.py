"""One block of a kernel that waits: every thread is a generator, run up to its next
wait in thread order; then the warp operations whose lanes have all arrived are
answered, then the barrier once every live thread has (threads that exited count as
arrived: a warning, simt/warning_log.py). Whatever cannot be answered is the kernel's
bug (threads waiting at different barriers, a mask naming a lane that exited)."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from portkit.errors import KernelError
from portkit.simt import epochs
from portkit.simt.debug import DebugSession
from portkit.simt.interrupts import passes_through
from portkit.simt.intrinsics import WARP_SIZE, Dim3, SimulatedCuda
from portkit.simt.memory import SimArray
from portkit.simt.poison import PoisonUsed
from portkit.simt.records import Place, SimulationFault
from portkit.simt.scalars import INT64
from portkit.simt.schedule import in_order
from portkit.simt.stamps import EPOCH_MASK, EPOCH_SHIFT, THREAD_BITS
from portkit.simt.transform import GRID_SYNC, SimulatedFunction

FULL_MASK = 0xFFFFFFFF
BARRIERS = ("syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or", GRID_SYNC)
_DONE = object()  # a finished thread's request


# Warp operations that exited lanes of the mask do not hold up (PTX ISA: bar.warp.sync
# and vote.sync wait for the non-exited threads of membermask; an exited lane votes no).
# Shuffles are not among them: a lane reading an exited lane's value reads nothing.
EXITED_ARRIVE = frozenset({"syncwarp", "ballot_sync", "any_sync", "all_sync", "eq_sync"})


class BlockHost(Protocol):
    """What a block run drives on the machine (``machine.Machine``): the simulated
    ``cuda`` module, who runs now (thread and stamp), and how faults are reported."""

    cuda: SimulatedCuda
    stamp: int
    thread_index: int
    finished_threads: list[bool]
    schedule: str  # the order threads resume in (schedule.py)
    strict: bool  # warnings are errors (simt/warning_log.py)
    _shared: dict[Any, SimArray]  # the block's shared arrays (their shadows: epochs.py)

    def place(self, thread: int, file: str, line: int) -> Place: ...

    def fault(self, name: str, exc: BaseException, thread: int) -> KernelError: ...

    def settle_shared(self, name: str) -> None: ...

    def warn(
        self, kind: str, detail: str, place: Place | None, other: Place | None = None
    ) -> None: ...


class BlockRun:
    """One block of a kernel that waits: generators, barriers and warp operations."""

    def __init__(
        self,
        machine: BlockHost,
        name: str,
        function: SimulatedFunction,
        args: list[Any],
        base: int,
        thread_ids: list[Dim3],
        debug: DebugSession | None,
        target: int | None,
    ) -> None:
        self.machine = machine
        self.name = name
        self.function = function
        self.base = base
        self.thread_ids = thread_ids
        self.n = len(thread_ids)
        self.debug, self.target = debug, target
        self.args = args
        self.threads = [function.function(*args) for _ in range(self.n)]
        self.replies: list[Any] = [None] * self.n
        self.requests: list[Any] = [None] * self.n
        self.finished = [False] * self.n
        self.epoch = 0
        self.generations = [0] * ((self.n + WARP_SIZE - 1) // WARP_SIZE)
        self._runnable = list(range(self.n))

    def run(self) -> bool:
        """Run until the block ends (False) or every thread waits at a grid barrier
        (True: call ``pass_grid_barrier`` and ``run`` again once every block is there)."""
        runnable = self._runnable
        while True:
            # cuda.activemask() in this round: lanes that had not exited when it began.
            # Lanes resumed together run converged on a GPU; here they run one after
            # another, and one that ends first must not leave its later peers' mask.
            self.machine.finished_threads = list(self.finished)
            for thread in in_order(runnable, self.machine.schedule):
                self._resume(thread)
            runnable = self._answer_warp_operations()
            if runnable:
                continue
            waiting = [t for t in range(self.n) if not self.finished[t]]
            if not waiting:
                return False
            self._check_barrier(waiting)
            if self.requests[waiting[0]][0] == GRID_SYNC:
                self._runnable = waiting
                return True
            runnable = self._answer_barrier(waiting)

    def pass_grid_barrier(self) -> None:
        """Every block of the grid reached the grid barrier: past it, as a syncthreads."""
        self._answer_barrier(self._runnable)

    def _resume(self, thread: int) -> None:
        machine = self.machine
        cuda = machine.cuda
        cuda.threadIdx = self.thread_ids[thread]
        cuda.laneid = INT64(thread % WARP_SIZE)
        machine.thread_index = thread
        machine.stamp = (
            self.base
            | (self.epoch & EPOCH_MASK) << EPOCH_SHIFT
            | self.generations[thread // WARP_SIZE] << THREAD_BITS
            | thread
        )
        generator = self.threads[thread]
        reply, self.replies[thread] = self.replies[thread], None
        try:
            if self.debug is not None and thread == self.target:
                self.requests[thread] = self.debug.run(generator.send, reply)
            else:
                self.requests[thread] = generator.send(reply)
        except StopIteration:
            self.finished[thread] = True
            self.requests[thread] = _DONE
        except KernelError:
            raise
        except Exception as exc:
            if passes_through(exc):  # a signal handler's timeout, MemoryError: not a fault
                raise
            raise machine.fault(self.name, exc, thread) from None

    def _where(self, thread: int) -> tuple[str, int]:
        """File and line a waiting thread stopped at (inside device functions too)."""
        generator = self.threads[thread]
        while generator.gi_yieldfrom is not None and hasattr(generator.gi_yieldfrom, "gi_frame"):
            generator = generator.gi_yieldfrom
        frame = generator.gi_frame
        return frame.f_code.co_filename, frame.f_lineno

    def _fail(
        self, thread: int, kind: str, detail: str, other: int | None = None, other_what: str = ""
    ) -> SimulationFault:
        machine = self.machine
        place = machine.place(thread, *self._where(thread))
        other_place = None
        if other is not None:
            if self.finished[other]:
                other_place = None
                detail += f" (thread {machine.place(other, '', 0).thread} has exited)"
            else:
                other_place = machine.place(other, *self._where(other))
        return SimulationFault(self.name, kind, detail, place, other_place, other_what)

    def _vote(self, thread: int, position: int) -> bool:
        """A thread's vote (a predicate of a barrier or warp vote): an uninitialised
        value there is used, an error at the thread's wait (poison.py)."""
        try:
            return bool(self.requests[thread][position])
        except PoisonUsed as exc:
            raise self._fail(thread, exc.kind, exc.detail) from None

    # -- warps ----------------------------------------------------------------------------
    def _answer_warp_operations(self) -> list[int]:
        resumed: list[int] = []
        stuck: tuple[int, int] | None = None  # (waiting lane, missing lane) to report
        for warp_start in range(0, self.n, WARP_SIZE):
            lanes = range(warp_start, min(warp_start + WARP_SIZE, self.n))
            pending = [t for t in lanes if self._is_warp_request(self.requests[t])]
            while pending:
                first = pending[0]
                kind, mask = self.requests[first][0], self._mask(first)
                group = [warp_start + lane for lane in range(WARP_SIZE) if mask >> lane & 1]
                if kind in EXITED_ARRIVE:  # PTX: they wait for the mask's non-exited lanes
                    group = [t for t in group if not self.finished[t]]
                missing = [
                    t
                    for t in group
                    if t not in pending or self.requests[t][0] != kind or self._mask(t) != mask
                ]
                if missing:
                    stuck = stuck or (first, missing[0])
                    pending = [t for t in pending if t not in group]
                    continue
                self._answer(kind, group, warp_start)
                resumed += group
                pending = [t for t in pending if t not in group]
        if not resumed and stuck is not None:
            # Every thread has run until it waits or ends: nothing will arrive any more.
            self._report_stuck(*stuck)
        return sorted(resumed)

    def _is_warp_request(self, request: Any) -> bool:
        return request is not _DONE and request is not None and request[0] not in BARRIERS

    def _mask(self, thread: int) -> int:
        request = self.requests[thread]
        mask = int(request[1]) & FULL_MASK if len(request) > 1 else FULL_MASK
        lane = thread % WARP_SIZE
        warp_start = thread - lane
        if not mask >> lane & 1:
            raise self._fail(
                thread,
                "warp-mask",
                f"cuda.{request[0]} with mask {mask:#010x}, which does not "
                f"include the calling lane {lane}",
            )
        lanes_here = min(WARP_SIZE, self.n - warp_start)
        if mask >> lanes_here:
            raise self._fail(
                thread,
                "warp-mask",
                f"cuda.{request[0]} with mask {mask:#010x} names lanes "
                f"{lanes_here}-31, which do not exist: this warp has "
                f"{lanes_here} lanes (block of {self.n} threads)",
            )
        return mask

    def _report_stuck(self, waiting: int, missing: int) -> None:
        request = self.requests[waiting]
        mask = self._mask(waiting)
        lane = missing % WARP_SIZE
        if self.finished[missing]:
            detail = (
                f"cuda.{request[0]} with mask {mask:#010x}: lane {lane}, named in the "
                f"mask, exited without reaching it"
            )
            raise self._fail(waiting, "warp-divergence", detail, missing)
        other = self.requests[missing]
        elsewhere = f"waits at cuda.{other[0]}"
        if other[0] == request[0] and other[0] not in BARRIERS:
            elsewhere += f" with mask {int(other[1]) & FULL_MASK:#010x}"
        detail = (
            f"cuda.{request[0]} with mask {mask:#010x}: lane {lane}, named in the "
            f"mask, never reaches it; it {elsewhere}"
        )
        raise self._fail(waiting, "warp-divergence", detail, missing, "lane " + str(lane))

    def _match(self, kind: str, group: list[int], warp_start: int) -> None:
        """``match_any_sync``: each lane's mask of the lanes holding its value;
        ``match_all_sync``: (the mask, True) where all hold one value, else (0, False).
        Values are compared as bits, as the GPU's match.sync does (NaN matches its own
        bits, -0.0 does not match 0.0)."""
        bits = {t: _bits(self.requests[t][2]) for t in group}
        if kind == "match_any_sync":
            for t in group:
                same = sum(1 << (u - warp_start) for u in group if bits[u] == bits[t])
                self.replies[t] = _int32(same)
            return
        alike = len(set(bits.values())) == 1
        for t in group:
            self.replies[t] = (_int32(self._mask(t)) if alike else INT64(0), np.bool_(alike))

    def _answer(self, kind: str, group: list[int], warp_start: int) -> None:
        requests, replies = self.requests, self.replies
        if kind == "syncwarp":
            pass
        elif kind in ("ballot_sync", "any_sync", "all_sync"):
            votes = {t: self._vote(t, 2) for t in group}
            if kind == "ballot_sync":
                bits = sum(1 << (t - warp_start) for t, v in votes.items() if v)
                result: Any = _int32(bits)
            elif kind == "any_sync":
                result = np.bool_(any(votes.values()))
            else:
                result = np.bool_(all(votes.values()))
            for t in group:
                replies[t] = result
        elif kind in ("match_any_sync", "match_all_sync"):
            self._match(kind, group, warp_start)
        elif kind == "eq_sync":
            ballot = [self._vote(t, 2) for t in group]  # numba votes on value != 0
            same = np.bool_(all(v == ballot[0] for v in ballot))
            for t in group:
                replies[t] = same
        else:
            members = set(group)
            for t in group:
                lane = t - warp_start
                amount = int(requests[t][3])
                if kind == "shfl_sync":
                    source = amount % WARP_SIZE
                elif kind == "shfl_up_sync":
                    source = lane - amount if lane - amount >= 0 else lane
                elif kind == "shfl_down_sync":
                    source = lane + amount if lane + amount < WARP_SIZE else lane
                else:  # shfl_xor_sync
                    source = lane ^ amount if (lane ^ amount) < WARP_SIZE else lane
                if warp_start + source not in members:
                    raise self._fail(
                        t,
                        "warp-mask",
                        f"cuda.{kind} in lane {lane} reads lane {source}, which is not in the "
                        f"mask {self._mask(t):#010x} (its value is undefined on a GPU)",
                    )
                replies[t] = requests[warp_start + source][2]
        for t in group:
            self.requests[t] = None
        warp = warp_start // WARP_SIZE
        self.generations[warp] = (self.generations[warp] + 1) & epochs.GENERATION_MASK
        if epochs.generation_due(self.generations[warp]):
            due = np.zeros(len(self.generations), bool)
            due[warp] = True
            epoch, generations = np.array([self.epoch]), np.array(self.generations)
            epochs.refresh_generations(
                self._shadows(), self.base >> 32, len(due), epoch, generations, due
            )

    # -- the block barrier ----------------------------------------------------------------
    def _check_barrier(self, waiting: list[int]) -> None:
        """Every live thread of the block waits at one barrier; threads that exited count
        as arrived (the PTX ISA's exit releases a barrier the thread held up, and every
        GPU since Volta does so): a warning, an error in strict mode. Live threads at
        different barriers are an error: the GPU hangs or misbehaves."""
        exited = [t for t in range(self.n) if self.finished[t]]
        first = waiting[0]
        kind = self.requests[first][0]
        site = self._where(first)
        for t in waiting[1:]:
            if self.requests[t][0] != kind or self._where(t) != site:
                raise self._fail(
                    first,
                    "barrier-divergence",
                    "threads of one block wait at different barriers",
                    t,
                    "a thread waiting at another barrier",
                )
        if exited and kind != GRID_SYNC:
            detail = (
                f"cuda.{kind} is reached by {len(waiting)} of the block's {self.n} threads; "
                f"{len(exited)} exited without reaching it"
            )
            if self.machine.strict:
                raise self._fail(
                    first,
                    "barrier-divergence",
                    f"{detail} (strict: a barrier must be reached by every thread of the "
                    f"block, as the CUDA C++ guide says)",
                    exited[0],
                    "a thread that exited",
                )
            votes = "" if kind == "syncthreads" else "; they cast no vote"
            self.machine.warn(
                "barrier-after-exit",
                f"{detail}, which count as arrived{votes}",
                self.machine.place(first, *site),
            )

    def _answer_barrier(self, waiting: list[int]) -> list[int]:
        kind = self.requests[waiting[0]][0]
        if kind not in ("syncthreads", GRID_SYNC):
            predicates = [self._vote(t, 1) for t in waiting]
            if kind == "syncthreads_count":
                result: Any = INT64(sum(predicates))
            elif kind == "syncthreads_and":
                result = INT64(all(predicates))
            else:
                result = INT64(any(predicates))
            for t in waiting:
                self.replies[t] = result
        for t in waiting:
            self.requests[t] = None
        self.machine.settle_shared(self.name)
        self.epoch += 1
        self.generations = [0] * len(self.generations)
        if epochs.due(self.epoch):
            epochs.refresh(self._shadows(), self.base >> 32, self.epoch)
        return waiting

    def _shadows(self) -> list[Any]:
        """The block's shared arrays' shadows and the launch's global ones."""
        shadows = [a._shadow for a in self.machine._shared.values()]
        return shadows + [a._shadow for a in self.args if isinstance(a, SimArray) and a._shadow]


def _bits(value: Any) -> Any:
    """A value as match.sync compares it: a float by its bits, an integer as itself."""
    if isinstance(value, (float, np.floating)):
        kind = np.float32 if isinstance(value, np.float32) else np.float64
        return kind(value).tobytes()
    return int(value)


def _int32(bits: int) -> Any:
    """A 32-lane mask as numba's int32 result (lane 31 is the sign)."""
    return INT64(bits - (1 << 32) if bits >= 1 << 31 else bits)
