"""The verdict bank (tests/simt/verdict_bank.py) on a GPU with numba and in portkit's
simulator, side by side: the ground truth for the simulator's error/warning rules.

    python scripts/gpu_verdict_bank.py [--launches 100] [--json FILE] [--only NAME ...]

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

from tests.simt.verdict_bank import BANK, Entry, run_in_simulator, run_on_gpu  # noqa: E402


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=100)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", nargs="*", default=[])
    args = parser.parse_args()
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
        args.json.write_text(json.dumps(records, indent=1) + "\n")
    print(f"\n{len(entries)} kernels, {disagreements} disagreements, GPU: {on_gpu}")
    return 1 if disagreements else 0


if __name__ == "__main__":
    raise SystemExit(main())
