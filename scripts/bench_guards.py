"""What guard zones cost a check: each op's cases with guards on and off, same process.

    PYTHONPATH=$PWD python scripts/bench_guards.py                  # CPU: the simulator
    PYTHONPATH=$PWD python scripts/bench_guards.py --backend twin --backend numba  # GPU

Runs the harness (``run_case``) for every case of every op the backends can run, first
once to warm up (compiles, caches), then ``--repeat`` times alternating guards on and
off, and prints the median seconds per op and the overhead in percent as a Markdown
table (and ``--json``). A case that fails is reported, not timed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from functools import partial

from portkit.bench.timing import host_rounds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", action="append", default=None)
    parser.add_argument("--op", action="append", default=None)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--small", action="store_true", help="skip the GPU-only large cases")
    args = parser.parse_args(argv)

    from portkit.backends import create_all
    from portkit.checking.harness import CheckSettings, run_case, skip_reason
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    config = load_config()
    catalog = discover(config)
    backends = create_all(config, args.backend or ["sim"])
    on, off = CheckSettings(guards=True), CheckSettings(guards=False)
    rows = []
    for name in args.op or catalog.names:
        op = catalog.get(name)
        cases = [
            c
            for c in op.definition.cases
            if all(skip_reason(op, c, b) is None for b in backends)
            and not (args.small and c.gpu_only)
        ]
        if not cases:
            continue
        failed = False
        for settings in (on, off):  # warm up: numba and NVRTC compiles, torch's caches
            for case in cases:
                failed |= any(r.failed for r in run_case(op, case, backends, settings))
        times = host_rounds(
            {
                "on": partial(_run_cases, run_case, op, cases, backends, on),
                "off": partial(_run_cases, run_case, op, cases, backends, off),
            },
            rounds=args.repeat,
            finish=partial(_synchronize, backends),
        )
        with_guards = statistics.median(times["on"])
        without = statistics.median(times["off"])
        row = {
            "op": name,
            "backends": [b.name for b in backends],
            "cases": len(cases),
            "guards_s": round(with_guards, 4),
            "plain_s": round(without, 4),
            "overhead_percent": round(100 * (with_guards / without - 1), 1),
            "failed": failed,
        }
        rows.append(row)
        if not args.json:  # row by row: a timeout still leaves the ops done so far
            if len(rows) == 1:
                print(f"backends: {', '.join(b.name for b in backends)}; median of {args.repeat}")
                print("| op | cases | with guards (s) | without (s) | overhead |")
                print("|---|---:|---:|---:|---:|")
            note = " (a case failed)" if row["failed"] else ""
            print(
                f"| {row['op']}{note} | {row['cases']} | {row['guards_s']:.3f} | "
                f"{row['plain_s']:.3f} | {row['overhead_percent']:+.1f}% |",
                flush=True,
            )
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


def _run_cases(run_case, op, cases, backends, settings) -> None:
    for case in cases:
        run_case(op, case, backends, settings)


def _synchronize(backends) -> None:
    if any(b.device == "cuda" for b in backends):
        import torch

        torch.cuda.synchronize()


if __name__ == "__main__":
    sys.exit(main())
