"""``portkit mutate`` on each repository op, and the table docs/mutate.md shows.

Run from the repository root (CPU: the simulator and the CPU twin; GPU machine: numba
and the GPU twin as well):

    PYTHONPATH=$PWD python scripts/mutate_table.py [OP ...] [--limit 16] [--out DIR]
    PYTHONPATH=$PWD python scripts/mutate_table.py --from DIR     # the table only

Each op runs as ``python -m portkit.cli mutate OP --quick --limit N --json`` in its own
process (its JSON kept in DIR/OP.json); the table has a row per op, then a row per kind.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from portkit.bench.timing import host_call

OPS = (
    "vector_add sigmoid elementwise_mul histogram cumsum matmul softmax_warp softmax "
    "rmsnorm layernorm add_rmsnorm"
).split()
KINDS = ("barrier", "bound", "index", "int32", "atomic", "accum", "tail", "shuffle", "guard")


def run(ops: list[str], limit: int, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for op in ops:
        args = ["mutate", op, "--quick", "--limit", str(limit), "--json"]
        command = [sys.executable, "-m", "portkit.cli", *args]
        proc, seconds = host_call(subprocess.run, command, capture_output=True, text=True)
        (out / f"{op}.json").write_text(proc.stdout)
        (out / f"{op}.seconds").write_text(f"{seconds:.0f}\n")
        print(f"{op}: exit {proc.returncode}, {seconds:.0f} s", file=sys.stderr)


def table(folder: Path) -> str:
    rows = [
        "| op | mutants run (generated) | killed | survived | stillborn | killed by | wall s |",
        "|---|---|---|---|---|---|---|",
    ]
    kinds: dict[str, Counter[str]] = {k: Counter() for k in KINDS}
    order = {op: i for i, op in enumerate(OPS)}
    for path in sorted(folder.glob("*.json"), key=lambda p: order.get(p.stem, len(OPS))):
        text = path.read_text().strip()
        if not text:
            continue
        for op in json.loads(text)["ops"]:
            killers = ", ".join(f"{k} {n}" for k, n in Counter(op["killed_by"]).most_common())
            seconds_file = path.with_suffix(".seconds")
            seconds = seconds_file.read_text().strip() if seconds_file.exists() else ""
            rows.append(
                f"| {op['op']} | {op['run']} ({op['generated']}) | {op['killed']} | "
                f"{op['survived']} | {op['stillborn']} | {killers} | {seconds} |"
            )
            for m in op["mutants"]:
                kinds[m["kind"]][m["status"]] += 1
    rows += ["", "| kind | killed | survived | stillborn |", "|---|---|---|---|"]
    for kind, counts in kinds.items():
        rows.append(
            f"| {kind} | {counts['killed']} | {counts['survived']} | {counts['stillborn']} |"
        )
    return "\n".join(rows)


def survivors(folder: Path) -> str:
    lines = []
    for path in sorted(folder.glob("*.json")):
        text = path.read_text().strip()
        for op in json.loads(text)["ops"] if text else []:
            for m in op["mutants"]:
                if m["status"] == "survived":
                    lines.append(f"- {m['file']}:{m['line']} {m['kind']}: {m['description']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ops", nargs="*", default=OPS)
    parser.add_argument("--limit", type=int, default=16)
    parser.add_argument("--out", type=Path, default=Path("mutate-results"))
    parser.add_argument("--from", dest="source", type=Path, default=None)
    args = parser.parse_args()
    folder = args.source or args.out
    if args.source is None:
        run(args.ops, args.limit, folder)
    print(table(folder))
    print()
    print(survivors(folder))


if __name__ == "__main__":
    main()
