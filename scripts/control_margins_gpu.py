"""On a GPU machine: every op's checks with N seeds under the measured control, and the
worst margin per check (largest error over its bound; 1 is the bound), as a table.

    PYTHONPATH=$PWD python scripts/control_margins_gpu.py [--seeds 5] [--quick] [OP ...]

It runs `portkit check OPs --seeds N --json` (every op without OPs; the GPU-sized cases
too unless --quick) and prints each check's worst margin with its case and seed, then
the failing rows. What to look for: no failure, and margins well below 1 (a margin
above ~0.8 is a near-miss some other seed may turn red). The declared tolerances of
rmsnorm and add_rmsnorm's 16384x4096 weight gradients still apply there (bench verifies
against them); the control's own margin for those was emulated on the CPU (0.07-0.11).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ops", nargs="*", help="ops to check (default: all)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="leave out the GPU-sized cases")
    args = parser.parse_args()
    command = [sys.executable, "-m", "portkit.cli", "check", *(args.ops or ["--all"])]
    command += ["--seeds", str(args.seeds), "--json", "--no-compile"]
    if args.quick:
        command.append("--quick")
    proc = subprocess.run(command, capture_output=True, text=True)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        print(proc.stdout[-2000:], proc.stderr[-4000:], sep="\n")
        sys.exit(2)
    print(f"exit {proc.returncode}; {' '.join(command[2:])}")
    print(f"{'op':14s} {'backend':10s} {'check':14s} {'worst margin':>12s}  case (seed)")
    for w in report.get("worst_margins", []):
        margin = w["margin"] if isinstance(w["margin"], str) else f"{w['margin']:.3g}"
        print(f"{w['op']:14s} {w['backend']:10s} {w['check']:14s} {margin:>12s}  "
              f"{w['case']} ({w['seed']})")
    failed = [r for r in report["results"] if r["status"] == "fail"]
    print(f"{len(failed)} failed rows of {len(report['results'])}")
    for r in failed:
        first = r["detail"].splitlines()[0] if r["detail"] else ""
        print(f"FAIL {r['op']} / {r['backend']} / {r['check']} / {r['case']}: {first[:300]}")


if __name__ == "__main__":
    main()
