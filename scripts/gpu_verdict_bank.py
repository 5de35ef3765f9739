"""The verdict bank (tests/simt/verdict_bank.py) on a GPU with numba and in portkit's
simulator, side by side: the ground truth for the simulator's error/warning rules.

    python scripts/gpu_verdict_bank.py [--launches 100] [--json FILE] [--only NAME ...]
    python scripts/gpu_verdict_bank.py --only barrier_divergence counters_read_beside_atomics \
        --json tests/simt/verdict_bank_gpu.json   # adds (or refreshes) those rows only
    python scripts/gpu_verdict_bank.py --stress     # the missing-barrier races at 1,024 threads

For each kernel: how many of ``--launches`` GPU launches (numba, the same inputs each
time) left a wrong result and how many distinct results they left; then portkit's
verdict on the same kernel and inputs (red: an error report, or values that differ from
the expected ones; yellow: warnings only). The last column says whether the two agree:
red exactly where the GPU was ever wrong, or where the kernel carries a bug the GPU did
not show in these launches (said so). Without a GPU the GPU columns read "no GPU".
Prints a Markdown table for docs/simulator.md; ``--json`` keeps every figure.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.simt.verdict_bank import (  # noqa: E402
    BANK,
    Entry,
    run_in_simulator,
    run_on_gpu,
    stress_variants,
)


def gpu_available() -> bool:
    from numba import cuda

    try:
        return bool(cuda.is_available())
    except Exception:  # a driver that cannot be loaded is no GPU
        return False


def agreement(entry: Entry, gpu: dict[str, Any] | None, sim: dict[str, Any]) -> str:
    red = sim["verdict"] == "error" or bool(sim["wrong"])
    if gpu is None:
        return "red" if red else "not red"
    ever_wrong = gpu["wrong"] > 0
    if red == ever_wrong:
        return "agrees"
    if red and entry.bug:
        return "agrees (bug not shown by the GPU in these launches)"
    return "DISAGREES"


def row(entry: Entry, gpu: dict[str, Any] | None, sim: dict[str, Any]) -> str:
    if gpu is None:
        outcome = "no GPU"
    elif gpu["wrong"] == 0:
        outcome = f"right {gpu['launches']}/{gpu['launches']}"
    else:
        outcome = f"wrong {gpu['wrong']}/{gpu['launches']} ({gpu['distinct_results']} distinct)"
    if sim["verdict"] == "error":
        verdict = f"error: {sim['kind']}"
    elif sim["wrong"]:
        verdict = "error: values differ"
    elif sim.get("warnings"):
        verdict = "warning: " + ", ".join(sorted(set(sim["warnings"])))
    else:
        verdict = "clean"
    return (
        f"| {entry.name} | {entry.bug or 'correct'} | {outcome} | {verdict} | "
        f"{agreement(entry, gpu, sim)} |"
    )


def merged(path: Path, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` in place of the rows of the same kernels in ``path`` (kept otherwise),
    in the bank's order: ``--only A B --json FILE`` adds or refreshes those rows."""
    rows = {r["kernel"]: r for r in json.loads(path.read_text())} if path.exists() else {}
    rows.update((r["kernel"], r) for r in records)
    order = {e.name: k for k, e in enumerate(BANK)}
    return sorted(rows.values(), key=lambda r: order.get(r["kernel"], len(order)))


def stress(launches: int) -> int:
    if not gpu_available():
        print("no GPU: --stress runs on a GPU only")
        return 3
    print("| kernel | GPU (numba) |\n|---|---|")
    for entry in stress_variants():
        gpu = run_on_gpu(entry, launches)
        print(f"| {entry.name} | wrong {gpu['wrong']}/{launches} "
              f"({gpu['distinct_results']} distinct) |", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=100)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument(
        "--stress", action="store_true", help="GPU only: the races at 1,024 threads"
    )
    args = parser.parse_args()
    if args.stress:
        return stress(args.launches)
    entries = [e for e in BANK if not args.only or e.name in args.only]
    on_gpu = gpu_available()
    print("| kernel | bug | GPU (numba) | portkit simulator | agreement |")
    print("|---|---|---|---|---|")
    records, disagreements = [], 0
    for entry in entries:
        gpu = run_on_gpu(entry, args.launches) if on_gpu else None
        sim = run_in_simulator(entry)
        line = row(entry, gpu, sim)
        disagreements += "DISAGREES" in line
        print(line, flush=True)
        records.append({"kernel": entry.name, "bug": entry.bug, "gpu": gpu, "simulator": sim})
    if args.json:
        args.json.write_text(json.dumps(merged(args.json, records), indent=1) + "\n")
    print(f"\n{len(entries)} kernels, {disagreements} disagreements, GPU: {on_gpu}")
    return 1 if disagreements else 0


if __name__ == "__main__":
    raise SystemExit(main())
