"""Guard zones around every tensor a checked kernel sees (CPU: fake kernels that write
through the tensor's storage, and the simulator)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import portkit
from portkit.errors import GuardViolation, KernelError
from portkit.launch.guards import GUARD_BYTES, GuardZones
from portkit.launch.kernel_set import KernelSet, LaunchConfig, LaunchTarget
from portkit.launch.poison import is_poison

REPO = Path(__file__).resolve().parents[2]


class StrayStore(LaunchTarget):
    """A 'kernel' that copies x into out and also stores at ``offsets`` relative to
    out's first element, through the storage, as a GPU kernel's pointer would."""

    def __init__(self, offsets: Sequence[int] = ()) -> None:
        self.offsets = offsets

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
        x, out, n = args
        out.copy_(x)
        whole = torch.empty(0, dtype=out.dtype).set_(out.untyped_storage())
        for offset in self.offsets:
            whole[out.storage_offset() + offset] = 7


def kernel_set(offsets: Sequence[int], dtype=torch.float32) -> tuple[KernelSet, Any]:
    guards = GuardZones({"copy": ["x", "out", "n"]})
    k = KernelSet("myop", "fake", "cpu", {"copy": StrayStore(offsets)}, True, guards)
    x = guards.copy_in(torch.arange(129, dtype=dtype))
    return k, x


def launch(k: KernelSet, x: torch.Tensor) -> torch.Tensor:
    out = k.empty_like(x)
    k.copy[1, 256](x, out, x.numel())
    return out


def test_clean_launch_passes_and_output_is_poisoned_until_written():
    k, x = kernel_set([])
    out = k.empty_like(x)
    assert bool(is_poison(out).all())
    k.copy[1, 256](x, out, x.numel())
    assert torch.equal(out, x)


def test_store_one_past_the_end_names_kernel_tensor_count_and_hint():
    k, x = kernel_set([129])
    with pytest.raises(GuardViolation) as caught:
        launch(k, x)
    message = str(caught.value)
    assert "kernel copy (fake) wrote outside tensor argument 1 (out)" in message
    assert "1 element(s) after its end (indices 129 to 129 of a tensor of 129)" in message
    assert "portkit check myop --sanitize memcheck" in message
    assert (caught.value.before, caught.value.after, caught.value.argument) == (0, 1, 1)
    assert isinstance(caught.value, KernelError)


def test_stores_before_the_start_and_far_after_are_counted():
    k, x = kernel_set([-3, -1, 129, 140])
    with pytest.raises(GuardViolation) as caught:
        launch(k, x)
    message = str(caught.value)
    assert "2 element(s) before its start (lowest index -3)" in message
    assert "2 element(s) after its end (indices 129 to 140" in message


def test_integer_tensors_get_a_byte_pattern_guard():
    k, x = kernel_set([129], dtype=torch.int32)
    with pytest.raises(GuardViolation, match=r"torch.int32 of shape \(129,\)"):
        launch(k, x)


def test_input_guards_hold_nan_so_an_overrun_read_shows_in_values():
    guards = GuardZones()
    x = guards.copy_in(torch.ones(5))
    whole = torch.empty(0).set_(x.untyped_storage())
    after = whole[x.storage_offset() + 5]
    assert torch.isnan(after)
    # Not the output poison: a GPU may carry a NaN's payload through `a[n] + b[n]`, and
    # that store past an output must still change the output's guard.
    assert not is_poison(after.reshape(1)).any()
    assert whole.numel() == 5 + 2 * GUARD_BYTES // 4


def test_an_input_guard_value_stored_past_an_output_is_caught():
    guards = GuardZones({"k": ["x", "out"]})
    x = guards.copy_in(torch.ones(4, dtype=torch.float64))
    out = guards.allocate((4,), torch.float64, "cpu")
    x_whole = torch.empty(0, dtype=torch.float64).set_(x.untyped_storage())
    out_whole = torch.empty(0, dtype=torch.float64).set_(out.untyped_storage())
    out_whole[out.storage_offset() + 4] = x_whole[x.storage_offset() + 4]  # out[n] = x[n]
    with pytest.raises(GuardViolation, match="1 element"):
        guards.verify("op", "twin", "k", [x, out])


def test_copy_in_keeps_requires_grad_and_values():
    guards = GuardZones()
    source = torch.randn(3, 4, dtype=torch.float64).requires_grad_()
    copy = guards.copy_in(source)
    assert copy.requires_grad and copy.is_leaf and copy.shape == (3, 4)
    assert torch.equal(copy.detach(), source.detach())


def test_load_allocates_plainly(monkeypatch: pytest.MonkeyPatch):
    """The production path: no guards, no poison, an allocation of the exact size."""
    monkeypatch.chdir(REPO)
    seen = []

    class Spy(LaunchTarget):
        def launch(self, config, args):
            seen.extend(a for a in args if isinstance(a, torch.Tensor))

    from portkit.backends import create
    from portkit.project.config import load_config
    from portkit.project.discovery import discover
    from portkit.torch_op.load import registered_callable

    config = load_config()
    op = discover(config).get("sigmoid")
    k = create("sim", config).kernels(op)
    assert k.guards is None and not k.poison_outputs
    spied = k.wrapped(lambda name, target: Spy())
    registered_callable(op, spied, config.namespace, define_now=False)(torch.ones(10))
    assert seen and all(t.untyped_storage().nbytes() == t.numel() * t.element_size() for t in seen)
    assert portkit.load("sigmoid", "sim")(torch.zeros(3)).tolist() == [0.5, 0.5, 0.5]


def test_simulator_catches_an_off_by_one_prototype_before_the_guard():
    """In the simulator a tensor is a NumPy view of exactly its elements, so the store
    at out[n] is an out-of-bounds fault with thread and line: the guard is never
    reached. The guard path must not get in its way."""
    from portkit.backends.sim import SimulatedLaunch
    from portkit.simt.machine import Machine
    from tests.simt import planted_bugs

    guards = GuardZones({"off_by_one": ["x", "out", "n"]})
    target = SimulatedLaunch("off_by_one", planted_bugs.off_by_one, Machine())
    k = KernelSet("myop", "sim", "cpu", {"off_by_one": target}, True, guards)
    x = guards.copy_in(torch.arange(100, dtype=torch.float32))
    out = k.empty_like(x)
    with pytest.raises(KernelError) as caught:
        k.off_by_one[1, 128](x, out, 100)
    assert not isinstance(caught.value, GuardViolation)
    assert caught.value.kind == "out-of-bounds" and caught.value.place.thread == (100, 0, 0)
    whole = torch.empty(0).set_(out.untyped_storage()).numpy()
    assert np.isnan(whole[out.storage_offset() + 100])  # the guard was left alone


def test_harness_runs_the_simulator_with_guards(make_project, sources, cli):
    """An off-by-one prototype fails `portkit check --backend sim` with the simulator's
    out-of-bounds report (not a crash in the guard code)."""
    py = sources.unary_op("offby", bound="i <= n", cases=sources.ONE_CASE)
    root = make_project({"offby": (py, None)})
    result = cli(root, "check", "offby", "--backend", "sim", "--no-compile")
    assert result.exit_code == 1, result.output
    flat = " ".join(result.output.split())
    assert "out-of-bounds" in flat and "past the end" in flat
