"""Tables for `scripts/gpu.sh sanitizer`: sanitizer tools against the plain check, per op.

    python scripts/trust_report.py WORK_DIR

reads WORK_DIR/plain.json (``portkit check --json``), WORK_DIR/<tool>.json
(``portkit check --sanitize TOOL --json``) and WORK_DIR/*.wall (wall seconds of each
process) and prints Markdown: per tool, whether the good ops were clean; per op, the
seconds the checks took in-process under each tool against the plain check.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")


def _load(path: Path) -> dict:
    try:
        text = path.read_text()
        return json.loads(text[text.index("{") :])
    except (OSError, ValueError):
        return {}


def _wall(work: Path, name: str) -> str:
    path = work / f"{name}.wall"
    return path.read_text().strip() if path.is_file() else "?"


def _per_op(results: list[dict]) -> dict[str, float]:
    seconds: dict[str, float] = defaultdict(float)
    for row in results:
        seconds[row["op"]] += row.get("seconds", 0.0)
    return seconds


def main(work: Path) -> int:
    plain = _load(work / "plain.json").get("results", [])
    plain_failed = sorted(
        {
            f"{r['op']}/{r['backend']}/{r['check']}/{r['case']}"
            for r in plain
            if r["status"] == "fail"
        }
    )
    columns = {"plain": _per_op(plain)}
    print("| tool | status | own findings | other findings | checks failed | wall s |")
    print("|---|---|---:|---:|---:|---:|")
    print(
        f"| plain check | {'FAIL' if plain_failed else 'pass'} | - | - | "
        f"{len(plain_failed)} | {_wall(work, 'plain')} |"
    )
    clean = not plain_failed
    for tool in TOOLS:
        report = _load(work / f"{tool}.json")
        runs = report.get("sanitizer", [])
        if not runs:
            print(f"| {tool} | {report.get('skipped', 'no result')} | | | | {_wall(work, tool)} |")
            clean = False
            continue
        run = runs[0]
        own = [f for f in run["findings"] if f["op"]]
        other = len(run["findings"]) - len(own)
        failed = sum(r["status"] == "fail" for r in run.get("results", []))
        print(
            f"| {tool} | {run['status']} | {len(own)} | {other} | {failed} | {_wall(work, tool)} |"
        )
        for finding in own[:5]:
            print(
                f"|   {finding['op']} {finding['implementation']} {finding['kernel']} "
                f"{finding['file']}:{finding['line']} | {finding['kind']} | | | | |"
            )
        clean &= run["status"] == "clean"
        columns[tool] = _per_op(run.get("results", []))
    print()
    print("Seconds of checks in-process per op (numba + twin), plain check and under each tool:")
    print()
    print("| op | plain | " + " | ".join(TOOLS) + " |")
    print("|---|---:|" + "---:|" * len(TOOLS))
    for op in sorted(columns["plain"]):
        base = columns["plain"][op]
        cells = []
        for tool in TOOLS:
            value = columns.get(tool, {}).get(op)
            ratio = f" ({value / base:.1f}x)" if value and base else ""
            cells.append(f"{value:.2f}{ratio}" if value is not None else "-")
        print(f"| {op} | {base:.2f} | " + " | ".join(cells) + " |")
    print()
    print(f"GOOD OPS CLEAN UNDER ALL FOUR TOOLS: {'yes' if clean else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
