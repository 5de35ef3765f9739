"""What a user gets from `portkit port` before any hand tuning: the drafted twins timed
beside the hand-written twins and torch, on a GPU.

    python scripts/bench_drafts.py [--reps 30] [--json FILE]

Copies this repository's ops into a temporary project, replaces every twin with the
draft `portkit port OP --force` writes, then runs `portkit bench --all` twice on this
machine, one run after the other: in the repository (torch, torch.compile and the hand
twins) and in the copy (the drafted twins). Each run measures its own copy bandwidth.
Prints one row per op, case and direction: torch eager, the hand twin and the draft, in
microseconds (medians), and the draft's time over the hand twin's. An op whose draft
does not port (an `#error` line) is listed with the reason. A benchmark, not a test: the
figures go in docs/port.md with the date and the GPU.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def portkit(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "portkit.cli", *args], cwd=root, capture_output=True, text=True
    )


def draft_project(where: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the repository's ops with every twin replaced by its draft; the ops
    whose draft failed, with the command's last line."""
    root = where / "drafts"
    root.mkdir()
    shutil.copy(REPO / "pyproject.toml", root)
    shutil.copytree(REPO / "prototypes", root / "prototypes")
    shutil.copytree(REPO / "cuda_src", root / "cuda_src")
    failed = {}
    for prototype in sorted((root / "prototypes").glob("*.py")):
        result = portkit(root, "port", prototype.stem, "--force")
        if result.returncode:
            lines = (result.stderr or result.stdout).strip().splitlines()
            failed[prototype.stem] = lines[-1] if lines else f"exit {result.returncode}"
    return root, failed


def bench(root: Path, impls: list[str], reps: int) -> dict:
    args = ["bench", "--all", "--json", "--reps", str(reps)]
    for impl in impls:
        args += ["--impl", impl]
    result = portkit(root, *args)
    if not result.stdout.strip():
        raise SystemExit(f"portkit bench in {root} printed nothing:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout)


def medians(report: dict, impl: str) -> dict[tuple[str, str, str], float]:
    return {
        (r["op"], r["case"], r["direction"]): r["time_us"]["median"]
        for r in report["results"]
        if r["implementation"] == impl and r.get("time_us")
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--json", type=Path, help="Write both reports and the table here.")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="portkit-drafts-") as tmp:
        root, failed = draft_project(Path(tmp))
        hand = bench(REPO, ["torch", "torch.compile", "twin"], options.reps)
        drafts = bench(root, ["twin"], options.reps)
    torch_us, compiled_us = medians(hand, "torch"), medians(hand, "torch.compile")
    hand_us, draft_us = medians(hand, "twin"), medians(drafts, "twin")
    rows = []
    print(
        f"GPU: {hand['machine'].get('gpu')}; copy {hand['copy']['gbps']:.0f} GB/s (hand run), "
        f"{drafts['copy']['gbps']:.0f} GB/s (draft run)"
    )
    print(
        f"{'op':16} {'case':24} {'dir':4} {'torch':>9} {'compile':>9} {'hand':>9} "
        f"{'draft':>9} {'draft/hand':>10}"
    )
    for key in sorted(set(hand_us) | set(draft_us)):
        t, c, h, d = (table.get(key) for table in (torch_us, compiled_us, hand_us, draft_us))
        ratio = d / h if d and h else None
        rows.append(
            {
                "op": key[0],
                "case": key[1],
                "direction": key[2],
                "torch_us": t,
                "compile_us": c,
                "hand_us": h,
                "draft_us": d,
                "draft_over_hand": ratio,
            }
        )
        cells = [f"{v:9.1f}" if v else f"{'-':>9}" for v in (t, c, h, d)]
        shown = f"{ratio:10.2f}" if ratio else f"{'-':>10}"
        print(f"{key[0]:16} {key[1]:24} {key[2][:3]:4} {' '.join(cells)} {shown}")
    for op, why in failed.items():
        print(f"{op}: no draft: {why}")
    if options.json:
        options.json.write_text(
            json.dumps(
                {"rows": rows, "not_ported": failed, "hand": hand, "drafts": drafts}, indent=1
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
