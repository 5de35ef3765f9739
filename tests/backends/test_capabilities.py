"""Declared capabilities: what a backend or a launch target can do beyond the minimum is a
class attribute with a default on its base class (docs/design.md), read by the harness,
the CLI, the sanitizer tier and portkit.load; nothing probes with hasattr."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from portkit import backends
from portkit.backends.base import Backend
from portkit.backends.sim import SimulatedLaunch
from portkit.checking.harness import run_case, skip_reason
from portkit.launch.kernel_set import KernelSet, LaunchConfig, LaunchTarget
from portkit.project.cases import Case

PACKAGE = Path(__file__).resolve().parents[2] / "portkit"
LARGE = Case("big", ((1 << 24,),), large=True)


class Minimal(Backend):
    """A backend that sets what it must and nothing more: portkit's simulator underneath,
    under a name the harness has never heard of."""

    name, role, device, description = "minimal", "prototype", "cpu", "a third party's"
    simulated = True

    def _probe(self) -> str | None:
        return None

    def launch_targets(self, op) -> dict[str, LaunchTarget]:
        from portkit.simt.machine import Machine

        machine = Machine(budget=self.config.sim_budget)
        return {n: SimulatedLaunch(n, d, machine) for n, d in op.kernels.items()}


def test_a_backend_without_overrides_gets_the_defaults(tmp_path):
    from portkit.project.config import load_config

    backend = Minimal(load_config(tmp_path))
    assert (backend.runs_large_cases_on_cpu, backend.has_line_info, backend.reports_cache) == (
        False,
        False,
        False,
    )
    assert backend.lineinfo is False and backend.machine is None
    assert backend.cache_report([]) == []


def test_the_harness_runs_a_new_backend_with_no_special_case(make_project, sources, load_op):
    root = make_project({"double": (sources.unary_op("double"), None)})
    config, op = load_op(root, "double")
    backend = Minimal(config)
    case = op.definition.cases[-1]
    results = run_case(op, case, [backend])
    assert {(r.backend, r.check, r.status) for r in results} == {("minimal", "forward", "pass")}
    # a large case: skipped with the reason, until the backend declares it runs them
    assert skip_reason(op, LARGE, backend).startswith("large case: on a CPU only")

    class Fast(Minimal):
        runs_large_cases_on_cpu = True

    assert skip_reason(op, LARGE, Fast(config)) is None


@pytest.mark.parametrize("name", list(backends._BUILTINS))
def test_each_builtin_declares_what_it_does(name):
    cls = backends.backend_class(name)
    assert cls.runs_large_cases_on_cpu == (name == "sim")
    assert cls.has_line_info == cls.reports_cache == (name == "numba")


def test_a_target_without_a_plain_launch_takes_the_checked_path():
    import torch

    launched = []

    class Checked(LaunchTarget):
        def launch(self, config: LaunchConfig, args) -> None:
            launched.append(config.grid)

    assert (Checked.has_plain_launch, Checked.has_replay_step) == (False, False)
    k = KernelSet("op", "impl", "cpu", {"kernel": Checked()})
    k.kernel[2, 32](torch.zeros(4), 4)
    assert launched == [(2, 1, 1)]
    with pytest.raises(NotImplementedError, match="Checked declares no plain launch"):
        Checked().plain_launch(LaunchConfig((1, 1, 1), (1, 1, 1)))


def _declared() -> set[str]:
    """Every capability a backend or a launch target declares, and what it offers with it."""
    names = {n for cls in (Backend, LaunchTarget) for n in vars(cls) if not n.startswith("_")}
    return names | {"run_eager"}  # the replayers' (runtime/replaying.py) compiled eager call


def test_no_capability_is_found_by_hasattr_or_getattr():
    declared = _declared()
    assert {"runs_large_cases_on_cpu", "has_plain_launch", "plain_launch", "machine"} <= declared
    probes = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("hasattr", "getattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in declared
            ):
                probes.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not probes, f"read the declared attribute instead: {probes}"
