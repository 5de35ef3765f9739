"""The check worker: a child process that runs sanitized twin launches.

AddressSanitizer must be the first library a process loads, so a sanitized twin cannot
run inside an ordinary Python (``ctypes`` would load it too late). The parent starts
this file as a script (no portkit import, standard library only) with the ASan runtime
in ``LD_PRELOAD``; a sanitizer report ends this process, not the caller's.

Each request is one launch: the tensors' bytes arrive, are copied into exact-size
``malloc`` blocks (so ASan's redzones sit right after each tensor), and the kernel runs
with threads in forward order; with ``schedule`` set, it runs again from the same bytes
with threads in reverse order between waits, and every buffer that differs between the
two runs is reported (tensor and first index). With ``zero`` (the build whose locals start
as zeros, where the first's start as 0xFE bytes: uninit.py), the reverse run is of that
build with shared memory zeroed; when the runs differ, a third (zero build, forward
order) tells an order dependence from a read of an uninitialised value. Messages are
length-prefixed pickles on two pipes; the kernel's own printf goes to the inherited stdout.

The worker lives as long as the process that started it (``portkit watch``, a notebook),
so what it loads is bounded: a request names its twin (``source``), and a new build of a
twin (an edit) closes the one it replaces (``dlclose``); past ``MAX_LIBRARIES`` builds the
one used least recently is closed too. Nothing is closed while a launch runs: one request
at a time, and no function of a library outlives the request that looked it up.
"""

from __future__ import annotations

import _ctypes
import ctypes
import os
import pickle
import struct
import sys
from collections import OrderedDict
from typing import Any

REVERSE, STRICT, ZERO_SHARED = 1, 2, 4
ERROR_BYTES = 8192


def read_message(fd: int) -> Any:
    header = _read_exactly(fd, 8)
    if not header:
        return None
    (size,) = struct.unpack("<Q", header)
    return pickle.loads(_read_exactly(fd, size))


def write_message(fd: int, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(struct.pack("<Q", len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return b""
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# The twin builds loaded (library path -> library), the one used last at the end, and the
# build each twin has now ((twin source, which build) -> library path).
MAX_LIBRARIES = 16  # both check builds of the twins a session works on, with room
_libraries: OrderedDict[str, ctypes.CDLL] = OrderedDict()
_builds: dict[tuple[str, str], str] = {}
_libc_loaded: list[ctypes.CDLL] = []


def _libc() -> ctypes.CDLL:
    """The C library already in the process: its malloc is ASan's (preloaded)."""
    if not _libc_loaded:
        libc = ctypes.CDLL(None)
        libc.malloc.restype = ctypes.c_void_p
        libc.malloc.argtypes = [ctypes.c_size_t]
        libc.free.argtypes = [ctypes.c_void_p]
        _libc_loaded.append(libc)
    return _libc_loaded[0]


def load(path: str, build: tuple[str, str]) -> ctypes.CDLL:
    """The library at ``path``, the current ``build`` (twin source, which build) of its
    twin: loaded once; the build it replaces, and past ``MAX_LIBRARIES`` the one used
    least recently, are closed."""
    loaded = _libraries.get(path)
    if loaded is None:
        replaced = _builds.get(build)
        if replaced is not None and replaced in _libraries:
            close(replaced)
        loaded = _libraries[path] = ctypes.CDLL(path)
    _builds[build] = path
    _libraries.move_to_end(path)
    while len(_libraries) > MAX_LIBRARIES:
        close(next(iter(_libraries)))
    return loaded


def close(path: str) -> None:
    """Forget the library at ``path`` and close it (``dlclose``): its code leaves the
    process once nothing else holds it open."""
    loaded = _libraries.pop(path)
    for build in [b for b, p in _builds.items() if p == path]:
        del _builds[build]
    _ctypes.dlclose(loaded._handle)


def run_once(request: dict, flags: int) -> tuple[int, str, list[bytes], set[int]]:
    """One launch on fresh copies of the request's buffers."""
    library = load(request["library"], (request["source"], request["build"]))
    launch = getattr(library, request["symbol"])
    launch.restype = ctypes.c_int
    buffers = request["buffers"]
    pointers = []
    for data in buffers:
        pointer = _libc().malloc(len(data))
        ctypes.memmove(pointer, data, len(data))
        pointers.append(pointer)
    # Where each tensor lies, for the parent to name the one an ASan report is about.
    for index, (pointer, data) in enumerate(zip(pointers, buffers)):
        os.write(2, f"portkit-cpu: buffer {index} at {pointer:#x} size {len(data)}\n".encode())
    holders, slots = [], []
    for kind, value in request["args"]:
        holder = (
            ctypes.c_void_p(pointers[value])
            if kind == "buffer"
            else ctypes.create_string_buffer(value, len(value))
        )
        holders.append(holder)
        slots.append(ctypes.addressof(holder))
    argv = (ctypes.c_void_p * max(len(slots), 1))(*slots)
    grid = (ctypes.c_uint * 3)(*request["grid"])
    block = (ctypes.c_uint * 3)(*request["block"])
    error = ctypes.create_string_buffer(ERROR_BYTES)
    span = (ctypes.c_ulonglong * 2)()
    rc = launch(
        grid,
        block,
        ctypes.c_size_t(request["shared"]),
        argv,
        flags,
        error,
        ctypes.c_size_t(ERROR_BYTES),
    )
    results = [ctypes.string_at(p, len(d)) for p, d in zip(pointers, buffers)]
    library.portkit_float_atomic_span(ctypes.byref(span, 0), ctypes.byref(span, 8))
    low, high = span[0], span[1]
    # Buffers that float atomicAdds wrote into: their bytes may depend on the order.
    atomic_targets = {
        i for i, (p, d) in enumerate(zip(pointers, buffers)) if p < high and low < p + len(d)
    }
    for pointer in pointers:
        _libc().free(pointer)
    return rc, error.value.decode(errors="replace"), results, atomic_targets


def order_differences(
    first: list[bytes], second: list[bytes], itemsizes: list[int]
) -> list[tuple[int, int, int]]:
    """(buffer, first differing element, number of differing elements) per buffer."""
    found = []
    for index, (a, b, size) in enumerate(zip(first, second, itemsizes)):
        if a == b:
            continue
        differing = [
            i
            for i in range(len(a) // size)
            if a[i * size : (i + 1) * size] != b[i * size : (i + 1) * size]
        ]
        found.append((index, differing[0], len(differing)))
    return found


def handle(request: dict) -> dict:
    rc, error, outputs, atomic_targets = run_once(request, STRICT)
    if rc:
        return {"error": error}
    reply = {"buffers": outputs, "order": [], "uninit": [], "float_atomics": sorted(atomic_targets)}
    if not request["schedule"]:
        return reply
    zero = request.get("zero")  # (library, symbol) of the zero-initialised build, or None
    other = dict(request, library=zero[0], symbol=zero[1], build="zero") if zero else request
    zeroed = ZERO_SHARED if zero else 0
    rc, error, reversed_outputs, _ = run_once(other, STRICT | REVERSE | zeroed)
    if rc:
        said = ", locals and shared memory zeroed" if zero else ""
        return {"error": f"{error} (with threads in reverse order{said})"}
    itemsizes = request["itemsizes"]
    differences = order_differences(outputs, reversed_outputs, itemsizes)
    blamed = [d for d in differences if d[0] not in atomic_targets]
    # Float atomics may differ by order alone: their buffers need the third run to be
    # checked for uninitialised values.
    if zero and (blamed or (differences and atomic_targets)):
        rc, error, zero_outputs, _ = run_once(other, STRICT | zeroed)
        if rc:
            return {"error": f"{error} (with locals and shared memory zeroed)"}
        reply["uninit"] = order_differences(outputs, zero_outputs, itemsizes)
        differences = order_differences(zero_outputs, reversed_outputs, itemsizes)
        blamed = [d for d in differences if d[0] not in atomic_targets]
    reply["order"] = blamed
    return reply


def main() -> None:
    inbound, outbound = int(sys.argv[1]), int(sys.argv[2])
    while True:
        request = read_message(inbound)
        if request is None:
            return
        write_message(outbound, handle(request))


if __name__ == "__main__":
    main()
