"""The simulator's verdicts held against what a GPU did with the same kernels.

``verdict_bank_gpu.json`` records 100 numba launches of each kernel of
``verdict_bank.py`` on a GPU (scripts/gpu_verdict_bank.py; the card and date are in
docs/simulator.md). The simulator must be red (an error report, or values that differ
from the expected ones) for every kernel whose GPU output was ever wrong, and for every
kernel that carries a bug; it must never be red for a correct kernel, whose GPU output
was right in every launch. The GPU test re-runs the correct kernels on a GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.simt.verdict_bank import BANK, Entry, run_in_simulator, run_on_gpu

RECORDED = {
    r["kernel"]: r
    for r in json.loads((Path(__file__).parent / "verdict_bank_gpu.json").read_text())
}
# Correct kernels that lean on what the CUDA C++ guide leaves undefined: a warning each.
WARNED = {
    "block_sum_early_return": "barrier-after-exit",
    "block_max_early_return": "barrier-after-exit",
    "tree_sum_early_return_loop": "barrier-after-exit",
    "all_store_same": "same-value-race",
    "any_positive_flag": "same-value-race",
    "matmul_tiled_discarded_loads": "uninitialised-read",
}


GPU_COMMAND = "python scripts/gpu_verdict_bank.py --only {} --json tests/simt/verdict_bank_gpu.json"


def test_the_bank_is_half_correct_half_buggy() -> None:
    correct = [e for e in BANK if e.correct]
    assert len(BANK) >= 30 and abs(len(correct) - len(BANK) / 2) <= 2
    stale = set(RECORDED) - {e.name for e in BANK}
    assert not stale, f"rows of kernels no longer in the bank: {stale}; drop them from the json"


@pytest.mark.parametrize("entry", BANK, ids=lambda e: e.name)
def test_the_recorded_gpu_runs_match_the_labels(entry: Entry) -> None:
    """A correct kernel was right in every GPU launch; a kernel the GPU ever got wrong is
    labelled with its bug."""
    if RECORDED.get(entry.name, {}).get("gpu") is None:
        command = GPU_COMMAND.format(entry.name)
        pytest.skip(f"no GPU run recorded for {entry.name} yet: on a GPU, {command}")
    gpu = RECORDED[entry.name]["gpu"]
    assert gpu["launches"] >= 100
    if entry.correct:
        assert gpu["wrong"] == 0, entry.name
    if gpu["wrong"]:
        assert entry.bug, entry.name


@pytest.mark.parametrize("entry", BANK, ids=lambda e: e.name)
def test_red_exactly_where_a_gpu_can_be_wrong(entry: Entry) -> None:
    verdict = run_in_simulator(entry)
    red = verdict["verdict"] == "error" or bool(verdict["wrong"])
    if entry.correct:
        assert not red, f"false alarm on a kernel the GPU ran right 100 times: {verdict}"
        assert verdict["warnings"] == ([WARNED[entry.name]] if entry.name in WARNED else [])
    else:
        assert red, f"green on a kernel with a bug ({entry.bug}): {verdict}"


@pytest.mark.gpu
@pytest.mark.parametrize("entry", [e for e in BANK if e.correct], ids=lambda e: e.name)
def test_correct_kernels_are_right_on_the_gpu(entry: Entry) -> None:
    numba_cuda = pytest.importorskip("numba.cuda")
    if not numba_cuda.is_available():
        pytest.skip("no CUDA GPU: the bank's correct kernels are re-run on a GPU")
    assert run_on_gpu(entry, 20)["wrong"] == 0
