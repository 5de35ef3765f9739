"""Run the wrong-twin bank (tests/check/wrong_twins/, patches applied) on the CPU twin
backend and print
which mistakes `portkit check --backend twin-cpu` catches, by which rows.

    PYTHONPATH=$PWD python scripts/wrong_twins_cpu.py [--portkit DIR] [--json OUT]

The twin-cpu rows compare the wrong twin against the reference (the measured control
since 2026-11-27); `--portkit DIR` runs another checkout's portkit (e.g. the commit before
the control) on the same bank, so the two verdicts can be compared mistake by mistake.
Cases are the bank's non-large ones; a race the CPU twin cannot see stays uncaught here
and is listed so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the bank's applier lives with the tests

from tests.check.wrong_twin_bank import bank  # noqa: E402


def mistakes() -> list[tuple[str, str, Path, str]]:
    """(op, mistake, prototype, wrong twin's source) for every twin in the bank."""
    return [(t.op, t.name, t.prototype, t.text()) for t in bank()]


def run(portkit: Path, op: str, name: str, prototype: Path, twin: str) -> dict:
    op_name = f"wt_{op}_{name}"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pyproject.toml").write_text(
            '[project]\nname = "bank"\nversion = "0"\n\n[tool.portkit]\nprototypes = '
            '"prototypes"\ncuda-src = "cuda_src"\ncache-dir = ".portkit-cache"\n'
        )
        (root / "prototypes").mkdir()
        (root / "cuda_src").mkdir()
        (root / "prototypes" / f"{op_name}.py").write_text(prototype.read_text())
        (root / "cuda_src" / f"{op_name}.cu").write_text(twin)
        env = dict(os.environ, PYTHONPATH=str(portkit))
        args = ["check", op_name, "--backend", "twin-cpu", "--no-compile", "--quick", "--json"]
        proc = subprocess.run(
            [sys.executable, "-m", "portkit.cli", *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
    try:
        rows = json.loads(proc.stdout)["results"]
    except (json.JSONDecodeError, KeyError):
        return {"rc": proc.returncode, "failed": [], "error": proc.stderr[-500:]}
    failed = sorted({f"{r['check']}:{r['case']}" for r in rows if r["status"] == "fail"})
    return {"rc": proc.returncode, "failed": failed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--portkit", type=Path, default=REPO, help="the portkit checkout to run")
    parser.add_argument("--json", type=Path, default=None, help="write the verdicts here")
    args = parser.parse_args()
    verdicts = {}
    print(f"{'mistake':40s} {'caught':6s} rows failed (check:case)")
    for op, name, prototype, twin in mistakes():
        verdict = run(args.portkit.resolve(), op, name, prototype, twin)
        verdicts[f"{op}/{name}"] = verdict
        caught = "yes" if verdict["failed"] else "NO"
        shown = ", ".join(verdict["failed"][:4]) + (" ..." if len(verdict["failed"]) > 4 else "")
        print(f"{op + '/' + name:40s} {caught:6s} {len(verdict['failed']):3d} {shown}", flush=True)
    caught = sum(bool(v["failed"]) for v in verdicts.values())
    print(f"{caught} of {len(verdicts)} caught by twin-cpu")
    if args.json:
        args.json.write_text(json.dumps(verdicts, indent=1))


if __name__ == "__main__":
    main()
