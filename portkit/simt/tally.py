"""Float atomic sums, counted: how many ``atomic.add``/``atomic.sub`` contributions each
element of global memory received, and the sum of their magnitudes.

Float addition is not associative, and a GPU runs the atomics on one element in an
order it does not promise, so such an element's value depends on the order. Its count
``n`` and magnitude ``S`` (the initial value's and every contribution's, summed) bound
how much: two orders differ by at most ``2 * gamma_n * S`` (checking/order_bound.py).
Integer atomics and float max/min are exact in any order and are not counted.

Elements are keyed by byte address, so a tensor a later launch views anew (another
NumPy view of the same storage) adds to the same tally; every buffer counted is kept
alive, so no address is reused while the tally holds it.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class AtomicTally:
    """Float atomic contributions per element of global memory, over a machine's launches."""

    def __init__(self) -> None:
        # byte address -> [count, sum of |contribution|, |value before the first one|]
        self.elements: dict[int, list[float]] = {}
        self._pinned: dict[int, np.ndarray] = {}

    def add(self, data: np.ndarray, position: int, old: Any, value: Any) -> None:
        """One atomic sum of ``value`` into ``data[position]``, which held ``old``."""
        address = data.ctypes.data + position * data.itemsize
        entry = self.elements.get(address)
        if entry is None:
            self._pinned.setdefault(id(data), data)
            self.elements[address] = [1, abs(float(value)), abs(float(old))]
        else:
            entry[0] += 1
            entry[1] += abs(float(value))

    def sums_before(self, data: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Each element's sum of contribution magnitudes so far (0 where none), float64."""
        base, size, get = data.ctypes.data, data.itemsize, self.elements.get
        return np.array(
            [(get(base + p * size) or (0, 0.0))[1] for p in positions.tolist()], np.float64
        )

    def record(
        self,
        data: np.ndarray,
        positions: np.ndarray,
        counts: np.ndarray,
        sums: np.ndarray,
        initial: np.ndarray,
    ) -> None:
        """``counts`` more contributions into ``data[positions]``, whose magnitudes now sum
        to ``sums`` (``sums_before`` plus theirs); ``initial``: each element's magnitude
        before its first contribution (kept where the element was counted before)."""
        base, size = data.ctypes.data, data.itemsize
        self._pinned.setdefault(id(data), data)
        rows = zip(positions.tolist(), counts.tolist(), sums.tolist(), initial.tolist())
        for position, count, total, before in rows:
            address = base + position * size
            entry = self.elements.get(address)
            if entry is None:
                self.elements[address] = [count, total, before]
            else:
                entry[0] += count
                entry[1] = total

    def merge(self, other: AtomicTally) -> None:
        """Add ``other``'s counts (a lockstep launch's, once it ran to the end)."""
        for address, (count, contributions, initial) in other.elements.items():
            entry = self.elements.get(address)
            if entry is None:
                self.elements[address] = [count, contributions, initial]
            else:  # the element's initial value is the one before the earlier launch
                entry[0] += count
                entry[1] += contributions
        self._pinned.update(other._pinned)

    def __bool__(self) -> bool:
        return bool(self.elements)

    def counts(self, address: int, itemsize: int, numel: int) -> tuple[np.ndarray, np.ndarray]:
        """(count, magnitude) of each element of the contiguous memory of ``numel`` items
        of ``itemsize`` bytes at ``address``: magnitude is the initial value's and every
        contribution's, summed; zeros where no float atomic landed."""
        count = np.zeros(numel, np.int64)
        magnitude = np.zeros(numel, np.float64)
        end = address + itemsize * numel
        for where, (n, contributions, initial) in self.elements.items():
            if address <= where < end and (where - address) % itemsize == 0:
                index = (where - address) // itemsize
                count[index], magnitude[index] = n, contributions + initial
        return count, magnitude
