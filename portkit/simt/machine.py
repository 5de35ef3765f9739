"""The machine: runs one kernel launch, block after block, thread after thread.

Blocks run one at a time in order (x fastest; ``schedule="reversed"``: last to first,
threads too, see ``schedule.py``). A kernel that never waits (no barrier,
no warp operation) is a plain function called once per thread. A kernel that waits is
a generator per thread (see ``transform.py``); the machine runs every thread of the
block up to its next wait, in thread order, then answers the waits that can be
answered: a warp operation once every lane named in its mask has arrived, a
``syncthreads`` once every thread of the block has. The order is fixed, so the same
launch on the same inputs runs the same way every time.

Whatever cannot be answered is the kernel's bug, and is reported as such: threads of a
block waiting at different barriers, a shuffle whose mask names a lane that exited
or waits elsewhere, a lane that reads from a lane outside the mask. What GPUs run
right though the CUDA guide leaves it undefined (threads that exited before a
barrier...) is a warning, kept per launch (simt/warning_log.py; strict: an error).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from portkit.errors import KernelError
from portkit.launch.kernel_set import LaunchConfig
from portkit.launch.shared_memory import check_shared_bytes
from portkit.project.config import DEFAULT_SIM_BUDGET
from portkit.results import FailureSite
from portkit.simt.block_run import BlockRun
from portkit.simt.budget import launch_budget, where_spinning
from portkit.simt.debug import Breakpoint, DebugSession
from portkit.simt.grid_run import run_cooperative
from portkit.simt.interrupts import passes_through
from portkit.simt.intrinsics import WARP_SIZE, Dim3, SimulatedCuda
from portkit.simt.layout import Layout, memory_view, shape_of
from portkit.simt.lockstep_launch import (
    AUTO,
    LOCKSTEP,
    PER_THREAD,
    EngineChoice,
    try_lockstep,
)
from portkit.simt.memory import (
    CONST,
    GLOBAL,
    LOCAL,
    SHARED,
    Shadow,
    SimArray,
)
from portkit.simt.records import (
    ArrayRecord,
    LaunchRecord,
    Place,
    SimulationFault,
    linear_index,
    unflatten,
)
from portkit.simt.reporting import Reporting
from portkit.simt.scalars import INT64, BFloat16, as_dtype, widen
from portkit.simt.schedule import checked, in_order
from portkit.simt.second_schedule import Suspect, confirm, other, snapshot
from portkit.simt.shadow import poisoned, poisoned_bfloat16
from portkit.simt.stamps import line_of, stamp_thread
from portkit.simt.tally import AtomicTally
from portkit.simt.transform import Rewriter, SimulatedFunction
from portkit.simt.warning_log import SimWarning, WarningLog

ENGINES = (AUTO, LOCKSTEP, PER_THREAD)


class Machine(Reporting):
    """One simulated GPU: the rewritten functions, the launches they make, their records."""

    divide: Any = "ignore"  # "raise": float division by zero raises (cuda.jit(debug=True))

    def __init__(
        self,
        breakpoint: Breakpoint | None = None,
        on_block: Callable[[int, int], None] | None = None,
        engine: str | None = None,
        budget: float | None = None,
        schedule: str | None = None,
        strict: bool = False,
        lockstep_fallback: str = "allow",
    ) -> None:
        self.schedule = checked(schedule)  # the order blocks and threads run in
        # Warnings (simt/warning_log.py) are errors, as the CUDA C++ guide's letter has it.
        self.strict = strict
        self.warnings: list[SimWarning] = []  # every launch's, in launch order
        self._log = WarningLog()  # the running launch's
        self._kernel = ""  # the running launch's kernel
        # Reads racing with atomics, for the second schedule (second_schedule.py); None
        # where the launch keeps no copy of its inputs (then such a race is an error).
        self._suspects: list[Suspect] | None = None
        self.confirming = False  # this machine is a second schedule's
        # "error": a launch that falls back to the per-thread engine fails (CI).
        self.lockstep_fallback = lockstep_fallback
        # The session's choice (PORTKIT_SIMT_ENGINE) arrives as ``engine``.
        self.engine = engine or AUTO
        if self.engine not in ENGINES:
            raise KernelError(f"unknown simulator engine {self.engine!r}: one of {ENGINES}")
        self.engines: list[EngineChoice] = []  # which engine ran each launch, and why
        self._lockstep: Any = None
        self.cuda = SimulatedCuda(self)
        self.tally = AtomicTally()  # float atomic sums per element (simt/tally.py)
        self.files: dict[str, int] = {}
        self.stamp = 0
        self.breakpoint = breakpoint
        self.on_block = on_block
        self.records: list[LaunchRecord] = []
        self.blocks_per_thread = 0  # blocks the per-thread engine ran (a fault's re-run too)
        self._launched: set[str] = set()
        self.budget = DEFAULT_SIM_BUDGET if budget is None else budget  # seconds; 0: none
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
        self.thread_index = 0
        self._threads = 1
        self.finished_threads: list[bool] = []
        self._shared_bytes = 0
        self._poison_stores: list[SimulationFault] = []  # see defer_poison_store

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
        or only ``blocks`` (linear indices), in ``self.budget`` s. Returns who wrote what."""
        function = self.rewriter.rewrite(dispatcher)
        if len(args) != len(function.parameters):
            raise KernelError(
                f"kernel {name} takes {len(function.parameters)} arguments "
                f"({', '.join(function.parameters)}), launched with {len(args)}",
                FailureSite(name),
            )
        bp = self.breakpoint
        stop = bp if bp is not None and bp.kernel == name and name not in self._launched else None
        here = lambda file, line: self.place(self.thread_index, file, line)  # noqa: E731
        spinning = lambda frame: where_spinning(frame, self._lockstep, here)  # noqa: E731
        self._log, self._kernel = WarningLog(), name
        inputs = None
        if not self.confirming and stop is None and blocks is None:
            inputs = snapshot(dispatcher, args)
        self._suspects = [] if inputs is not None else None
        try:
            with launch_budget(None if stop is not None else self.budget, name, spinning):
                record = None
                if blocks is None and stop is None:
                    record = try_lockstep(self, name, dispatcher, config, args)
                    if record is not None:
                        self._launched.add(name)
                else:
                    why = "a subset of blocks (diff)" if blocks is not None else "pdb is on"
                    self.engines.append(EngineChoice(name, "per-thread", why))
                if record is None:
                    record = self.run_per_thread(name, dispatcher, config, args, blocks, stop)
            suspects, self._suspects = self._suspects, None
            if suspects and inputs is not None:
                again = Machine(engine=self.engine, budget=self.budget, schedule=other(self))
                confirm(self, again, name, dispatcher, config, args, inputs, suspects)
        finally:  # a launch that faults keeps the warnings it gave before
            self._suspects = None
            self.warnings += self._log.warnings
        record.warnings = self._log.warnings
        return record

    def run_per_thread(
        self,
        name: str,
        dispatcher: Any,
        config: LaunchConfig,
        args: Sequence[Any],
        blocks: Iterable[int] | None = None,
        stop: Breakpoint | None = None,
        seeds: Sequence[Any] | None = None,
    ) -> LaunchRecord:
        """Run the launch (or only ``blocks``) in the per-thread engine; ``seeds``: a
        ``LaneShadow`` per array whose stamps the blocks' sparse shadows start from."""
        function = self.rewriter.rewrite(dispatcher)
        record = LaunchRecord(name, config)
        values = self._arguments(function, args, record, blocks is not None, seeds)
        debug = DebugSession(stop) if stop is not None else None
        self._launched.add(name)

        cuda = self.cuda
        gx, gy, gz = config.grid
        cuda.gridDim = Dim3(gx, gy, gz)
        cuda.blockDim = Dim3(*config.block)
        self._shared_bytes = config.shared_bytes
        thread_ids = [Dim3(*unflatten(t, config.block)) for t in range(config.threads_per_block)]
        total = gx * gy * gz
        chosen = in_order(range(total) if blocks is None else sorted(set(blocks)), self.schedule)
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore", divide=self.divide):
                # A GPU computes inf - inf = NaN and wraps integer overflow silently.
                warnings.simplefilter("ignore", RuntimeWarning)
                if function.grid_syncs:  # every block at once, to meet at grid barriers
                    run_cooperative(self, name, function, values, chosen, config)
                    if self.on_block is not None:
                        self.on_block(len(chosen), len(chosen))
                for done, block in enumerate([] if function.grid_syncs else chosen, 1):
                    coords = unflatten(block, config.grid)
                    target = None
                    if stop is not None and coords == tuple(stop.block):
                        target = linear_index(stop.thread, config.block)
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

    def _arguments(
        self,
        function: SimulatedFunction,
        args: Sequence[Any],
        record: LaunchRecord,
        sparse: bool,
        seeds: Sequence[Any] | None,
    ) -> list[Any]:
        """Kernel arguments as the per-thread engine sees them; arrays get a fresh shadow,
        recorded in ``record`` (who wrote what, for ``portkit diff``)."""
        values: list[Any] = []
        for k, (parameter, arg) in enumerate(zip(function.parameters, args)):
            if isinstance(arg, np.ndarray):
                flat, layout = memory_view(arg, parameter)  # a strided view spans more
                shadow = Shadow(flat.size, sparse, seeds[k] if seeds else None)
                values.append(SimArray(flat, layout, parameter, GLOBAL, self, shadow))
                record.arrays.append(
                    ArrayRecord(parameter, flat, shadow.writes, shadow.write_lines)
                )
            else:
                values.append(widen(arg))
        return values

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
        self.enter_block(coords, {}, len(thread_ids))
        self.blocks_per_thread += 1
        threads = len(thread_ids)
        base = block << 32
        fn = function.function
        if not function.waits:
            thread = 0
            try:
                for thread in in_order(range(threads), self.schedule):
                    cuda.threadIdx = thread_ids[thread]
                    cuda.laneid = INT64(thread % WARP_SIZE)
                    self.stamp = base | thread
                    self.thread_index = thread
                    if debug is not None and thread == target:
                        debug.run(fn, *args)
                    else:
                        fn(*args)
            except KernelError:
                raise
            except Exception as exc:
                if passes_through(exc):  # a signal handler's timeout, MemoryError: not a fault
                    raise
                raise self.fault(name, exc, thread) from None
            self.settle_shared(name)
            return
        BlockRun(self, name, function, args, base, thread_ids, debug, target).run()
        self.settle_shared(name)

    def enter_block(self, coords: tuple[int, int, int], shared: dict, threads: int) -> None:
        """Make the block at ``coords`` (its shared arrays ``shared``) the running one."""
        self.cuda.blockIdx = Dim3(*coords)
        self._block, self._shared, self._threads = coords, shared, threads

    def settle_shared(self, name: str) -> None:
        """At a barrier and at a block's end: a shared element read before anyone wrote
        it, and still written by no other thread since, was read uninitialised: an
        error where its value reached global memory, else a warning (poison.py)."""
        stores, self._poison_stores = self._poison_stores, []
        if stores:
            raise stores[0]
        for array in self._shared.values():
            unwritten = array.settle_unwritten_reads()
            if unwritten is not None:
                stamp, key, detail = unwritten
                file, line = line_of(key, list(self.files))
                dims = tuple(int(v) for v in self.cuda.blockDim)
                place = Place(self._block, unflatten(stamp_thread(stamp), dims), file, line)
                if self.strict:
                    raise SimulationFault(name, "uninitialised", detail, place)
                self.warn("uninitialised-read", detail + " (the value was never used)", place)

    # -- allocations the rewritten kernels call ---------------------------------------------
    def _shared_array(self, site: int, name: str, shape: Any, dtype: Any) -> SimArray:
        dims = shape_of(shape)
        key: Any = site
        bfloat16 = dtype is BFloat16 and dims != (0,)  # numba.cuda.bf16.bfloat16: its bits
        dtype = np.dtype(np.uint16) if bfloat16 else as_dtype(dtype)
        if dims == (0,):  # dynamic shared memory: every such array aliases one buffer
            key = ("dynamic", dtype.str)
            if key not in self._shared:
                self._shared[key] = self._dynamic_view(name, dtype)
            return self._shared[key]
        array = self._shared.get(key)
        if array is None:
            size = math.prod(dims)
            static = [a for k, a in self._shared.items() if type(k) is not tuple]
            used = sum(int(a.size) * int(a.itemsize) for a in static)
            check_shared_bytes(used + size * dtype.itemsize, self._shared_bytes)
            data = poisoned_bfloat16(size) if bfloat16 else poisoned(size, dtype)
            array = SimArray(data, Layout.contiguous(dims), name, SHARED, self, Shadow(size))
            self._shared[key] = array
        return array

    def _dynamic_view(self, name: str, dtype: np.dtype) -> SimArray:
        """A dtype's view of the block's one dynamic shared buffer. Views of one item
        size share their shadow too (a float32 written, read as int32, is initialised);
        views of other sizes share the bytes only."""
        others = [a for k, a in self._shared.items() if type(k) is tuple and k[0] == "dynamic"]
        count = self._shared_bytes // dtype.itemsize
        raw = (
            others[0]._data.view(np.uint8)
            if others
            else np.full(self._shared_bytes, 0xFF, np.uint8)
        )
        data = raw[: count * dtype.itemsize].view(dtype)
        same = [a for a in others if a.dtype.itemsize == dtype.itemsize]
        shadow = same[0]._shadow if same else Shadow(data.size)
        poison = same[0]._poison if same else None
        layout = Layout.contiguous((data.size,))
        return SimArray(data, layout, name, SHARED, self, shadow, None, poison)

    def _local_array(self, site: int, name: str, shape: Any, dtype: Any) -> SimArray:
        dims = shape_of(shape)
        size = math.prod(dims)
        return SimArray(
            poisoned_bfloat16(size) if dtype is BFloat16 else poisoned(size, as_dtype(dtype)),
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
        thread = unflatten(self.thread_index, tuple(int(v) for v in self.cuda.blockDim))
        print(f"[block {self._block} thread {thread}]", *values, **options)

    def live_lanes(self) -> int:
        warp = self.thread_index // WARP_SIZE
        mask = 0
        for lane in range(WARP_SIZE):
            t = warp * WARP_SIZE + lane
            if t < self._threads and not (self.finished_threads and self.finished_threads[t]):
                mask |= 1 << lane
        return mask
