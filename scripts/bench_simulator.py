"""Simulated work per second: portkit's two engines (lockstep and per-thread) against
numba's simulator, side by side in one process.

    python scripts/bench_simulator.py [--repeats 3] [--quick] [--kernels ...] [--json FILE]

The kernels (``simulator_bench_kernels.py``, ordinary ``numba.cuda.jit`` kernels), one
per kind the simulator must be fast on:

- ``sigmoid`` (elementwise; 8M threads on the lockstep engine): a numerically stable
  float32 sigmoid (``math.exp``), one thread per element;
- ``block_sum`` (block reduction): a shared-memory tree reduction, 128 threads per
  block, a ``cuda.syncthreads()`` after every step, thread 0 writes the block's sum;
- ``warp_sum``: a warp-shuffle reduction (``shfl_down_sync``). portkit only: numba's
  simulator has no shuffles, so its row reads n/a;
- ``matmul_tiled`` (tiled matmul): 16 x 16 shared tiles, edge tiles zero-padded, two
  barriers per tile; work counted in multiply-adds;
- ``histogram`` (atomics): a grid-stride loop of ``cuda.atomic.add(hist, data[i] %
  bins, 1)``, 256 elements per thread; ``histogram_1`` the same, one element per
  thread; work counted in elements;
- ``find_contiguous`` (unequal loops): advent-of-numba day 9's part 2 shape, thread
  ``i`` of ``stop`` loops ``stop - i`` times, its inner loop ``j`` times; work counted
  in inner-loop steps, ``(stop - 1) stop (stop + 1) / 6``;
- ``causal_softmax`` and ``transpose`` (bfloat16): a newcomer's causal
  softmax of 4 x n x n scores (a row per block; size n) and the tutorial's 32 x 32
  shared-tile transpose of an n x (2n + 2) matrix (size n; 2049 is 2049 x 4100). portkit
  only: numba's simulator has no bfloat16.

Each row also gives the CPU seconds of a launch (the process's, ``time.process_time``):
on a machine shared with other work they vary far less than the wall seconds.

What is measured: the wall time of one launch, from building the simulator's kernel
object to the launch returning (portkit: a fresh ``Machine`` per launch, so its one-off
source rewrite, a few milliseconds, is inside the timing, with every check it makes:
bounds, uninitialised shared memory, races, barriers; numba: a fresh
``FakeCUDAKernel``, one Python thread per CUDA thread), turned into a rate: work per
second in the kernel's unit. Each simulator gets its own problem size, chosen so that
one launch takes seconds (numba's simulator is far slower), which is why the
comparison is of rates, not of seconds. A lockstep launch that falls back to the
per-thread engine is timed as it ran, and its row says so.

Why side by side: the dev machine is shared and its speed drifts by tens of percent
over minutes. All simulators run in the same process, and their launches are
interleaved (lockstep, per-thread, numba, ...), so a slow patch of the machine hits
each; the ratio of the medians from one run is the number to trust, not absolute
figures compared across runs. Every launch's output is checked against NumPy (an
assertion) before its time counts. Before the timed launches, each simulator runs each
kernel once at a small size, untimed (imports, first-call caches).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from simulator_bench_kernels import KERNELS, Case, Kernel  # noqa: E402

# Each simulator's own size per kernel (elements; the matrix edge for matmul_tiled; the
# number of threads, ``stop``, for find_contiguous), so that one launch takes seconds:
# numba's simulator does about 5k threads/s elementwise and 450/s on the block
# reduction on the 2-core dev machine, portkit's per-thread engine about 100k/s and
# 22k/s, its lockstep engine millions. Not multiples of the block, so edge threads idle.
# A kernel missing from a simulator's sizes is not run there.
SIZES = {
    "lockstep": {
        "sigmoid": 8_000_000,
        "block_sum": 2_000_000,
        "warp_sum": 2_000_000,
        "matmul_tiled": 250,
        "histogram": 4_000_000,
        "histogram_1": 4_000_000,
        "find_contiguous": 600,
        "causal_softmax": 512,  # a newcomer's 4 x 512 x 512
        "transpose": 2049,  # a newcomer's 2049 x 4100
    },
    "per-thread": {
        "sigmoid": 200_000,
        "block_sum": 45_000,
        "warp_sum": 100_000,
        "causal_softmax": 96,
        "transpose": 512,
    },
    "numba": {
        "sigmoid": 14_000,
        "block_sum": 1_200,
        "matmul_tiled": 40,
        "histogram": 100_000,
        "histogram_1": 14_000,
        "find_contiguous": 200,
    },
}
QUICK_SIZES = {
    "lockstep": {
        "sigmoid": 100_000,
        "block_sum": 50_000,
        "warp_sum": 50_000,
        "matmul_tiled": 40,
        "histogram": 100_000,
        "histogram_1": 100_000,
        "find_contiguous": 60,
        "causal_softmax": 64,
        "transpose": 100,
    },
    "per-thread": {
        "sigmoid": 8_000,
        "block_sum": 2_000,
        "warp_sum": 4_000,
        "causal_softmax": 16,
        "transpose": 40,
    },
    "numba": {
        "sigmoid": 2_000,
        "block_sum": 250,
        "matmul_tiled": 20,
        "histogram": 20_000,
        "histogram_1": 2_000,
        "find_contiguous": 40,
    },
}
SIMULATORS = ("lockstep", "per-thread", "numba")


# --- running one launch -------------------------------------------------------------
def _run_portkit(engine: str, kernel: Kernel, case: Case) -> str:
    from portkit.launch.kernel_set import LaunchConfig
    from portkit.simt.machine import Machine

    grid = (*case.grid, 1, 1)[:3]
    block = (*case.block, 1, 1)[:3]
    machine = Machine(engine=engine, budget=0)  # no time limit: the bench times it
    machine.launch(kernel.name, kernel.dispatcher, LaunchConfig(grid, block, 0), case.args)
    ran = machine.engines[-1]
    # A lockstep launch that fell back ran per thread: the table says so.
    return "" if ran.engine == engine else f"fell back to {ran.engine}: {ran.reason}"


def run_lockstep(kernel: Kernel, case: Case) -> str:
    return _run_portkit("lockstep", kernel, case)


def run_per_thread(kernel: Kernel, case: Case) -> str:
    return _run_portkit("per-thread", kernel, case)


def run_numba(kernel: Kernel, case: Case) -> str:
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    fake = FakeCUDAKernel(kernel.dispatcher.py_func, device=False)
    fake[case.grid, case.block, 0, 0](*case.args)
    return ""


RUNNERS = {"lockstep": run_lockstep, "per-thread": run_per_thread, "numba": run_numba}


@dataclass
class Measurement:
    kernel: str
    simulator: str
    size: int
    work: int  # in the kernel's unit
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # the process's CPU seconds
    fallback: str = ""  # why a lockstep launch ran per thread instead

    def rate(self, seconds: float) -> float:
        return self.work / seconds


def launch_checked(
    kernel: Kernel, simulator: str, size: int, seed: int
) -> tuple[float, int, str, float]:
    """One launch on ``simulator``, its output checked; its wall time, work, fallback and
    CPU time."""
    case = kernel.make(size, np.random.default_rng(seed))
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    fallback = RUNNERS[simulator](kernel, case)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    try:
        case.check()
    except AssertionError as exc:
        raise AssertionError(f"{simulator} computed {kernel.name} wrong: {exc}") from None
    return seconds, case.work, fallback, cpu


def measure(sizes: dict, repeats: int, seed: int, names: list[str]) -> list[Measurement]:
    results = []
    for kernel in KERNELS:
        if kernel.name not in names:
            continue
        simulators = [s for s in SIMULATORS if kernel.name in sizes.get(s, {})]
        rows = {}
        for s in simulators:
            smallest = {"matmul_tiled": 16, "find_contiguous": 40, "causal_softmax": 16}.get(
                kernel.name, 32 if kernel.name == "transpose" else 128
            )
            launch_checked(kernel, s, smallest, seed)  # warm-up, untimed
            rows[s] = Measurement(kernel.name, s, sizes[s][kernel.name], 0)
        for rep in range(repeats):
            for s in simulators:  # interleaved: portkit, numba, portkit, numba, ...
                seconds, rows[s].work, rows[s].fallback, cpu = launch_checked(
                    kernel, s, rows[s].size, seed
                )
                rows[s].seconds.append(seconds)
                rows[s].cpu.append(cpu)
                print(
                    f"  {kernel.name:<15} {s:<10} run {rep + 1}/{repeats}: {seconds:6.2f} s "
                    f"({cpu:.2f} s CPU), "
                    f"{rows[s].rate(seconds):12,.0f} {kernel.unit}/s",
                    file=sys.stderr,
                    flush=True,
                )
        results.extend(rows.values())
    return results


# --- reporting ----------------------------------------------------------------------
def environment() -> dict:
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": platform.node(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numba": version("numba"),
        "numba-cuda": version("numba-cuda"),
        "numpy": np.__version__,
    }


def summary(m: Measurement) -> dict:
    median = statistics.median(m.seconds)
    return {
        "kernel": m.kernel,
        "simulator": m.simulator,
        "size": m.size,
        "work": m.work,
        "seconds": m.seconds,
        "cpu_seconds": m.cpu,
        "cpu_median_s": statistics.median(m.cpu),
        "median_s": median,
        "min_s": min(m.seconds),
        "max_s": max(m.seconds),
        "rate_median": m.rate(median),
        "rate_min": m.rate(max(m.seconds)),
        "rate_max": m.rate(min(m.seconds)),
        "fallback": m.fallback,
    }


def ratios(rows: list[dict]) -> dict:
    """Lockstep's median rate over the per-thread engine's and over numba's, per kernel
    (None where a simulator has no row)."""
    by = {(r["kernel"], r["simulator"]): r["rate_median"] for r in rows}
    kernels = dict.fromkeys(r["kernel"] for r in rows)

    def over(k: str, other: str) -> float | None:
        if (k, "lockstep") in by and (k, other) in by:
            return by[(k, "lockstep")] / by[(k, other)]
        return None

    return {k: {s: over(k, s) for s in ("per-thread", "numba")} for k in kernels}


def print_report(env: dict, rows: list[dict], ratio: dict, repeats: int) -> None:
    print(f"# Simulator benchmark, {env['date']}\n")
    print(f"- machine: {env['machine']}, {env['processor']}, {env['cpu_count']} CPUs")
    print(
        f"- python {env['python']}, numba {env['numba']}, numba-cuda {env['numba-cuda']}, "
        f"numpy {env['numpy']}"
    )
    print(
        f"- {repeats} launch{'es' if repeats > 1 else ''} per row, interleaved "
        "lockstep/per-thread/numba; each simulator at its own size (numba's is far "
        "slower), so the comparison is of rates (work per second); every output checked "
        "against NumPy\n"
    )
    print("| kernel | kind | simulator | size | work per launch | s per launch, median (min-max) "
          "| CPU s, median | rate, median (min-max) |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    kernels = {k.name: k for k in KERNELS}
    for r in rows:
        k = kernels[r["kernel"]]
        simulator = r["simulator"] + (f" ({r['fallback']})" if r["fallback"] else "")
        print(
            f"| {k.name} | {k.kind} | {simulator} | {r['size']:,} | {r['work']:,} "
            f"| {r['median_s']:.2f} ({r['min_s']:.2f}-{r['max_s']:.2f}) | {r['cpu_median_s']:.2f} "
            f"| {r['rate_median']:,.0f} ({r['rate_min']:,.0f}-{r['rate_max']:,.0f}) "
            f"{k.unit}/s |"
        )
    print("\n| kernel | lockstep / per-thread | lockstep / numba (ratios of median rates) |")
    print("|---|---:|---:|")
    show = lambda v: "n/a" if v is None else f"{v:.1f}x"  # noqa: E731
    for name, value in ratio.items():
        cannot = "n/a (numba's simulator cannot run it)"
        numba = show(value["numba"]) if kernels[name].numba else cannot
        print(f"| {name} | {show(value['per-thread'])} | {numba} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="launches per row (default 3)")
    parser.add_argument(
        "--quick", action="store_true", help="small sizes and 1 launch per row: a smoke test"
    )
    parser.add_argument(
        "--kernels",
        nargs="+",
        choices=[k.name for k in KERNELS],
        default=[k.name for k in KERNELS],
        help="only these kernels (default: all)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="also write the numbers and versions to FILE as JSON",
    )
    parser.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="SIMULATOR:KERNEL=N",
        help="another size for one row, e.g. lockstep:histogram=200000 (repeatable)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    repeats = 1 if args.quick else args.repeats

    env = environment()
    sizes = {s: dict(row) for s, row in (QUICK_SIZES if args.quick else SIZES).items()}
    for item in args.size:
        simulator, _, rest = item.partition(":")
        kernel, _, number = rest.partition("=")
        if simulator not in SIMULATORS or not number.isdigit() or kernel not in args.kernels:
            parser.error(f"--size {item}: expected SIMULATOR:KERNEL=N")
        sizes[simulator][kernel] = int(number)
    measurements = measure(sizes, repeats, args.seed, args.kernels)
    rows = [summary(m) for m in measurements]
    ratio = ratios(rows)
    print_report(env, rows, ratio, repeats)
    if args.json is not None:
        document = {
            **env,
            "repeats": repeats,
            "quick": args.quick,
            "results": rows,
            "ratio_of_medians": ratio,
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n")
        print(f"\nwrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
