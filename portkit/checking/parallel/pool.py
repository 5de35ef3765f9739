"""The parent of ``portkit check -j N``: up to N workers (worker.py), each fed one op at a
time from a shared queue, each with its own GPU (gpus.py). A worker that dies (a
segfault, the out-of-memory killer) costs the op it was checking a red row with its exit
status and last output; a fresh worker takes the next op."""

from __future__ import annotations

import signal
import subprocess
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO

from portkit.checking.parallel.gpus import visible_gpus, worker_environment
from portkit.checking.parallel.handoff import HandoffError, OpRun, crashed, read_run
from portkit.checking.parallel.worker import Request, command
from portkit.project.environment import child_environment

LAST_LINES = 20  # of a dead worker's output, in its op's row


def exit_status(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class _Slot:
    """Worker ``index`` of the pool: started on demand, restarted after it dies."""

    def __init__(self, index: int, request: Path, env: Mapping[str, str], cwd: Path, log: Path):
        self.index, self.request, self.env, self.cwd, self.log = index, request, env, cwd, log
        self.proc: subprocess.Popen[str] | None = None
        self._log_file: IO[str] | None = None

    def check(self, name: str, results: Path, advance: Callable[[str], None]) -> OpRun:
        if self.proc is None:
            self._log_file = open(self.log, "a")  # noqa: SIM115 - closed in stop()
            self.proc = subprocess.Popen(
                command(self.request),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log_file,
                text=True,
                env=dict(self.env),
                cwd=self.cwd,
            )
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        start = self.log.stat().st_size
        try:
            proc.stdin.write(name + "\n")
            proc.stdin.flush()
        except OSError:
            pass  # it died before it read the op: seen below as the end of its stdout
        for line in proc.stdout:
            if line.startswith("step "):
                advance(line[5:].rstrip("\n"))
            elif line.rstrip("\n") == f"done {name}":
                try:
                    return read_run(results / f"{name}.json")
                except HandoffError as exc:
                    return OpRun(name, [crashed(name, str(exc))])
        code = proc.wait()
        self.stop()
        tail = self.log.read_text(errors="replace")[start:].splitlines()[-LAST_LINES:]
        why = f"the worker process checking {name} died ({exit_status(code)})"
        return OpRun(name, [crashed(name, why + ("; its last output:\n" + "\n".join(tail)))])

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.stdin is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            proc.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


def check_in_parallel(
    op_names: Sequence[str],
    request: Request,
    jobs: int,
    settings_environment: Mapping[str, str],
    advance: Callable[[str], None] = lambda label: None,
) -> list[OpRun]:
    """Every op of ``op_names`` checked by up to ``jobs`` workers; their runs in op order.
    ``settings_environment``: the variables that give a worker the parent's settings."""
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    queue = deque(op_names)
    lock = threading.Lock()
    runs: dict[str, OpRun] = {}
    gpus = visible_gpus()
    count = min(jobs, len(op_names))
    base = {**child_environment(), **settings_environment}  # the child's whole env

    def locked_advance(label: str) -> None:
        with lock:
            advance(label)

    with tempfile.TemporaryDirectory(prefix="portkit-check-") as folder:
        results = Path(folder)
        request_file = results / "request.json"
        replace(request, results=str(results)).write(request_file)
        slots = [
            _Slot(
                k,
                request_file,
                worker_environment(k, count, gpus, base),
                Path(request.root),
                results / f"worker-{k}.log",
            )
            for k in range(count)
        ]

        def serve(slot: _Slot) -> None:
            try:
                while True:
                    with lock:
                        if not queue:
                            return
                        name = queue.popleft()
                    run = slot.check(name, results, locked_advance)
                    with lock:
                        runs[name] = run
            finally:
                slot.stop()

        threads = [threading.Thread(target=serve, args=(s,), daemon=True) for s in slots]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    lost = [n for n in op_names if n not in runs]  # a thread that raised (never expected)
    for name in lost:
        runs[name] = OpRun(name, [crashed(name, "its worker's thread failed; see stderr")])
    return [runs[n] for n in op_names]
