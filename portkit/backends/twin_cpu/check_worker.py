"""The parent's side of the check worker (``worker.py``): start it with the sanitizer
runtime preloaded, send launches, and turn a sanitizer report into one readable error.

A report ends the worker; the next launch starts a new one. Environment for the child
only (the caller's environment is never changed): ``LD_PRELOAD`` of the ASan runtime the
compiler ships (``g++ -print-file-name=libasan.so``), ``detect_leaks=0`` (Python itself
leaks by design at exit) and UBSan stack traces.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from portkit.backends.twin_cpu import worker as protocol
from portkit.backends.twin_cpu.build import asan_runtime
from portkit.errors import KernelError
from portkit.project.environment import child_environment

WORKER = Path(protocol.__file__).resolve()
_ADDRESS = re.compile(r"on address (0x[0-9a-f]+)")
_BUFFER = re.compile(r"portkit-cpu: buffer (\d+) at (0x[0-9a-f]+) size (\d+)")


class CheckWorker:
    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None  # the worker's stderr: its sanitizer report
        self._lock = threading.Lock()

    def _start(self) -> None:
        env = child_environment()
        runtime = asan_runtime()
        if runtime:
            env["LD_PRELOAD"] = " ".join(filter(None, [runtime, env.get("LD_PRELOAD", "")]))
        env["ASAN_OPTIONS"] = (
            "detect_leaks=0:halt_on_error=1:abort_on_error=0:verify_asan_link_order=0"
        )
        env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
        to_child, from_parent = os.pipe()
        to_parent, from_child = os.pipe()
        self._log = tempfile.TemporaryFile()
        self._process = subprocess.Popen(
            [sys.executable, str(WORKER), str(to_child), str(from_child)],
            pass_fds=(to_child, from_child),
            env=env,
            stdin=subprocess.DEVNULL,
            stderr=self._log,
        )
        os.close(to_child)
        os.close(from_child)
        self._send, self._receive = from_parent, to_parent

    def run(self, request: dict[str, Any], names: list[str]) -> dict[str, Any]:
        """One launch; ``names`` describe each buffer for error messages."""
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._start()
            process, log_file = self._process, self._log
            assert process is not None and log_file is not None  # started above
            log_file.seek(0)
            log_file.truncate()
            try:
                protocol.write_message(self._send, request)
                reply = protocol.read_message(self._receive)
            except OSError:
                reply = None
            if reply is None:
                process.wait()
                log_file.seek(0)
                log = log_file.read().decode(errors="replace")
                self.close()
                raise KernelError(sanitizer_message(request["kernel"], log, names))
            return reply

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._process is not None:
            for fd in (self._send, self._receive):
                try:
                    os.close(fd)
                except OSError:
                    pass
            if self._process.poll() is None:
                self._process.kill()
                self._process.wait()
            self._process = None


def sanitizer_message(kernel: str, log: str, names: list[str]) -> str:
    """The few lines of a sanitizer report that say what, where and which tensor."""
    lines = log.splitlines()
    picked: list[str] = []
    for i, line in enumerate(lines):
        if "ERROR: AddressSanitizer" in line or "runtime error:" in line:
            # "ERROR: AddressSanitizer: heap-buffer-overflow on address 0x.. at pc .." or
            # "file:line:col: runtime error: what"
            kind = re.sub(r"^==\d+==|\s+on address.*$", "", line).strip()
            picked.append(kind.removeprefix("ERROR: "))
            tail = lines[i + 1 : i + 40]
            access = next((t.strip() for t in tail if re.search(r"(READ|WRITE) of size", t)), None)
            if access:
                picked.append(re.sub(r" at 0x[0-9a-f]+ thread T\d+", "", access))
            frame = next((t.strip() for t in tail if re.match(r"\s*#\d+ ", t)), None)
            place = frame and re.search(r" in (.+) (\S+:\d+)(?::\d+)?$", frame)
            if place and "runtime error:" not in line:
                picked.append(f"at {place.group(2)} in {place.group(1)}")
            address = _ADDRESS.search(line)
            if address:
                picked.append(_which_buffer(int(address.group(1), 16), log, names))
            break
    thread = next((t for t in lines if t.startswith("portkit-cpu: the error above")), None)
    if thread:
        picked.append(thread.removeprefix("portkit-cpu: the error above happened").strip())
    if not picked:
        last = "\n".join(t for t in lines[-15:] if not t.startswith("portkit-cpu: buffer"))
        return f"{kernel} ended the check worker: {last or 'no report'}"
    return f"{kernel}: " + ", ".join(p for p in picked if p)


def _which_buffer(address: int, log: str, names: list[str]) -> str:
    for index, start, size in _BUFFER.findall(log):
        begin, length = int(start, 16), int(size)
        name = names[int(index)] if int(index) < len(names) else f"buffer {index}"
        if begin <= address < begin + length:
            return f"inside {name}"
        if begin + length <= address < begin + length + 64:
            return f"{address - begin - length} bytes past the end of {name} ({length} bytes)"
        if begin - 64 <= address < begin:
            return f"{begin - address} bytes before the start of {name}"
    return ""
