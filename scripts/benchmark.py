"""Figures for results/benchmarks.md: twin compile (cold and cached), the simulator's wall
time on each op's default `portkit sim` case, and `portkit check sigmoid` from a cold
process. Prints a Markdown report; medians of several repetitions, all in one run.

    python scripts/benchmark.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from portkit.bench.timing import host_call, host_rounds  # noqa: E402


def median_seconds(fn, repeat: int) -> float:
    return statistics.median(host_rounds({"fn": fn}, rounds=repeat)["fn"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import torch

    from portkit.backends import create
    from portkit.backends.twin.build import compile_twin
    from portkit.backends.twin.instances import twin_expressions
    from portkit.checking.harness import run_case
    from portkit.project.case_choice import choose_case
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    config = load_config(ROOT)
    catalog = discover(config)
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    print(f"# portkit benchmark, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print(f"- machine: {platform.node()}, {platform.processor() or platform.machine()}, GPU: {gpu}")
    print(
        f"- python {platform.python_version()}, torch {torch.__version__}, numba-cuda "
        f"{version('numba-cuda')}, cuda-core {version('cuda-core')}"
    )
    print(f"- medians of {args.repeat} repetitions\n")

    print("## Twin compile (NVRTC, sm_90, every instantiation of the op)\n")
    print("| op | cold, empty cache (s) | cached (s) |")
    print("|---|---:|---:|")
    for name in catalog.names:
        op = catalog.get(name)
        if not op.has_twin:
            continue
        expressions = twin_expressions(op)
        with tempfile.TemporaryDirectory() as warm_dir:

            def cold(op=op, expressions=expressions) -> None:
                with tempfile.TemporaryDirectory() as cache:
                    compile_twin(op.twin_path, expressions, Path(cache))

            cold_s = median_seconds(cold, args.repeat)
            compile_twin(op.twin_path, expressions, Path(warm_dir))
            cached_s = median_seconds(
                lambda op=op, e=expressions, d=warm_dir: compile_twin(op.twin_path, e, Path(d)),
                args.repeat,
            )
        print(f"| {name} | {cold_s:.3f} | {cached_s:.4f} |")

    print("\n## Simulator: each op's default `portkit sim` case (the `sim` backend)\n")
    print("| op | case | simulated threads per launch | forward+backward wall (s) |")
    print("|---|---|---:|---:|")
    sim = create("sim", config)
    for name in catalog.names:
        op = catalog.get(name)
        case = choose_case(op, None, "float32", None, None)
        seconds = median_seconds(
            lambda op=op, case=case: run_case(op, case, [sim]), max(1, args.repeat // 2)
        )
        threads = _threads(op, case)
        print(f"| {name} | {case.name} | {threads} | {seconds:.2f} |")

    print("\n## `portkit check sigmoid` from a cold process (wall, s)\n")
    command = [sys.executable, "-m", "portkit.cli", "check", "sigmoid"]
    samples = []
    for _ in range(3):
        done, seconds = host_call(subprocess.run, command, cwd=ROOT, capture_output=True, text=True)
        samples.append(seconds)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
    print(
        f"median {statistics.median(samples):.2f} s over 3 runs; exit {done.returncode}; "
        f"last line: `{summary}`"
    )


def _threads(op, case) -> int:
    """Threads the forward launches, from a recording run of the launcher."""
    from portkit.launch.trace import record_launches

    return sum(launch.threads for launch in record_launches(op, case, backward=False))


if __name__ == "__main__":
    main()
