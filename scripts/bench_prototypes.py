"""GPU timing of the sigmoid kernels before and after the `portkit lint` fix, side by side
in one run: the float64-promoting prototype as it was (kept here verbatim), the fixed
prototype from prototypes/sigmoid.py, the twin, torch.sigmoid, and a plain copy.

    python scripts/bench_prototypes.py [--elements 67108864] [--repeat 20]

Each figure: median over `repeat` timings of 10 back-to-back launches on torch's
stream (so Python launch overhead overlaps GPU work), CUDA events, L2 flushed before
each timing. Bandwidth counts bytes read plus written.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import torch
from numba import cuda

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

THREADS = 256
LAUNCHES = 10


# --- the prototype before the lint fix (prototypes/sigmoid.py at commit "Core: ...") ---
@cuda.jit(device=True)
def stable_sigmoid_before(v):
    if v >= 0:
        z = math.exp(-v)
        return 1 / (1 + z)
    z = math.exp(v)
    return z / (1 + z)


@cuda.jit
def sigmoid_fwd_before(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = stable_sigmoid_before(x[i])


@cuda.jit
def sigmoid_bwd_before(y, dy, dx, n):
    i = cuda.grid(1)
    if i < n:
        s = y[i]
        dx[i] = dy[i] * s * (1 - s)


def time_ms(run, repeat: int) -> float:
    flush = torch.empty(512 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")
    for _ in range(3):
        run()
    samples = []
    stream = torch.cuda.current_stream()
    for _ in range(repeat):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        for _ in range(LAUNCHES):
            run()
        end.record(stream)
        end.synchronize()
        samples.append(start.elapsed_time(end) / LAUNCHES)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=1 << 26)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    from portkit.backends import create
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    config = load_config(ROOT)
    op = discover(config).get("sigmoid")
    numba_k = create("numba", config).kernels(op)
    twin_k = create("twin", config).kernels(op)

    n = args.elements
    x = torch.randn(n, device="cuda")
    dy = torch.randn(n, device="cuda")
    y = torch.sigmoid(x)
    out = torch.empty_like(x)
    grid = (n + THREADS - 1) // THREADS
    stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
    xa, ya, dya, outa = (cuda.as_cuda_array(t, sync=False) for t in (x, y, dy, out))

    # Same outputs before timing: the fix must not change results beyond rounding.
    sigmoid_fwd_before[grid, THREADS, stream](xa, outa, n)
    before = out.clone()
    numba_k.sigmoid_fwd[grid, THREADS](x, out, n)
    torch.cuda.synchronize()
    print(f"max |after - before| forward: {float((out - before).abs().max()):.3g}")

    rows = [
        ("copy (x.clone)", 2, lambda: x.clone()),
        ("torch.sigmoid", 2, lambda: torch.sigmoid(x)),
        ("twin sigmoid_fwd<float>", 2, lambda: twin_k.sigmoid_fwd[grid, THREADS](x, out, n)),
        (
            "prototype sigmoid_fwd, before fix",
            2,
            lambda: sigmoid_fwd_before[grid, THREADS, stream](xa, outa, n),
        ),
        (
            "prototype sigmoid_fwd, after fix",
            2,
            lambda: numba_k.sigmoid_fwd[grid, THREADS](x, out, n),
        ),
        ("twin sigmoid_bwd<float>", 3, lambda: twin_k.sigmoid_bwd[grid, THREADS](y, dy, out, n)),
        (
            "prototype sigmoid_bwd, before fix",
            3,
            lambda: sigmoid_bwd_before[grid, THREADS, stream](ya, dya, outa, n),
        ),
        (
            "prototype sigmoid_bwd, after fix",
            3,
            lambda: numba_k.sigmoid_bwd[grid, THREADS](y, dy, out, n),
        ),
    ]
    print(f"\n{torch.cuda.get_device_name(0)}, {n} float32 elements, torch {torch.__version__}")
    print("\n| kernel | median ms | TB/s (read+write) |")
    print("|---|---:|---:|")
    for name, tensors, run in rows:
        ms = time_ms(run, args.repeat)
        print(f"| {name} | {ms:.4f} | {tensors * n * 4 / ms / 1e9:.2f} |")


if __name__ == "__main__":
    main()
