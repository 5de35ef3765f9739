"""Run one launch in lockstep, chunk after chunk of whole blocks.

``LockstepEngine.launch`` returns True when the launch ran to the end with every
check passing; it raises ``Unsupported`` (with the reason) when the kernel uses
something it does not vectorise or when a check failed, after undoing what the failed
chunk wrote (``journal.py``): the chunks before it stand, and the machine runs the
launch per thread from that chunk on (``lockstep_launch.py``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from portkit.simt.interrupts import passes_through
from portkit.simt.lockstep.arrays import LaneArray
from portkit.simt.lockstep.chunk import Chunk
from portkit.simt.lockstep.journal import Journal, Tape
from portkit.simt.lockstep.lanes import UNDEF
from portkit.simt.lockstep.shims import LaneCuda, LaneMath, lane_builtins
from portkit.simt.lockstep.vectorize import Unsupported, Vectorizer, builtin_namespace
from portkit.simt.memory import GLOBAL
from portkit.simt.scalars import widen
from portkit.simt.schedule import FORWARD, REVERSED, in_order
from portkit.simt.tally import AtomicTally

# Lanes per chunk: big enough that NumPy's per-call overhead vanishes, small enough
# that a chunk's arrays stay in cache-friendly sizes and memory stays bounded.
CHUNK_LANES = 1 << 16


class _ChunkProxy:
    """What the rewritten code calls ``__pk_ctx``: forwards to the current chunk."""

    def __init__(self) -> None:
        self.chunk: Chunk | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.chunk, name)


class LockstepEngine:
    """The lockstep engine of one ``Machine``: its rewritten kernels and their launches."""

    def __init__(self, rewriter: Any, files: dict[str, int]) -> None:
        self._proxy = _ChunkProxy()
        self.cuda = LaneCuda(self._proxy)
        self.files = files
        helpers: dict[str, Any] = {
            "__pk_ctx": self._proxy,
            "__pk_U": UNDEF,
            "__pk_cuda": self.cuda,
            "__pk_math": LaneMath(self._proxy),
            **builtin_namespace(),
            **lane_builtins(self._proxy),
        }
        self.vectorizer = Vectorizer(rewriter, self._proxy, helpers)
        self._refused: dict[int, str] = {}
        # Float atomic sums of the launch running now; the machine merges them once the
        # launch ran to the end (a launch re-run per thread counts them again).
        self.tally = AtomicTally()
        self.failed: range | None = None  # the blocks of the chunk a failed check stopped
        self.journal_saved = 0  # elements the last chunk saved to undo itself (tests)
        self._unwritten: dict[str, frozenset[int]] = {}  # of the kernel launched now

    def refused(self, dispatcher: Any) -> str | None:
        """Why this kernel cannot run in lockstep at all (known before a launch), or None."""
        key = id(dispatcher)
        if key not in self._refused:
            try:
                self.vectorizer.rewrite(dispatcher)
                self._refused[key] = ""
            except Unsupported as exc:
                self._refused[key] = str(exc)
            except Exception as exc:  # anything the rewrite did not foresee: per thread
                if passes_through(exc):
                    raise
                self._refused[key] = f"not vectorised: {type(exc).__name__}: {exc}"
        return self._refused[key] or None

    def launch(
        self,
        dispatcher: Any,
        config: Any,
        args: Sequence[Any],
        shadows: Sequence[Any],
        schedule: str = FORWARD,
        blocks: range | None = None,
    ) -> None:
        """Run every block (or ``blocks``, a run of whole chunks); ``shadows[k]`` is the
        ``LaneShadow`` of array ``k`` (filled with the per-thread engine's stamps), None
        for a scalar. ``schedule="reversed"`` runs the chunks last to first and each
        atomic's lanes last to first: the threads' atomics in the per-thread engine's
        reversed order. When a check fails, ``failed`` holds the blocks of the chunk that
        ran then."""
        self.failed, self.journal_saved = None, 0
        vector = self.vectorizer.rewrite(dispatcher)
        function, self._unwritten = vector.function, vector.unwritten
        rewritten = self.vectorizer._rewriter.rewrite(dispatcher)
        try:
            self._run_chunks(function, rewritten, config, args, shadows, schedule, blocks)
        finally:
            self._proxy.chunk = None
            self.vectorizer.bind(self._proxy)

    @property
    def running_chunk(self) -> Chunk | None:
        """The chunk a launch is running now (None between launches)."""
        return self._proxy.chunk

    def _run_chunks(
        self,
        function: Any,
        rewritten: Any,
        config: Any,
        args: Sequence[Any],
        shadows: Sequence[Any],
        schedule: str,
        chosen: range | None,
    ) -> None:
        waits, parameters = rewritten.waits, rewritten.parameters
        threads = config.threads_per_block
        total = int(np.prod(config.grid))
        chosen = range(total) if chosen is None else chosen
        per_chunk = max(1, CHUNK_LANES // threads)
        if not waits:  # no epochs, no generations: a stamp is the thread's index
            for shadow in shadows:
                if shadow is not None:
                    shadow.use_codes(threads, total * threads)
        tape = Tape()  # the chunks' undo records, one after another in the same memory
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            for first in in_order(range(chosen.start, chosen.stop, per_chunk), schedule):
                blocks = min(per_chunk, chosen.stop - first)
                self.failed = range(first, first + blocks)
                journal, tally = Journal(first, blocks, tape), AtomicTally()
                chunk = Chunk(first, blocks, threads, config.shared_bytes, self.files)
                chunk.kernel_waits = waits
                chunk.reversed = schedule == REVERSED
                self._proxy.chunk = chunk
                self.vectorizer.bind(chunk)
                self.cuda.set_chunk(chunk, config.block, config.grid)
                values = [
                    self._argument(a, s, chunk, p) for a, s, p in zip(args, shadows, parameters)
                ]
                for value, parameter in zip(values, parameters):
                    if isinstance(value, LaneArray):
                        value.journal, value.tally = journal, tally
                        value.unwritten = self._unwritten.get(parameter) == {value.ndim}
                chunk.global_shadows = [
                    v.shadow for v in values if isinstance(v, LaneArray) and v.shadow
                ]
                try:
                    function(*values)
                except Exception as exc:
                    journal.undo()  # the arrays and shadows as the chunks before left them
                    if isinstance(exc, Unsupported) or passes_through(exc):
                        raise  # a timeout from a signal handler, MemoryError: no re-run
                    raise Unsupported(f"{type(exc).__name__}: {exc}") from None
                self.tally.merge(tally)
                self.journal_saved = max(self.journal_saved, journal.saved)
                self.failed = None

    def _argument(self, arg: Any, shadow: Any, chunk: Chunk, parameter: str) -> Any:
        if isinstance(arg, np.ndarray):
            from portkit.simt.layout import memory_view

            flat, layout = memory_view(arg, parameter)
            array = LaneArray(
                flat,
                layout.shape,
                layout.strides,
                0,
                GLOBAL,
                chunk,
                shadow,
            )
            return array
        return widen(arg)
