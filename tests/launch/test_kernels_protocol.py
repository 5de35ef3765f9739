"""``k`` declared (portkit/runtime/kernels_protocol.py): every ``k`` portkit or an exported
package hands a launcher satisfies ``Kernels``, and ``sm_count`` tells them apart by
their ``kind``, never by a free string."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from portkit.launch.kernel_set import KernelSet, LaunchTarget
from portkit.runtime import exported, replaying
from portkit.runtime.kernels_protocol import Kernels, KernelsKind
from portkit.runtime.launch_contract import SIMULATED_SM_COUNT, TRACED_SM_COUNT, sm_count
from portkit.runtime.registration import FakeKernels

REPO = Path(__file__).resolve().parents[2]


def every_k() -> dict[str, object]:
    cpu = KernelSet("op", "sim", "cpu", {"kern": LaunchTarget()})
    gpu = KernelSet("op", "twin", "cuda", {"kern": LaunchTarget()})
    package = exported.Kernels("op", {})
    return {
        "a simulated backend's": cpu,
        "a GPU backend's": gpu,
        "lint's trace": KernelSet("op", "trace", "cpu", {}, kind=KernelsKind.TRACE),
        "registration's fake": FakeKernels("op", torch.device("meta"), ["kern"]),
        "an exported package's": package,
        "portkit's recording": replaying.RecordingKernels(gpu),
        "a package's recording": replaying.RecordingKernels(package),
    }


@pytest.mark.parametrize("name", list(every_k()))
def test_every_k_satisfies_the_protocol(name: str) -> None:
    k = every_k()[name]
    assert isinstance(k, Kernels), name
    assert isinstance(k.kind, KernelsKind)  # type: ignore[attr-defined]


def test_sm_count_reads_the_kind() -> None:
    ks = every_k()
    assert sm_count(ks["lint's trace"]) == TRACED_SM_COUNT
    assert sm_count(ks["a simulated backend's"]) == SIMULATED_SM_COUNT
    assert sm_count(ks["registration's fake"]) == SIMULATED_SM_COUNT
    assert ks["a GPU backend's"].kind is KernelsKind.GPU  # type: ignore[attr-defined]
    assert ks["portkit's recording"].kind is KernelsKind.GPU  # type: ignore[attr-defined]
    assert ks["a package's recording"].kind is KernelsKind.GPU  # type: ignore[attr-defined]
    # A trace on the CPU named otherwise is still a trace: the kind decides, not a string.
    renamed = KernelSet("op", "anything", "cpu", {}, kind=KernelsKind.TRACE)
    assert sm_count(renamed) == TRACED_SM_COUNT
    assert sm_count(KernelSet("op", "trace", "cpu", {})) == SIMULATED_SM_COUNT


def test_nothing_compares_an_implementation_to_a_string() -> None:
    compared = []
    for path in (REPO / "portkit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and any(
                isinstance(c, ast.Constant) and c.value == "trace" for c in node.comparators
            ):
                compared.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert compared == []
