"""numba CUDA kernels nobody on the team wrote (tests/simt/third_party/: each copied
verbatim from a public source, with a small driver) under numba's own simulator and
under portkit's: the same outcome, values bit for bit or the same exception type.

Where numba's simulator cannot be the judge (it lacks the feature, or it differs from
what a GPU does: the reason is in ``NUMBA_SIMULATOR_DIFFERS`` and docs/numba-world.md),
portkit's values must be the ones the source itself asserts (``expected()`` of the
file), and numba's simulator must still differ, so that a stale entry shows.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from tests.simt.third_party import kernel_files
from tests.simt.third_party.runner import PORTKIT_RED, numba_outcomes, portkit_outcome, same

FILES = kernel_files()
GRID_SYNC = (
    "numba's simulator runs a grid's blocks one after another, so this_grid().sync() "
    "does not wait for the later blocks (they have not started): it reads their elements "
    "before they are written"
)
NO_WARP_OPS = "numba's simulator has no warp intrinsics (AttributeError: syncwarp, shfl_*, votes)"
NUMBA_SIMULATOR_DIFFERS = {
    "nc_doc_cg": GRID_SYNC,
    "nc_doc_laplace": GRID_SYNC,
    "nc_doc_sessionize": GRID_SYNC,
    "nc_doc_globals": (
        "numba's simulator reads the globals as they are at each launch; numba freezes "
        "them at compile time (the example asserts so)"
    ),
    "nc_doc_montecarlo": (
        "numba's simulator computes a float32 sample times an int64 limit in float32 "
        "(NumPy 2's promotion); numba types it float64, so stored results differ by an ULP"
    ),
    "nc_lib_reduce": (
        "numba's simulator cannot run cuda.reduce's kernel factory (it imports numba.cuda "
        "itself: AttributeError: module 'numba.cuda' has no attribute 'threadIdx'), and the "
        "kernel's syncwarp under `if tid < 2` is one it has no intrinsic for"
    ),
    "nc_warp_useful_syncwarp": NO_WARP_OPS,
    "nc_warp_shfl_down": NO_WARP_OPS,
    "nc_warp_vote_eq": NO_WARP_OPS,
    "nc_warp_independent_scheduling": NO_WARP_OPS,
    "nc_sync_coop_syncwarp": NO_WARP_OPS,
}
# Correct kernels that lean on what the CUDA C++ guide leaves undefined: their warning.
WARNED = {"nc_warp_useful_syncwarp": ["same-value-race"]}


@pytest.fixture(scope="module")
def numba_simulator() -> dict[str, dict[str, Any]]:
    """Every file's outcome under numba's simulator (one child process)."""
    return numba_outcomes(FILES)


def test_at_least_25_kernels_each_naming_its_source_and_licence() -> None:
    kernels = 0
    for path in FILES:
        text = path.read_text()
        head = text[: text.index("\nimport") if "\nimport" in text else 600]
        assert re.search(r"^# Source: .+", head, re.M), path.name
        assert re.search(r"^#   https://\S+", head, re.M), path.name
        assert re.search(r"^# Licence: \S+", head, re.M), path.name
        kernels += len(re.findall(r"^(?:@cuda\.jit.*\n)?def (?!run|expected)\w+\(", text, re.M))
        assert "def run()" in text, path.name
    assert len(FILES) >= 25 and kernels >= 25


def test_every_disagreement_listed_is_a_file() -> None:
    assert set(NUMBA_SIMULATOR_DIFFERS) | set(PORTKIT_RED) <= {p.stem for p in FILES}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_same_outcome_as_numbas_simulator(path: Any, numba_simulator: dict) -> None:
    numba = numba_simulator[path.stem]
    mine = portkit_outcome(path)
    assert mine["warnings"] == WARNED.get(path.stem, []), mine["warnings"]
    differs = same(numba, mine)
    if path.stem in PORTKIT_RED:
        assert numba["status"] == "ok" and mine["status"] == "raised", differs
        assert mine["error"] == "SimulationFault" and "negative index" in mine["message"]
        return
    if path.stem not in NUMBA_SIMULATOR_DIFFERS:
        assert not differs, differs
        return
    assert differs, f"numba's simulator now agrees: drop {path.stem} from the list"
    assert mine["status"] == "ok", mine.get("message")
    want = mine["expected"]
    for name, value in want.items():
        got = mine["values"][name]
        assert got.dtype == value.dtype and np.array_equal(got, value), (name, got, value)
