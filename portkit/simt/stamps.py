"""Stamps: who touched a memory element and when, packed in one int64, and the line
keys that name where in the source. Memory shadows, the two engines, the epoch refresh
and ``portkit diff``'s writer record all read and write this one encoding."""

from __future__ import annotations

from collections.abc import Sequence

# A stamp names who touched an element and when, in one int64:
#   block << 32 | barrier epoch << 19 | warp sync generation << 11 | thread
# The epoch counts the block's syncthreads; the generation counts the completed warp
# operations (shuffles, syncwarp...) of the thread's warp, which order lanes of one warp.
THREAD_BITS = 11
THREAD_MASK = (1 << THREAD_BITS) - 1
GENERATION_BITS = 8
EPOCH_SHIFT = THREAD_BITS + GENERATION_BITS
EPOCH_MASK = (1 << (32 - EPOCH_SHIFT)) - 1
NOBODY = -1
LINE_BITS = 22  # a line key is file << 22 | line


def ordered(other: int, me: int, cross_block: bool) -> bool:
    """Whether an access stamped ``other`` happens before one stamped ``me`` (so the two
    cannot race): a barrier or a warp operation separates them, or one thread made both."""
    if (other >> 32) != (me >> 32):
        return not cross_block
    if (other >> EPOCH_SHIFT) != (me >> EPOCH_SHIFT):
        return True
    other_thread, my_thread = other & THREAD_MASK, me & THREAD_MASK
    if other_thread == my_thread:
        return True
    if (other >> THREAD_BITS) == (me >> THREAD_BITS):
        return False  # same epoch and generation: nothing between them
    # A warp operation came between: it orders the lanes of one warp.
    return (other_thread >> 5) == (my_thread >> 5)


def stamp_block(stamp: int) -> int:
    """Linear index of the block a stamp names."""
    return stamp >> 32


def stamp_thread(stamp: int) -> int:
    """Linear index, within its block, of the thread a stamp names."""
    return stamp & THREAD_MASK


def line_of(key: int, files: Sequence[str]) -> tuple[str, int]:
    """File and line of a line key made by ``_line_key``."""
    return files[key >> LINE_BITS], key & ((1 << LINE_BITS) - 1)
