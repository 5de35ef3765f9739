"""Cold start-up of portkit commands: fresh processes, interleaved, medians.

    python scripts/bench_startup.py [--runs 5] [--tree DIR ...] [--json FILE]

Each run is a new Python process (imports and first-call costs included; disk caches,
the twin-cpu build, Python's bytecode, as they are, warmed once before timing). The
floor, ``python -c "import torch, numba.cuda"``, is timed in the same rounds, and every
command of every tree (``--tree``: a checkout of portkit, default the one holding this
script; two trees compare before and after) runs once per round, so a slow patch of a
shared machine hits all of them alike. Reports the median wall and user+system CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from portkit.bench.timing import host_call

COMMANDS = {
    "floor: import torch, numba.cuda": ["-c", "import torch, numba.cuda"],
    "portkit --help": ["-m", "portkit.cli", "--help"],
    "portkit list": ["-m", "portkit.cli", "list"],
    "portkit sim sigmoid": ["-m", "portkit.cli", "sim", "sigmoid"],
    "portkit check sigmoid --backend sim": [
        "-m",
        "portkit.cli",
        "check",
        "sigmoid",
        "--backend",
        "sim",
    ],
    "portkit check sigmoid": ["-m", "portkit.cli", "check", "sigmoid"],
    "portkit check sigmoid, PORTKIT_PROTOTYPE_CACHE=0": [
        "-m",
        "portkit.cli",
        "check",
        "sigmoid",
    ],
}
# Extra environment per command (a tree without the prototype cache ignores it).
ENV = {"portkit check sigmoid, PORTKIT_PROTOTYPE_CACHE=0": {"PORTKIT_PROTOTYPE_CACHE": "0"}}


def run_once(tree: Path, argv: list[str], extra: dict | None = None) -> tuple[float, float, int]:
    env = {**os.environ, "PYTHONPATH": str(tree), **(extra or {})}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done, wall = host_call(
        subprocess.run, [sys.executable, *argv], cwd=tree, env=env, capture_output=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tree", type=Path, action="append")
    parser.add_argument("--only", action="append", help="only commands containing this text")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    trees = args.tree or [Path(__file__).resolve().parent.parent]
    commands = {
        name: argv
        for name, argv in COMMANDS.items()
        if not args.only or name.startswith("floor") or any(o in name for o in args.only)
    }
    jobs = [
        (str(tree), name, argv, ENV.get(name))
        for name, argv in commands.items()
        # the floor once; a command with its own environment only in the last tree
        for tree in (
            trees[:1] if name.startswith("floor") else trees[-1:] if name in ENV else trees
        )
    ]
    for tree, _, argv, extra in jobs:  # warm disk caches; not timed
        run_once(Path(tree), argv, extra)
    times: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    for _ in range(args.runs):
        for tree, name, argv, extra in jobs:
            times.setdefault((tree, name), []).append(run_once(Path(tree), argv, extra))
    rows = []
    for (tree, name), samples in times.items():
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        codes = sorted({s[2] for s in samples})
        rows.append({"tree": tree, "command": name, "wall_s": wall, "cpu_s": cpu, "exit": codes})
        print(f"{name:50} {wall:6.2f} s wall  {cpu:6.2f} s cpu  exit {codes}  {tree}")
    print(f"load average after: {os.getloadavg()}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
