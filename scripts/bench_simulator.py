"""Simulated threads per second: portkit's two engines (lockstep and per-thread) against
numba's simulator, side by side in one process.

    python scripts/bench_simulator.py [--repeats 5] [--quick] [--json FILE]

Three kernels, defined below as ordinary ``numba.cuda.jit`` kernels:

- ``sigmoid``: elementwise, a numerically stable float32 sigmoid (``math.exp``), one
  thread per element, no waiting;
- ``block_sum``: a shared-memory tree reduction, 128 threads per block, a
  ``cuda.syncthreads()`` after every step, thread 0 writes the block's sum;
- ``warp_sum``: a warp-shuffle reduction (``shfl_down_sync``), lane 0 writes the warp's
  sum. portkit only: numba's simulator has no shuffles, so its row reads n/a.

What is measured: the wall time of one launch, from building the simulator's kernel
object to the launch returning (portkit: a fresh ``Machine`` per launch, so its one-off
source rewrite, a few milliseconds, is inside the timing, with every check it makes:
bounds, uninitialised shared memory, races, barriers; numba: a fresh
``FakeCUDAKernel``, one Python thread per CUDA thread). The figure reported is
simulated threads per second: threads launched (grid x block, the threads past ``n``
in the last block included) over that time. Each simulator gets its own problem size,
chosen so that one launch takes seconds (numba's simulator is far slower), which is
why the comparison is in threads per second and not in seconds.

Why side by side: the dev machine is shared and its speed drifts by tens of percent
over minutes. Both simulators run in the same process, on the same inputs, and their
launches are interleaved (lockstep, per-thread, numba, ...), so a slow patch of the
machine hits both; the ratio of the medians from one run is the number to trust, not
absolute figures compared across runs. Every launch's output is checked against NumPy
(an assertion) before its time counts. Before the timed launches, each simulator runs
each kernel once on one block, untimed (imports, first-call caches).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
from numba import cuda, float32

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

THREADS = 128  # threads per block, every kernel
WARP = 32


# --- the kernels --------------------------------------------------------------------
@cuda.jit
def sigmoid(x, out, n):
    i = cuda.grid(1)
    if i < n:
        v = x[i]
        if v >= float32(0.0):
            out[i] = float32(1.0) / (float32(1.0) + math.exp(-v))
        else:
            z = math.exp(v)
            out[i] = z / (float32(1.0) + z)


@cuda.jit
def block_sum(x, out, n):
    buf = cuda.shared.array(THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[tid] = x[i] if i < n else float32(0.0)
    cuda.syncthreads()
    stride = THREADS // 2
    while stride > 0:
        if tid < stride:
            buf[tid] += buf[tid + stride]
        cuda.syncthreads()
        stride //= 2
    if tid == 0:
        out[cuda.blockIdx.x] = buf[0]


@cuda.jit
def warp_sum(x, out, n):
    i = cuda.grid(1)
    v = x[i] if i < n else float32(0.0)
    offset = WARP // 2
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.threadIdx.x % WARP == 0:
        out[i // WARP] = v


# --- what each kernel must compute --------------------------------------------------
def check_sigmoid(x: np.ndarray, out: np.ndarray) -> None:
    v = x.astype(np.float64)
    z = np.exp(-np.abs(v))
    expected = np.where(v >= 0, 1 / (1 + z), z / (1 + z))
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=0)


def tree_sums(x: np.ndarray, group: int, blocks: int) -> np.ndarray:
    """Sums of ``group`` consecutive elements (zero-padded to ``blocks * THREADS``), in
    the kernels' order: a float32 halving tree, so the result must match exactly."""
    padded = np.zeros(blocks * THREADS, np.float32)
    padded[: x.size] = x
    parts = padded.reshape(-1, group).copy()
    stride = group // 2
    while stride > 0:
        parts[:, :stride] += parts[:, stride : 2 * stride]
        stride //= 2
    return parts[:, 0]


def check_block_sum(x: np.ndarray, out: np.ndarray) -> None:
    np.testing.assert_array_equal(out, tree_sums(x, THREADS, out.size))


def check_warp_sum(x: np.ndarray, out: np.ndarray) -> None:
    np.testing.assert_array_equal(out, tree_sums(x, WARP, out.size * WARP // THREADS))


@dataclass(frozen=True)
class Kernel:
    name: str
    dispatcher: Any
    outputs: Callable[[int, int], int]  # (elements, blocks) -> output elements
    check: Callable[[np.ndarray, np.ndarray], None]
    numba: bool  # whether numba's simulator can run it


KERNELS = [
    Kernel("sigmoid", sigmoid, lambda n, blocks: n, check_sigmoid, True),
    Kernel("block_sum", block_sum, lambda n, blocks: blocks, check_block_sum, True),
    Kernel("warp_sum", warp_sum, lambda n, blocks: blocks * THREADS // WARP, check_warp_sum, False),
]

# Elements per launch: each simulator's own size, so that one launch takes seconds.
# Not multiples of 128, so the last block has threads past n. numba's simulator does
# about 5k threads/s elementwise and 450/s on the block reduction on the 2-core dev
# machine; portkit's per-thread engine about 100k/s and 22k/s, its lockstep engine millions.
SIZES = {
    "lockstep": {"sigmoid": 4_000_000, "block_sum": 2_000_000, "warp_sum": 2_000_000},
    "per-thread": {"sigmoid": 200_000, "block_sum": 45_000, "warp_sum": 100_000},
    "numba": {"sigmoid": 14_000, "block_sum": 1_200},
}
QUICK_SIZES = {
    "lockstep": {"sigmoid": 100_000, "block_sum": 50_000, "warp_sum": 50_000},
    "per-thread": {"sigmoid": 8_000, "block_sum": 2_000, "warp_sum": 4_000},
    "numba": {"sigmoid": 2_000, "block_sum": 250},
}
SIMULATORS = ("lockstep", "per-thread", "numba")


# --- running one launch -------------------------------------------------------------
def _run_portkit(engine: str, kernel: Kernel, x: np.ndarray, out: np.ndarray, blocks: int) -> None:
    from portkit.launch.kernel_set import LaunchConfig
    from portkit.simt.machine import Machine

    config = LaunchConfig((blocks, 1, 1), (THREADS, 1, 1), 0)
    machine = Machine(engine=engine)
    machine.launch(kernel.name, kernel.dispatcher, config, [x, out, x.size])
    ran = machine.engines[-1]
    if ran.engine != engine:  # a lockstep launch that fell back would be timed per thread
        raise AssertionError(f"{kernel.name} ran {ran.engine}, not {engine}: {ran.reason}")


def run_lockstep(kernel: Kernel, x: np.ndarray, out: np.ndarray, blocks: int) -> None:
    _run_portkit("lockstep", kernel, x, out, blocks)


def run_per_thread(kernel: Kernel, x: np.ndarray, out: np.ndarray, blocks: int) -> None:
    _run_portkit("per-thread", kernel, x, out, blocks)


def run_numba(kernel: Kernel, x: np.ndarray, out: np.ndarray, blocks: int) -> None:
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    fake = FakeCUDAKernel(kernel.dispatcher.py_func, device=False)
    fake[blocks, THREADS, 0, 0](x, out, x.size)


RUNNERS = {"lockstep": run_lockstep, "per-thread": run_per_thread, "numba": run_numba}


@dataclass
class Measurement:
    kernel: str
    simulator: str
    elements: int
    threads: int  # launched: blocks x THREADS
    seconds: list[float] = field(default_factory=list)

    def rate(self, seconds: float) -> float:
        return self.threads / seconds


def launch_checked(kernel: Kernel, simulator: str, x: np.ndarray) -> float:
    """One launch on ``simulator``, its output checked; returns its wall time."""
    blocks = -(-x.size // THREADS)
    out = np.full(kernel.outputs(x.size, blocks), np.nan, np.float32)
    gc.collect()
    t0 = time.perf_counter()
    RUNNERS[simulator](kernel, x, out, blocks)
    seconds = time.perf_counter() - t0
    try:
        kernel.check(x, out)
    except AssertionError as exc:
        raise AssertionError(f"{simulator} computed {kernel.name} wrong: {exc}") from None
    return seconds


def measure(sizes: dict, repeats: int, seed: int) -> list[Measurement]:
    rng = np.random.default_rng(seed)
    results = []
    for kernel in KERNELS:
        simulators = [s for s in SIMULATORS if s in sizes and kernel.name in sizes[s]]
        inputs = {
            s: rng.standard_normal(sizes[s][kernel.name]).astype(np.float32) for s in simulators
        }
        rows = {}
        for s in simulators:
            launch_checked(kernel, s, inputs[s][:THREADS])  # warm-up, untimed
            n = inputs[s].size
            rows[s] = Measurement(kernel.name, s, n, -(-n // THREADS) * THREADS)
        for rep in range(repeats):
            for s in simulators:  # interleaved: portkit, numba, portkit, numba, ...
                seconds = launch_checked(kernel, s, inputs[s])
                rows[s].seconds.append(seconds)
                print(
                    f"  {kernel.name:<9} {s:<10} run {rep + 1}/{repeats}: {seconds:6.2f} s, "
                    f"{rows[s].rate(seconds):9,.0f} threads/s",
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
        "elements": m.elements,
        "threads": m.threads,
        "seconds": m.seconds,
        "median_s": median,
        "min_s": min(m.seconds),
        "max_s": max(m.seconds),
        "threads_per_s_median": m.rate(median),
        "threads_per_s_min": m.rate(max(m.seconds)),
        "threads_per_s_max": m.rate(min(m.seconds)),
    }


def ratios(rows: list[dict]) -> dict:
    """Lockstep's median threads/s over the per-thread engine's and over numba's, per
    kernel (None where a simulator has no row)."""
    by = {(r["kernel"], r["simulator"]): r["threads_per_s_median"] for r in rows}

    def over(k: str, other: str) -> float | None:
        if (k, "lockstep") in by and (k, other) in by:
            return by[(k, "lockstep")] / by[(k, other)]
        return None

    return {k.name: {s: over(k.name, s) for s in ("per-thread", "numba")} for k in KERNELS}


def print_report(env: dict, rows: list[dict], ratio: dict, repeats: int) -> None:
    print(f"# Simulator benchmark, {env['date']}\n")
    print(f"- machine: {env['machine']}, {env['processor']}, {env['cpu_count']} CPUs")
    print(
        f"- python {env['python']}, numba {env['numba']}, numba-cuda {env['numba-cuda']}, "
        f"numpy {env['numpy']}"
    )
    print(
        f"- {repeats} launch{'es' if repeats > 1 else ''} per row, interleaved "
        f"lockstep/per-thread/numba; "
        f"{THREADS} threads per block; every output checked against NumPy\n"
    )
    print(
        "| kernel | simulator | threads per launch | s per launch, median (min-max) "
        "| threads/s, median (min-max) |"
    )
    print("|---|---|---:|---:|---:|")
    for k in KERNELS:
        for s in SIMULATORS:
            r = next((r for r in rows if r["kernel"] == k.name and r["simulator"] == s), None)
            if r is None:
                print(f"| {k.name} | {s} | n/a | n/a | n/a (no warp shuffles) |")
                continue
            print(
                f"| {k.name} | {s} | {r['threads']:,} | {r['median_s']:.2f} "
                f"({r['min_s']:.2f}-{r['max_s']:.2f}) | {r['threads_per_s_median']:,.0f} "
                f"({r['threads_per_s_min']:,.0f}-{r['threads_per_s_max']:,.0f}) |"
            )
    print("\n| kernel | lockstep / per-thread | lockstep / numba (ratios of median threads/s) |")
    print("|---|---:|---:|")
    show = lambda v: "n/a" if v is None else f"{v:.1f}x"  # noqa: E731
    for name, value in ratio.items():
        print(f"| {name} | {show(value['per-thread'])} | {show(value['numba'])} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="launches per row (default 5)")
    parser.add_argument(
        "--quick", action="store_true", help="small sizes and 1 launch per row: a smoke test"
    )
    parser.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="also write the numbers and versions to FILE as JSON",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    repeats = 1 if args.quick else args.repeats

    env = environment()
    measurements = measure(QUICK_SIZES if args.quick else SIZES, repeats, args.seed)
    rows = [summary(m) for m in measurements]
    ratio = ratios(rows)
    print_report(env, rows, ratio, repeats)
    if args.json is not None:
        document = {
            **env,
            "repeats": repeats,
            "quick": args.quick,
            "threads_per_block": THREADS,
            "results": rows,
            "ratio_of_medians": ratio,
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n")
        print(f"\nwrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
