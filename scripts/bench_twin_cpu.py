"""Simulated CUDA threads per second of the CPU twin (``twin-cpu``), for docs/twin-cpu.md.

Run from the repository root: ``PYTHONPATH=$PWD python scripts/bench_twin_cpu.py``.
Plain build in this process; check build (ASan + UBSan, each launch run twice, in the
worker process, tensors copied there and back) on the same launches. The library is
built (or taken from the cache) before timing. Medians of a few runs.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from portkit.backends import create
from portkit.bench.timing import host_rounds
from portkit.launch.compose import compose_kernels
from portkit.project.config import load_config
from portkit.project.discovery import discover


def launches(op_name: str, k, scale: int):
    """(label, threads, call) for one op's forward kernel."""
    if op_name == "vector_add":
        n = (1 << 20) // scale
        a, b = torch.randn(n), torch.randn(n)
        out = k.empty_like(a)
        blocks = (n + 255) // 256
        return f"vector_add n={n}", blocks * 256, lambda: k.vector_add[blocks, 256](a, b, out, n)
    rows, cols = 512 // scale, 1024
    x = torch.randn(rows, cols)
    out = k.empty_like(x)
    kernel = getattr(k, f"{op_name}_fwd")
    return f"{op_name} {rows}x{cols}", rows * 128, lambda: kernel[rows, 128](x, out, cols)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    config = load_config()
    catalog = discover(config)
    backend = create("twin-cpu", config)
    if backend.unavailable_reason:
        raise SystemExit(f"twin-cpu cannot run here: {backend.unavailable_reason}")
    print(f"{'launch':<28} {'mode':<6} {'threads':>9} {'seconds':>9} {'threads/s':>12}")
    for op_name in ("vector_add", "softmax", "softmax_warp"):
        op = catalog.get(op_name)
        for mode, scale in (("plain", 1), ("check", 8)):
            checked = mode == "check"  # the harness's k: check build, poisoned outputs
            k = compose_kernels(backend, op, checked=checked, poison=checked)
            label, threads, call = launches(op_name, k, scale)
            call()  # warm: library loaded, worker started
            times = host_rounds({label: call}, rounds=args.repeat)[label]
            seconds = statistics.median(times)
            rate = threads / seconds
            print(f"{label:<28} {mode:<6} {threads:>9} {seconds:>9.3f} {rate:>12,.0f}")


if __name__ == "__main__":
    main()
