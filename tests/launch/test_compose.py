"""``compose_kernels``: the one place a backend's ``k`` is made. A backend hands over its
launch targets; the caller decides the build (plain or checked), the poison and the guards."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from portkit.backends.base import Backend
from portkit.checking.configurations import PinnedBackend
from portkit.launch.compose import compose_kernels
from portkit.launch.guards import GuardZones
from portkit.launch.kernel_set import LaunchTarget
from portkit.project.config import load_config

OP = SimpleNamespace(name="scale")


class Store(LaunchTarget):
    """Writes ``value`` into its first argument: which build ran shows in the output."""

    def __init__(self, value: float) -> None:
        self.value = value

    def launch(self, config, args) -> None:
        args[0].fill_(self.value)


class TwoBuilds(Backend):
    """A backend with a plain build and a checked build, and a knob choice of its own."""

    name, role, device, description = "two-builds", "twin", "cpu", "plain and checked"
    choice = object()  # stands for the op's KnobChoice: only its identity is checked

    def _probe(self) -> str | None:
        return None

    def launch_targets(self, op):
        return {"scale": Store(1.0)}

    def checked_launch_targets(self, op):
        return {"scale": Store(2.0)}

    def knob_choice_for(self, op):
        return self.choice


def run(k) -> torch.Tensor:
    out = k.empty((4,), torch.float32)
    k.scale[1, 4](out)
    return out


def test_the_production_k_is_plain_without_poison_or_guards(tmp_path) -> None:
    backend = TwoBuilds(load_config(tmp_path))
    for k in (backend.kernels(OP), compose_kernels(backend, OP)):
        assert (k.op, k.implementation, k.device) == ("scale", "two-builds", "cpu")
        assert k.guards is None and not k.poison_outputs and k.plain_allocation
        assert k.knob_choice is TwoBuilds.choice
        assert torch.equal(run(k), torch.ones(4))


def test_the_caller_picks_the_checked_build_and_composes_poison_and_guards(tmp_path) -> None:
    backend = TwoBuilds(load_config(tmp_path))
    guards = GuardZones({"scale": ["out"]})
    k = compose_kernels(backend, OP, checked=True, poison=True, guards=guards)
    assert k.guards is guards and k.poison_outputs and not k.plain_allocation
    assert torch.equal(run(k), torch.full((4,), 2.0))  # the checked build's target ran
    poisoned = compose_kernels(backend, OP, poison=True)
    assert poisoned.guards is None
    assert torch.isnan(poisoned.empty((3,), torch.float32)).all()
    assert torch.equal(run(poisoned), torch.ones(4))  # poison alone: the plain build


def test_a_backend_without_a_checked_build_checks_its_plain_targets(tmp_path) -> None:
    class PlainOnly(TwoBuilds):
        name = "plain-only"
        checked_launch_targets = Backend.checked_launch_targets

    k = compose_kernels(PlainOnly(load_config(tmp_path)), OP, checked=True)
    assert torch.equal(run(k), torch.ones(4))


def test_a_pinned_configuration_keeps_its_backends_name_and_pins_the_knobs(tmp_path) -> None:
    """``check`` runs each tuned configuration as ``twin (block=64)``; the ``k`` still
    carries the backend's own name (the registered op's name is built from it)."""
    backend = TwoBuilds(load_config(tmp_path))
    pinned_choice = object()
    pinned = PinnedBackend(backend, pinned_choice, "block=64")
    k = compose_kernels(pinned, OP, checked=True)
    assert pinned.name == "two-builds (block=64)" and k.implementation == "two-builds"
    assert k.knob_choice is pinned_choice
    assert torch.equal(run(k), torch.full((4,), 2.0))
