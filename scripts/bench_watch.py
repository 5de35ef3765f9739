"""Save-to-verdict times of `portkit watch`, beside the cold CLI, and its memory over edits.

    python scripts/bench_watch.py [--op sigmoid] [--edits 7] [--memory-edits 100] [--json F]

Copies the op (prototype and twin) into a temporary project with its own cache, starts
the watch engine and its watchfiles loop in this process (as `portkit watch` runs), then
saves edits from this thread and times, per edit, from the save to the first verdict
and to the whole run's end (medians over ``--edits``):

- ``sim``, prototype edit: `portkit watch OP --sim`;
- ``check``, prototype edit and twin edit: `portkit watch OP` (every case but the
  GPU-sized ones on every backend here; on a GPU the first verdict is numba against
  the twin);

and in the same run the cold commands (`portkit sim OP`, `portkit check OP --quick
--no-compile`) as fresh processes. Each edit appends a comment, so the file's content
changes (the prototype is imported again, the twin compiled again) and the code does
not. Memory: the process's RSS after each of ``--memory-edits`` sim-mode prototype
edits; growth per edit is the slope over the second half. A benchmark, not a test: the
figures depend on the machine and its load (docs/watch.md records some).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from portkit.bench.timing import host_rounds  # noqa: E402


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def make_project(op: str, where: Path) -> Path:
    (where / "prototypes").mkdir(parents=True)
    (where / "cuda_src").mkdir()
    shutil.copy(REPO / "prototypes" / f"{op}.py", where / "prototypes")
    twin = REPO / "cuda_src" / f"{op}.cu"
    if twin.exists():
        shutil.copy(twin, where / "cuda_src")
    (where / "pyproject.toml").write_text(
        '[project]\nname = "bench"\nversion = "0"\n\n[tool.portkit]\n'
        'prototypes = "prototypes"\ncuda-src = "cuda_src"\ncache-dir = ".portkit-cache"\n'
    )
    return where


class Timings:
    """The loop's view: notes when the first verdict and the end of each run came."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.done = threading.Event()
        self.rerun = None

    def __enter__(self) -> Timings:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def progress(self, rerun) -> None:
        if self.first is None and rerun.verdicts:
            self.first = time.perf_counter()

    def finished(self, rerun) -> None:
        self.progress(rerun)
        self.rerun = rerun
        self.done.set()

    def waiting(self, paths) -> None:
        return None


def timed_edits(root: Path, op: str, mode: str, edited: Path, edits: int, mark: str) -> dict:
    """Start a watch of ``op`` in ``mode``, save ``edits`` edits of ``edited``; medians."""
    from portkit.project.session import Session
    from portkit.watch.engine import Engine
    from portkit.watch.loop import watch_loop

    engine = Engine(Session.from_environment(root), [op], mode)
    view, stop = Timings(), threading.Event()
    thread = threading.Thread(target=watch_loop, args=(engine, view), kwargs={"stop": stop})
    thread.start()
    view.done.wait()  # the first run: imports, compiles, caches
    firsts, fulls, rss, statuses = [], [], [], []
    for i in range(edits):
        view.done.clear()
        view.first = None
        time.sleep(0.3)  # the watcher is waiting again
        saved = time.perf_counter()
        with edited.open("a") as f:
            f.write(f"\n{mark} edit {i}\n")
        view.done.wait()
        ended = time.perf_counter()
        firsts.append((view.first or ended) - saved)
        fulls.append(ended - saved)
        rss.append(rss_mib())
        statuses.append(view.rerun.verdicts[op].status if op in view.rerun.verdicts else "-")
    stop.set()
    thread.join()
    return {
        "edits": edits,
        "first_verdict_s": statistics.median(firsts),
        "full_verdict_s": statistics.median(fulls),
        "verdicts": sorted(set(statuses)),
        "rss_mib": rss,
    }


def cold(args: list[str], root: Path, runs: int) -> float:
    def run() -> None:
        subprocess.run(
            [sys.executable, "-m", "portkit.cli", *args],
            cwd=root,
            capture_output=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )

    return statistics.median(host_rounds({"cold": run}, rounds=runs)["cold"])


def slope(values: list[float]) -> float:
    """Least-squares growth per step of the second half of ``values``."""
    half = values[len(values) // 2 :]
    if len(half) < 2:
        return 0.0
    xs = range(len(half))
    mx, my = statistics.fmean(xs), statistics.fmean(half)
    num = sum((x - mx) * (y - my) for x, y in zip(xs, half))
    return num / sum((x - mx) ** 2 for x in xs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", default="sigmoid")
    parser.add_argument("--edits", type=int, default=7)
    parser.add_argument("--cold-runs", type=int, default=3)
    parser.add_argument("--memory-edits", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import numba
    import torch

    report: dict = {
        "date": time.strftime("%Y-%m-%d"),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "numba": numba.__version__,
        "cpus": os.cpu_count(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }
    with tempfile.TemporaryDirectory(prefix="portkit-bench-watch-") as tmp:
        root = make_project(args.op, Path(tmp))
        prototype = root / "prototypes" / f"{args.op}.py"
        twin = root / "cuda_src" / f"{args.op}.cu"
        os.chdir(root)
        report["sim, prototype edit"] = timed_edits(
            root, args.op, "sim", prototype, args.edits, "#"
        )
        report["check, prototype edit"] = timed_edits(
            root, args.op, "check", prototype, args.edits, "#"
        )
        if twin.exists():
            report["check, twin edit"] = timed_edits(root, args.op, "check", twin, args.edits, "//")
        report["cold: portkit sim"] = cold(["sim", args.op], root, args.cold_runs)
        report["cold: portkit check --quick --no-compile"] = cold(
            ["check", args.op, "--quick", "--no-compile"], root, args.cold_runs
        )
        memory = timed_edits(root, args.op, "sim", prototype, args.memory_edits, "#")
        report["memory, sim prototype edits"] = {
            "edits": args.memory_edits,
            "rss_first_mib": memory["rss_mib"][0],
            "rss_last_mib": memory["rss_mib"][-1],
            "growth_per_edit_kib": slope(memory["rss_mib"]) * 1024,
        }
    for run in report.values():
        if isinstance(run, dict):
            run.pop("rss_mib", None)
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
