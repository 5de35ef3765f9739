"""The machine: runs one kernel launch, block after block, thread after thread.

Blocks run one at a time in order (x fastest). A kernel that never waits (no barrier,
no warp operation) is a plain function called once per thread. A kernel that waits is
a generator per thread (see ``transform.py``); the machine runs every thread of the
block up to its next wait, in thread order, then answers the waits that can be
answered: a warp operation once every lane named in its mask has arrived, a
``syncthreads`` once every thread of the block has. The order is fixed, so the same
launch on the same inputs runs the same way every time.

Whatever cannot be answered is the kernel's bug, and is reported as such: a barrier
some threads of the block never reach, a shuffle whose mask names a lane that exited
or waits elsewhere, a lane that reads from a lane outside the mask.
"""

from __future__ import annotations

import linecache
import math
import traceback
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from portkit.errors import KernelError
from portkit.launch.kernel_set import LaunchConfig
from portkit.simt.debug import Breakpoint, DebugSession
from portkit.simt.intrinsics import WARP_SIZE, Dim3, SimulatedCuda
from portkit.simt.memory import (
    CONST,
    EPOCH_MASK,
    EPOCH_SHIFT,
    GLOBAL,
    LOCAL,
    SHARED,
    THREAD_BITS,
    Layout,
    MemoryFault,
    Shadow,
    SimArray,
    line_of,
    stamp_block,
    stamp_thread,
)
from portkit.simt.scalars import INT64, as_dtype, widen
from portkit.simt.transform import Rewriter, SimulatedFunction

FULL_MASK = 0xFFFFFFFF
BARRIERS = ("syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or")
_DONE = object()  # a finished thread's request


@dataclass(frozen=True)
class Place:
    """A thread and the source line it was at."""

    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    file: str
    line: int

    @property
    def source(self) -> str:
        return linecache.getline(self.file, self.line).strip()

    def describe(self) -> str:
        return f"block {self.block}, thread {self.thread}, {self.file}:{self.line}: {self.source}"


class SimulationFault(KernelError):
    """A kernel bug the simulator caught, with where it happened."""

    def __init__(
        self,
        kernel: str,
        kind: str,
        detail: str,
        place: Place | None,
        other: Place | None = None,
        other_what: str = "",
    ) -> None:
        lines = [f"kernel {kernel}: {detail}"]
        if place is not None:
            lines.append(f"  at {place.describe()}")
        if other is not None:
            lines.append(f"  {other_what or 'other'}: {other.describe()}")
        super().__init__("\n".join(lines))
        self.kernel, self.kind, self.detail, self.place, self.other = (
            kernel,
            kind,
            detail,
            place,
            other,
        )


@dataclass
class ArrayRecord:
    """Who last wrote each element of one global array in one launch."""

    name: str
    data: np.ndarray  # the array's memory (a view of the tensor's storage)
    writes: Any  # array('q') of stamps, -1 where nobody wrote
    write_lines: Any


@dataclass
class LaunchRecord:
    kernel: str
    config: LaunchConfig
    arrays: list[ArrayRecord] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def coordinates(self, stamp: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(block, thread) of a write stamp."""
        return (
            _unflatten(stamp_block(stamp), self.config.grid),
            _unflatten(stamp_thread(stamp), self.config.block),
        )

    def line(self, key: int) -> tuple[str, int]:
        return line_of(key, self.files)


def _unflatten(linear: int, dims: tuple[int, int, int]) -> tuple[int, int, int]:
    x, y = dims[0], dims[1]
    return (linear % x, (linear // x) % y, linear // (x * y))


class Machine:
    """One simulated GPU: the rewritten functions, the launches they make, their records."""

    def __init__(
        self,
        breakpoint: Breakpoint | None = None,
        on_block: Callable[[int, int], None] | None = None,
    ) -> None:
        self.cuda = SimulatedCuda(self)
        self.files: dict[str, int] = {}
        self.stamp = 0
        self.breakpoint = breakpoint
        self.on_block = on_block
        self.records: list[LaunchRecord] = []
        self._launched: set[str] = set()
        self.rewriter = Rewriter(
            self.cuda,
            self._print,
            {
                "__pk_shared": self._shared_array,
                "__pk_local": self._local_array,
                "__pk_const": self._const_array,
            },
        )
        self._reset_block_state()

    def _reset_block_state(self) -> None:
        self._shared: dict[Any, SimArray] = {}
        self._const: dict[int, SimArray] = {}
        self._block = (0, 0, 0)
        self._thread = 0
        self._threads = 1
        self._finished: list[bool] = []
        self._shared_bytes = 0

    # -- launching ----------------------------------------------------------------------
    def launch(
        self,
        name: str,
        dispatcher: Any,
        config: LaunchConfig,
        args: Sequence[Any],
        blocks: Iterable[int] | None = None,
    ) -> LaunchRecord:
        """Run ``dispatcher``'s kernel with ``args`` (NumPy arrays and scalars), every block
        or only ``blocks`` (linear indices). Returns who wrote what."""
        function = self.rewriter.rewrite(dispatcher)
        if len(args) != len(function.parameters):
            raise KernelError(
                f"kernel {name} takes {len(function.parameters)} arguments "
                f"({', '.join(function.parameters)}), launched with {len(args)}"
            )
        record = LaunchRecord(name, config)
        values = []
        for parameter, arg in zip(function.parameters, args):
            if isinstance(arg, np.ndarray):
                shadow = Shadow(arg.size, sparse=blocks is not None)
                flat = arg.reshape(-1)
                values.append(
                    SimArray(flat, Layout.contiguous(arg.shape), parameter, GLOBAL, self, shadow)
                )
                record.arrays.append(
                    ArrayRecord(parameter, flat, shadow.writes, shadow.write_lines)
                )
            else:
                values.append(widen(arg))
        debug = None
        bp = self.breakpoint
        if bp is not None and bp.kernel == name and name not in self._launched:
            debug = DebugSession(bp)
        self._launched.add(name)

        cuda = self.cuda
        gx, gy, gz = config.grid
        cuda.gridDim = Dim3(gx, gy, gz)
        cuda.blockDim = Dim3(*config.block)
        self._shared_bytes = config.shared_bytes
        thread_ids = [Dim3(*_unflatten(t, config.block)) for t in range(config.threads_per_block)]
        total = gx * gy * gz
        chosen = range(total) if blocks is None else sorted(set(blocks))
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                # A GPU computes inf - inf = NaN and wraps integer overflow silently.
                warnings.simplefilter("ignore", RuntimeWarning)
                for done, block in enumerate(chosen, 1):
                    coords = _unflatten(block, config.grid)
                    target = None
                    if debug is not None and coords == tuple(bp.block):
                        target = linear_index(bp.thread, config.block)
                    self._run_block(
                        name,
                        function,
                        values,
                        block,
                        coords,
                        thread_ids,
                        debug if target is not None else None,
                        target,
                    )
                    if self.on_block is not None:
                        self.on_block(done, len(chosen))
        finally:
            if debug is not None:
                debug.finish()
            record.files = list(self.files)
            self._reset_block_state()
        self.records.append(record)
        return record

    # -- one block ------------------------------------------------------------------------
    def _run_block(
        self,
        name: str,
        function: SimulatedFunction,
        args: list[Any],
        block: int,
        coords: tuple[int, int, int],
        thread_ids: list[Dim3],
        debug: DebugSession | None,
        target: int | None,
    ) -> None:
        cuda = self.cuda
        cuda.blockIdx = Dim3(*coords)
        self._block = coords
        self._shared = {}
        threads = len(thread_ids)
        self._threads = threads
        base = block << 32
        fn = function.function
        if not function.waits:
            thread = 0
            try:
                for thread in range(threads):
                    cuda.threadIdx = thread_ids[thread]
                    cuda.laneid = INT64(thread % WARP_SIZE)
                    self.stamp = base | thread
                    self._thread = thread
                    if thread == target:
                        debug.run(fn, *args)
                    else:
                        fn(*args)
            except KernelError:
                raise
            except Exception as exc:
                raise self._fault(name, exc, thread) from None
            return
        _BlockRun(self, name, function, args, base, thread_ids, debug, target).run()

    # -- allocations the rewritten kernels call ---------------------------------------------
    def _shared_array(self, site: int, name: str, shape: Any, dtype: Any) -> SimArray:
        dims = _shape(shape)
        key: Any = site
        dtype = as_dtype(dtype)
        if dims == (0,):  # dynamic shared memory: every such array aliases one buffer
            key = ("dynamic", dtype.str)
            dims = (self._shared_bytes // dtype.itemsize,)
        array = self._shared.get(key)
        if array is None:
            size = math.prod(dims)
            array = SimArray(
                _poisoned(size, dtype), Layout.contiguous(dims), name, SHARED, self, Shadow(size)
            )
            self._shared[key] = array
        return array

    def _local_array(self, site: int, name: str, shape: Any, dtype: Any) -> SimArray:
        dims = _shape(shape)
        size = math.prod(dims)
        return SimArray(
            _poisoned(size, as_dtype(dtype)),
            Layout.contiguous(dims),
            name,
            LOCAL,
            self,
            None,
            bytearray(size),
        )

    def _const_array(self, site: int, name: str, source: Any) -> SimArray:
        array = self._const.get(site)
        if array is None:
            data = np.array(source, copy=True)
            array = SimArray(data.reshape(-1), Layout.contiguous(data.shape), name, CONST, self)
            self._const[site] = array
        return array

    def _print(self, *values: Any, **options: Any) -> None:
        thread = _unflatten(self._thread, tuple(int(v) for v in self.cuda.blockDim))
        print(f"[block {self._block} thread {thread}]", *values, **options)

    def live_lanes(self) -> int:
        warp = self._thread // WARP_SIZE
        mask = 0
        for lane in range(WARP_SIZE):
            t = warp * WARP_SIZE + lane
            if t < self._threads and not (self._finished and self._finished[t]):
                mask |= 1 << lane
        return mask

    # -- reporting ------------------------------------------------------------------------
    def place(self, thread: int, file: str, line: int) -> Place:
        dims = tuple(int(v) for v in self.cuda.blockDim)
        return Place(self._block, _unflatten(thread, dims), file, line)

    def _fault(self, name: str, exc: BaseException, thread: int) -> KernelError:
        files = set(self.rewriter.files)
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename in files]
        place = self.place(thread, frames[-1].filename, frames[-1].lineno) if frames else None
        if isinstance(exc, MemoryFault):
            other = other_what = None
            if exc.other is not None:
                stamp, key = exc.other
                file, line = line_of(key, list(self.files))
                dims = tuple(int(v) for v in self.cuda.blockDim)
                grid = tuple(int(v) for v in self.cuda.gridDim)
                other = Place(
                    _unflatten(stamp_block(stamp), grid),
                    _unflatten(stamp_thread(stamp), dims),
                    file,
                    line,
                )
                other_what = "the other access"
            detail = exc.detail
            if exc.kind == "race":
                detail = f"data race: {detail} with no barrier between them"
            return SimulationFault(name, exc.kind, detail, place, other, other_what or "")
        message = f"{type(exc).__name__}: {exc}"
        return SimulationFault(name, "exception", f"raised {message}", place)


def linear_index(thread: tuple[int, int, int], dims: tuple[int, int, int]) -> int:
    """The x-fastest linear index of a block in a grid, or of a thread in a block."""
    return thread[0] + thread[1] * dims[0] + thread[2] * dims[0] * dims[1]


def _shape(shape: Any) -> tuple[int, ...]:
    items = shape if isinstance(shape, tuple) else (shape,)
    return tuple(int(i) for i in items)


def _poisoned(size: int, dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "f":
        return np.full(size, np.nan, dtype)
    return np.full(size, 0x5A5A5A5A5A5A5A5A, np.uint64).astype(dtype)


class _BlockRun:
    """One block of a kernel that waits: generators, barriers and warp operations."""

    def __init__(
        self,
        machine: Machine,
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
        self.threads = [function.function(*args) for _ in range(self.n)]
        self.replies: list[Any] = [None] * self.n
        self.requests: list[Any] = [None] * self.n
        self.finished = [False] * self.n
        self.epoch = 0
        self.generations = [0] * ((self.n + WARP_SIZE - 1) // WARP_SIZE)
        machine._finished = self.finished

    def run(self) -> None:
        runnable = list(range(self.n))
        while True:
            for thread in runnable:
                self._resume(thread)
            runnable = self._answer_warp_operations()
            if runnable:
                continue
            waiting = [t for t in range(self.n) if not self.finished[t]]
            if not waiting:
                return
            runnable = self._answer_barrier(waiting)

    def _resume(self, thread: int) -> None:
        machine = self.machine
        cuda = machine.cuda
        cuda.threadIdx = self.thread_ids[thread]
        cuda.laneid = INT64(thread % WARP_SIZE)
        machine._thread = thread
        machine.stamp = (
            self.base
            | (self.epoch & EPOCH_MASK) << EPOCH_SHIFT
            | self.generations[thread // WARP_SIZE] << THREAD_BITS
            | thread
        )
        generator = self.threads[thread]
        reply, self.replies[thread] = self.replies[thread], None
        try:
            if thread == self.target:
                self.requests[thread] = self.debug.run(generator.send, reply)
            else:
                self.requests[thread] = generator.send(reply)
        except StopIteration:
            self.finished[thread] = True
            self.requests[thread] = _DONE
        except KernelError:
            raise
        except Exception as exc:
            raise machine._fault(self.name, exc, thread) from None

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

    def _answer(self, kind: str, group: list[int], warp_start: int) -> None:
        requests, replies = self.requests, self.replies
        if kind == "syncwarp":
            pass
        elif kind in ("ballot_sync", "any_sync", "all_sync"):
            votes = {t: bool(requests[t][2]) for t in group}
            if kind == "ballot_sync":
                bits = sum(1 << (t - warp_start) for t, v in votes.items() if v)
                result: Any = INT64(bits - (1 << 32) if bits >= 1 << 31 else bits)  # int32
            elif kind == "any_sync":
                result = np.bool_(any(votes.values()))
            else:
                result = np.bool_(all(votes.values()))
            for t in group:
                replies[t] = result
        elif kind == "eq_sync":
            votes = [bool(requests[t][2]) for t in group]  # numba votes on value != 0
            same = np.bool_(all(v == votes[0] for v in votes))
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
        self.generations[warp] = (self.generations[warp] + 1) & 0xFF

    # -- the block barrier ----------------------------------------------------------------
    def _answer_barrier(self, waiting: list[int]) -> list[int]:
        exited = [t for t in range(self.n) if self.finished[t]]
        first = waiting[0]
        kind = self.requests[first][0]
        if exited:
            raise self._fail(
                first,
                "barrier-divergence",
                f"cuda.{kind} is reached by {len(waiting)} of the block's {self.n} threads; "
                f"{len(exited)} exited without reaching it (a barrier must be reached by "
                f"every thread of the block, or the GPU hangs or misbehaves)",
                exited[0],
                "a thread that exited",
            )
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
        if kind != "syncthreads":
            predicates = [bool(self.requests[t][1]) for t in waiting]
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
        self.epoch += 1
        self.generations = [0] * len(self.generations)
        return waiting
