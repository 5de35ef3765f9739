"""A race with atomics, confirmed by a second schedule: a plain read of an element other
threads update atomically (a histogram's ``min_max``) is undefined by the CUDA C++ guide,
but whether it matters shows in the outputs. The launch is run again from the same
inputs in the other schedule (``schedule.py``: blocks and threads reversed) and the
outputs compared bit for bit: an output that differs is the race's error; the same bits
everywhere make it a warning that says the result happened not to depend on the order.
Elements float atomics summed into are left out of the comparison: their order is bounded
by ``portkit check`` (checking/order_bound.py), not here.

Only kernels whose module's source names an atomic keep a copy of their inputs
(``snapshot``); a suspected race in any other launch is an error at once, as before.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from portkit.launch.kernel_set import LaunchConfig
from portkit.simt.memory_fault import MemoryFault
from portkit.simt.records import Place, SimulationFault
from portkit.simt.schedule import FORWARD, REVERSED
from portkit.simt.tally import AtomicTally

_NAMES_ATOMICS: dict[Any, bool] = {}  # a kernel's code -> its module names an atomic
MAX_KERNELS = 256  # kernels a project simulates at once, with room


@dataclass
class Suspect:
    """A read racing with another thread's atomic, waiting for the second schedule."""

    fault: MemoryFault
    place: Place
    other: Place | None


def snapshot(dispatcher: Any, args: Sequence[Any]) -> list[Any] | None:
    """Copies of the launch's inputs when the kernel's module names an atomic (its device
    functions may make them), else None."""
    function = getattr(dispatcher, "py_func", dispatcher)
    key = getattr(function, "__code__", None)
    if key not in _NAMES_ATOMICS:
        try:
            module = inspect.getmodule(function)
            source = inspect.getsource(module if module is not None else function)
        except (OSError, TypeError):
            source = ""
        if len(_NAMES_ATOMICS) >= MAX_KERNELS:  # a resident process re-imports edited kernels
            _NAMES_ATOMICS.clear()
        _NAMES_ATOMICS[key] = "atomic" in source
    if not _NAMES_ATOMICS[key]:
        return None
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def confirm(
    machine: Any,
    again: Any,
    name: str,
    dispatcher: Any,
    config: LaunchConfig,
    args: Sequence[Any],
    inputs: Sequence[Any],
    suspects: Sequence[Suspect],
) -> None:
    """Run the launch again from ``inputs`` on ``again`` (a fresh machine in the other
    schedule) and judge the first of ``suspects``: raise its race when an output differs,
    else warn (on ``machine``)."""
    other = again.schedule
    again.confirming = True  # its own suspects are the same race: no third run
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in inputs]
    again.launch(name, dispatcher, config, copies)  # a fault in that order: its own report
    parameters = machine.rewriter.rewrite(dispatcher).parameters
    differs = _difference(parameters, args, copies, machine.tally)
    first = suspects[0]
    detail = f"{first.fault.detail} races with another thread's atomic"
    if differs:
        raise SimulationFault(
            name,
            "race",
            f"data race: {detail}, with no barrier between them; the outputs differ "
            f"between the {machine.schedule} and {other} schedules: {differs}",
            first.place,
            first.other,
            "the atomic",
        )
    machine.warn(
        "atomic-read-race",
        f"{detail}; the outputs happened not to depend on the order (the {other} "
        f"schedule gave the same bits)",
        first.place,
        first.other,
    )


def other(machine: Any) -> str:
    """The schedule ``machine`` does not run in."""
    return FORWARD if machine.schedule == REVERSED else REVERSED


def _difference(
    parameters: Sequence[str], first: Sequence[Any], second: Sequence[Any], tally: AtomicTally
) -> str:
    """The first element that differs between two runs' arrays (float atomic sums left
    out), as ``name[i]: a vs b``; "" when every bit agrees."""
    for parameter, a, b in zip(parameters, first, second):
        if not isinstance(a, np.ndarray) or a.size == 0:
            continue
        x, y = np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1)
        width = x.dtype.itemsize
        bits_x = x.view(np.uint8).reshape(x.size, width)
        bits_y = y.view(np.uint8).reshape(y.size, width)
        for i in np.nonzero((bits_x != bits_y).any(axis=1))[0]:
            address = a.ctypes.data + int(i) * width
            if a.flags.c_contiguous and address in tally.elements:
                continue  # a float atomic sum: its order is bounded elsewhere
            return f"{parameter}[{int(i)}]: {x[i]!r} vs {y[i]!r}"
    return ""
