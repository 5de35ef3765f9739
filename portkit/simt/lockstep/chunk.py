"""One chunk of whole blocks run in lockstep: lane geometry, stamps, memory accesses,
allocations, barriers and warp operations.

Lanes are ordered as the per-thread engine runs threads: block after block (x
fastest), thread after thread, so an atomic's lanes in lane order are its threads in
the per-thread engine's order.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from portkit.launch.shared_memory import check_shared_bytes
from portkit.simt import epochs
from portkit.simt.lockstep.arrays import LaneArray
from portkit.simt.lockstep.lane_shadow import LaneShadow
from portkit.simt.lockstep.lanes import Lanes, is_lanes, truth
from portkit.simt.lockstep.vectorize import Unsupported
from portkit.simt.memory import CONST, LOCAL, SHARED
from portkit.simt.scalars import BFloat16, as_dtype
from portkit.simt.shadow import poisoned, poisoned_bfloat16
from portkit.simt.stamps import EPOCH_MASK, EPOCH_SHIFT, THREAD_BITS

WARP = 32
FULL_MASK = 0xFFFFFFFF
BARRIERS = {"syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or"}


class Chunk(Lanes):
    """Blocks ``first .. first + blocks - 1`` of a launch, every thread a lane."""

    def __init__(
        self,
        first: int,
        blocks: int,
        threads: int,
        shared_bytes: int,
        files: dict[str, int],
    ) -> None:
        super().__init__(blocks * threads)
        geometry = _geometry(blocks, threads)
        self.threads = threads
        self.blocks = blocks
        self.block_local, self.thread, self.warp, self.lane_in_warp = geometry
        self.block = self.block_local + first  # linear block index in the grid
        self.first = first
        self.global_shadows: list[LaneShadow] = []  # set by the engine: the arguments'
        warps_per_block = -(-threads // WARP)
        self.warps_per_block = warps_per_block
        self.epoch = np.zeros(blocks, np.int64)
        self.generation = np.zeros(blocks * warps_per_block, np.int64)
        self.shared_bytes = shared_bytes
        self.files = files
        self._shared: dict[Any, LaneArray] = {}
        self._const: dict[int, LaneArray] = {}
        self._atomics: dict[int, str | None] = {}  # array -> unordered kind (or None)
        self.kernel_waits = False  # set by the engine: the kernel has barriers or warp ops
        self.reversed = False  # set by the engine: atomics run their lanes last to first
        self._base_stamps = self.block << 32 | self.thread
        self._stamps: np.ndarray | None = None
        self._active_stamps: tuple[np.ndarray, np.ndarray] | None = None
        self._codes: np.ndarray | None = None
        self._active_codes: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def full_lanes(self) -> bool:
        return self.active_count == self.n

    # -- stamps --------------------------------------------------------------------------
    def stamps(self) -> np.ndarray:
        if self._stamps is None:
            epoch = (self.epoch[self.block_local] & EPOCH_MASK) << EPOCH_SHIFT
            self._stamps = self._base_stamps | epoch | self.generation[self.warp] << THREAD_BITS
        return self._stamps

    def active_stamps(self) -> np.ndarray:
        cached = self._active_stamps
        if cached is not None and cached[0] is self.mask:
            return cached[1]
        stamps = self.stamps() if self.full_lanes else self.stamps()[self.mask]
        self._active_stamps = (self.mask, stamps)
        return stamps

    def active_codes(self) -> np.ndarray:
        """The active lanes' stamps as int32 thread codes (``LaneShadow.use_codes``: one
        more than the thread's linear index in the grid; a kernel that never waits has
        no epochs)."""
        cached = self._active_codes
        if cached is not None and cached[0] is self.mask:
            return cached[1]
        if self._codes is None:
            self._codes = (self.block * self.threads + self.thread + 1).astype(np.int32)
        codes = self._codes if self.full_lanes else self._codes[self.mask]
        self._active_codes = (self.mask, codes)
        return codes

    def count_atomic(self, array: LaneArray, unordered: str | None = None) -> bool:
        """Atomics keep thread order only if each array sees one atomic statement per chunk
        (lanes in order are then threads in order); a second one runs per thread, unless
        every one on the array is of one ``unordered`` kind (``unordered.py``). Whether
        an atomic ran on the array in this chunk before."""
        key = id(array.data)
        if key in self._atomics:
            if unordered is None or self._atomics[key] != unordered:
                raise Unsupported("two atomic statements on one array (their order is per thread)")
            return True
        self._atomics[key] = unordered
        return False

    # -- memory ------------------------------------------------------------------------------
    def load(self, array: Any, index: Any) -> Any:
        if isinstance(array, LaneArray):
            return array.load(index, sys._getframe(1))
        items = index if type(index) is tuple else (index,)
        if any(is_lanes(i) for i in items):
            if isinstance(array, tuple) and len(items) == 1:
                values = np.asarray(array)
                if values.dtype.kind in "iufb" and values.ndim == 1:
                    i = items[0]
                    if np.any(((i < 0) | (i >= len(array))) & self.mask):
                        raise Unsupported("an index past a tuple's end")
                    return values[np.where(self.mask, i, 0)]
            raise Unsupported(f"indexing a {type(array).__name__} by a per-thread index")
        return array[index]

    def store(self, array: Any, index: Any, value: Any) -> None:
        if not isinstance(array, LaneArray):
            raise Unsupported(f"assigning into a {type(array).__name__}")
        array.store(index, value, sys._getframe(1))

    def shared(self, site: int, name: str, shape: Any, dtype: Any) -> LaneArray:
        dims = _shape(shape)
        element = dtype
        dtype = _element_type(dtype, dynamic=dims == (0,))
        key: Any = site
        if dims == (0,):
            key = ("dynamic", dtype.str)
            if key not in self._shared:
                self._shared[key] = self._dynamic_view(dtype)
            return self._shared[key]
        array = self._shared.get(key)
        if array is None:
            size = math.prod(dims)
            static = [a for k, a in self._shared.items() if type(k) is not tuple]
            used = sum(int(a.size) * a.data.dtype.itemsize for a in static)
            check_shared_bytes(used + size * dtype.itemsize, self.shared_bytes)
            data = _poisoned(size * self.blocks, element, dtype)
            shape, strides = _contiguous(dims)
            offset = self.block_local * size
            array = LaneArray(
                data, shape, strides, offset, SHARED, self, LaneShadow(size * self.blocks)
            )
            self._shared[key] = array
        return array

    def _dynamic_view(self, dtype: np.dtype) -> LaneArray:
        """As ``Machine._dynamic_view``, for every block of the chunk at once."""
        if self.shared_bytes % dtype.itemsize:
            raise Unsupported("dynamic shared bytes not a multiple of the item size")
        others = [a for k, a in self._shared.items() if type(k) is tuple and k[0] == "dynamic"]
        total = self.shared_bytes * self.blocks
        raw = others[0].data.view(np.uint8) if others else np.full(total, 0xFF, np.uint8)
        data = raw.view(dtype)
        size = self.shared_bytes // dtype.itemsize
        same = [a.shadow for a in others if a.data.dtype.itemsize == dtype.itemsize]
        shadow = same[0] if same else LaneShadow(data.size)
        offset = self.block_local * size
        return LaneArray(data, (size,), (1,), offset, SHARED, self, shadow)

    def local(self, site: int, name: str, shape: Any, dtype: Any) -> LaneArray:
        dims = _shape(shape)
        size = math.prod(dims)
        data = _poisoned(size * self.n, dtype, _element_type(dtype))
        shape, strides = _contiguous(dims)
        offset = np.arange(self.n, dtype=np.int64) * size
        written = np.zeros(size * self.n, bool)
        return LaneArray(data, shape, strides, offset, LOCAL, self, None, written)

    def const(self, site: int, name: str, source: Any) -> LaneArray:
        array = self._const.get(site)
        if array is None:
            data = np.array(source, copy=True)
            shape, strides = _contiguous(data.shape)
            array = LaneArray(data.reshape(-1), shape, strides, 0, CONST, self)
            self._const[site] = array
        return array

    # -- barriers and warp operations -----------------------------------------------------
    def wait(self, kind: str, *args: Any) -> Any:
        if kind in BARRIERS:
            return self._barrier(kind, *args)
        return self._warp(kind, *args)

    def _barrier(self, kind: str, predicate: Any = None) -> Any:
        mask = self.mask
        present = np.bincount(self.block_local[mask], minlength=self.blocks)
        if np.any((present != 0) & (present != self.threads)):
            raise Unsupported(f"cuda.{kind} not reached by every thread of a block")
        blocks = present != 0
        result: Any = None
        if kind != "syncthreads":
            votes = np.broadcast_to(truth(predicate), (self.n,)) & mask
            counts = np.bincount(self.block_local, weights=votes, minlength=self.blocks)
            counts = counts.astype(np.int64)
            if kind == "syncthreads_and":
                counts = (counts == self.threads).astype(np.int64)
            elif kind == "syncthreads_or":
                counts = (counts > 0).astype(np.int64)
            result = counts[self.block_local]
        self.epoch[blocks] += 1
        for local in np.flatnonzero(blocks & (self.epoch % epochs.REFRESH == 0)).tolist():
            shadows = [a.shadow for a in self._shared.values()] + self.global_shadows
            epochs.refresh(shadows, local + self.first, int(self.epoch[local]))
        warps = np.repeat(blocks, self.warps_per_block)
        self.generation[warps] = 0
        self._stamps = None
        self._active_stamps = None
        return result

    def _warp(self, kind: str, mask_value: Any = FULL_MASK, *args: Any) -> Any:
        if is_lanes(mask_value):
            values = mask_value[self.mask]
            if values.size == 0 or np.any(values != values[0]):
                raise Unsupported(f"cuda.{kind} with masks that differ between threads")
            mask_value = values[0]
        member = int(mask_value) & FULL_MASK
        active = self.mask
        warps = self.warp[active]
        bits = np.bincount(
            warps,
            weights=np.ldexp(1.0, self.lane_in_warp[active].astype(np.int32)),
            minlength=self.generation.size,
        ).astype(np.int64)
        taking = np.bincount(warps, minlength=self.generation.size) > 0
        lanes_here = np.minimum(
            WARP, self.threads - (np.arange(self.generation.size) % self.warps_per_block) * WARP
        )
        exists = (np.int64(1) << lanes_here) - 1
        if np.any(taking & ((bits != member) | ((member & ~exists) != 0))):
            raise Unsupported(f"cuda.{kind}: the active lanes of a warp are not its mask")
        result = self._answer(kind, member, active, *args)
        self.generation[taking] = (self.generation[taking] + 1) & epochs.GENERATION_MASK
        due = taking & (self.generation % epochs.GENERATION_REFRESH == 0)
        if due.any():
            shadows = [a.shadow for a in self._shared.values()] + self.global_shadows
            epochs.refresh_generations(
                shadows, self.first, self.warps_per_block, self.epoch, self.generation, due
            )
        self._stamps = None
        self._active_stamps = None
        return result

    def _answer(self, kind: str, member: int, active: np.ndarray, *args: Any) -> Any:
        if kind == "syncwarp":
            return None
        if kind in ("ballot_sync", "any_sync", "all_sync", "eq_sync"):
            votes = np.broadcast_to(truth(args[0]), (self.n,)) & active
            count = np.bincount(self.warp, weights=votes, minlength=self.generation.size)
            if kind == "ballot_sync":
                weights = np.ldexp(1.0, self.lane_in_warp.astype(np.int32)) * votes
                ballots = np.bincount(self.warp, weights=weights, minlength=count.size)
                ballots = ballots.astype(np.int64)
                ballots = np.where(ballots >= 1 << 31, ballots - (1 << 32), ballots)
                return ballots[self.warp]
            members = bin(member).count("1")
            if kind == "any_sync":
                answer = count > 0
            elif kind == "all_sync":
                answer = count == members
            else:
                answer = (count == 0) | (count == members)
            return answer[self.warp]
        value, amount = args
        lane = self.lane_in_warp
        if is_lanes(amount):
            amount = amount.astype(np.int64)
        if kind == "shfl_sync":
            source = np.broadcast_to(amount % WARP, lane.shape)
        elif kind == "shfl_up_sync":
            source = np.where(lane - amount >= 0, lane - amount, lane)
        elif kind == "shfl_down_sync":
            source = np.where(lane + amount < WARP, lane + amount, lane)
        else:
            source = lane ^ amount
            source = np.where(source < WARP, source, lane)
        inside = (np.int64(member) >> source) & 1
        if np.any((inside == 0) & active):
            raise Unsupported(f"cuda.{kind} reads a lane outside its mask")
        if not is_lanes(value):
            return value
        positions = np.where(active, self.warp * 0 + (np.arange(self.n) - lane) + source, 0)
        return value[positions]


_GEOMETRY: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}


def _geometry(blocks: int, threads: int) -> tuple[np.ndarray, ...]:
    """Block in chunk, thread in block, warp in chunk and lane in warp of every lane
    (read-only, shared by the chunks of one shape)."""
    key = (blocks, threads)
    if key not in _GEOMETRY:
        if len(_GEOMETRY) > 8:
            _GEOMETRY.clear()
        lane = np.arange(blocks * threads, dtype=np.int64)
        block_local, thread = lane // threads, lane % threads
        warp = block_local * -(-threads // WARP) + thread // WARP
        arrays = (block_local, thread, warp, thread % WARP)
        for a in arrays:
            a.setflags(write=False)
        _GEOMETRY[key] = arrays
    return _GEOMETRY[key]


def _shape(shape: Any) -> tuple[int, ...]:
    items = shape if isinstance(shape, tuple) else (shape,)
    if any(is_lanes(i) for i in items):
        raise Unsupported("an allocation whose shape differs between threads")
    return tuple(int(i) for i in items)


def _contiguous(dims: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    strides, step = [], 1
    for n in reversed(dims):
        strides.append(step)
        step *= n
    return tuple(dims), tuple(reversed(strides))


def _is_bfloat16(dtype: Any) -> bool:
    """Whether an allocation's dtype is numba.cuda.bf16.bfloat16 (its lane version)."""
    return getattr(dtype, "per_thread", None) is BFloat16


def _element_type(dtype: Any, dynamic: bool = False) -> np.dtype:
    """A shared or local array's NumPy type (bfloat16: its bits, uint16); one the
    per-thread engine holds as Python objects (dynamic shared bfloat16) is refused."""
    if _is_bfloat16(dtype) and not dynamic:
        return np.dtype(np.uint16)
    try:
        found = as_dtype(dtype)
    except TypeError:
        found = np.dtype(object)
    if found.kind == "O":
        raise Unsupported(f"a shared or local array of {getattr(dtype, '__name__', dtype)}")
    return found


def _poisoned(size: int, element: Any, dtype: np.dtype) -> np.ndarray:
    return poisoned_bfloat16(size) if _is_bfloat16(element) else poisoned(size, dtype)
