"""What each op's large case costs on a CPU backend: seconds per check, engines, memory.

    PYTHONPATH=$PWD python scripts/time_large_cases.py                 # every op, `sim`
    PYTHONPATH=$PWD python scripts/time_large_cases.py --op sigmoid --backend twin-cpu
    PYTHONPATH=$PWD python scripts/time_large_cases.py --profile 25    # + top cProfile rows
    PYTHONPATH=$PWD python scripts/time_large_cases.py --gpu-only      # GPU-only ones too

Each (op, large case) runs in a fresh child process (so peak resident memory is the
case's own) through the harness (``run_case``); with ``--gpu-only`` the large cases kept
off the simulator are timed as well (their ``gpu_only`` cleared). Prints one Markdown
row per case: wall seconds of the child, each check's seconds and status, the engine of
each launch (lockstep, or per-thread and why), peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

from portkit.bench.timing import host_call


def _large_cases(op, gpu_only: bool) -> list:
    """The op's large cases the simulator runs; with ``gpu_only`` the GPU-only ones too."""
    return [c for c in op.definition.cases if c.large and (gpu_only or not c.gpu_only)]


def run_one(op_name: str, case_name: str, backend_name: str, profile: int) -> dict:
    """In the child: run one case, return what it cost."""
    from dataclasses import replace

    from portkit.backends import create
    from portkit.checking.harness import run_case
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    config = load_config()
    op = discover(config).get(op_name)
    case = replace(op.case(case_name), gpu_only=False)
    backend = create(backend_name, config)
    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        results, seconds = host_call(profiler.runcall, run_case, op, case, [backend])
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(profile)
    else:
        results, seconds = host_call(run_case, op, case, [backend])
    machine = getattr(backend, "machine", None)
    engines = [f"{e.kernel}: {e.engine} ({e.reason})" for e in getattr(machine, "engines", [])]
    return {
        "op": op_name,
        "case": case_name,
        "backend": backend_name,
        "seconds": seconds,
        "checks": [(r.check, r.status, round(r.seconds, 2), r.detail[:200]) for r in results],
        "engines": engines,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", action="append", default=None)
    parser.add_argument("--backend", default="sim")
    parser.add_argument("--profile", type=int, default=0, metavar="ROWS")
    parser.add_argument("--json", default=None, metavar="FILE")
    parser.add_argument("--gpu-only", action="store_true", help="time the GPU-only ones too")
    parser.add_argument("--child", nargs=2, metavar=("OP", "CASE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_one(*args.child, args.backend, args.profile)))
        return 0

    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    catalog = discover(load_config())
    rows = []
    print("| op | case | wall s | checks (s) | engines | peak RSS MB |")
    print("|---|---|---:|---|---|---:|")
    for name in args.op or catalog.names:
        for case in _large_cases(catalog.get(name), args.gpu_only):
            command = [sys.executable, __file__, "--backend", args.backend]
            command += ["--profile", str(args.profile), "--child", name, case.name]
            child, wall = host_call(
                subprocess.run, command, capture_output=True, text=True, check=False
            )
            if args.profile:
                print(child.stderr, file=sys.stderr)
            if child.returncode:
                print(
                    f"| {name} | {case.name} | {wall:.1f} | child failed: "
                    f"{child.stderr.strip().splitlines()[-1:]} | | |"
                )
                continue
            row = json.loads(child.stdout.strip().splitlines()[-1])
            row["wall"] = wall
            rows.append(row)
            checks = ", ".join(f"{c} {s} {t}" for c, s, t, _ in row["checks"])
            failed = [f"{c}: {d}" for c, s, _, d in row["checks"] if s == "FAIL"]
            engines = "; ".join(dict.fromkeys(row["engines"]))
            print(
                f"| {name} | {case.name} | {wall:.1f} | {checks} | {engines} | "
                f"{row['peak_rss_mb']:.0f} |",
                flush=True,
            )
            for line in failed:
                print(f"    FAIL {line}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
