"""The GPU table's verdict (`python -m tests.simt.third_party.runner --gpu`, in
`scripts/gpu.sh tier`): a difference docs/numba-world.md explains is said as expected and
does not fail the step; a new one, or an expected kernel differing another way, does."""

from __future__ import annotations

import numpy as np

from tests.simt.third_party.runner import GPU_DIFFERS, PORTKIT_RED, expected_on_gpu


def ran(**values: np.ndarray) -> dict:
    return {"status": "ok", "values": values, "warnings": []}


def raised(error: str) -> dict:
    return {"status": "raised", "error": error, "types": [error], "message": "m"}


def test_an_expected_last_bits_difference_is_said_as_expected() -> None:
    a, b = np.float32([1.0, 2.0]), np.float32([1.0, 2.0000002])
    assert (
        expected_on_gpu("nc_cudapy_matmul", ran(C=a), ran(C=b))
        == GPU_DIFFERS["nc_cudapy_matmul"][1]
    )


def test_an_expected_kernel_that_differs_another_way_is_new() -> None:
    a = np.float32([1.0, 2.0])
    assert expected_on_gpu("nc_cudapy_matmul", ran(C=a), raised("SimulationFault")) is None
    assert expected_on_gpu("nc_cudapy_matmul", ran(C=a), ran(C=a[:1])) is None  # a shape
    assert expected_on_gpu("stumpy_gpu_stump", ran(P=a), ran(P=a + 1)) is None


def test_a_kernel_not_listed_is_new_and_stumpy_is_kept_red() -> None:
    a = np.float32([1.0])
    assert expected_on_gpu("nc_doc_vecadd", ran(c=a), ran(c=a + 1)) is None
    assert expected_on_gpu("stumpy_gpu_stump", ran(P=a), raised("SimulationFault"))
    assert set(PORTKIT_RED) <= set(GPU_DIFFERS)
