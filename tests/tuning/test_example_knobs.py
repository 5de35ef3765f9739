"""The example ops' knobs on a CPU: every value of every knob (one knob at a time, the
others at their defaults) runs in portkit's simulator and in the twin compiled for the
CPU, each against the reference and prototype against twin, so a configuration
`portkit tune` may pick on a GPU is one whose kernels were checked. The cases are small
ones that reach each launcher's branches (rows walked in chunks, persistent grids that
loop, short rows sharing a block).

A knob reaches the kernels only through the launches its launcher makes (grid, block,
scalar arguments: the twin is built once for every configuration). So a value runs on
the cases where its launches differ from the defaults'; on the others it would launch
the same kernels on the same inputs the defaults' run already checked. Every value must
change the launches of some case, or this test would check nothing of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from portkit.backends import create
from portkit.backends.twin_cpu.build import find_compiler
from portkit.checking.configurations import PinnedBackend
from portkit.checking.harness import run_case
from portkit.launch.trace import record_launches
from portkit.project.tuning_table import declared_choice
from portkit.runtime.knob_choice import describe
from portkit.runtime.launch_contract import KernelsKind

REPO = Path(__file__).resolve().parents[2]

# op -> cases (by name) that reach the code each knob changes
CASES = {
    "rmsnorm": ("float32-20x1000", "bfloat16-3x127"),
    # bfloat16-37x64: bwd_half_math (the float16 / bfloat16 backward's arithmetic)
    "layernorm": ("float32-37x64", "float32-4x1000", "bfloat16-37x64"),
    # float32-4x1000: bwd_elems 4 and 8 give half precision's 8-column packs the same
    # threads; float32's 4-column packs tell them apart
    "add_rmsnorm": ("float16-150x41", "bfloat16-4x1000", "float32-4x1000"),
    "softmax": ("float32-3x1000", "float32-2x4101", "float32-3x127"),
    "sigmoid": ("float32-n1000", "float32-n127", "float64-n129"),
    "softmax_warp": ("float32-3x1000", "float32-2x4103"),
}


def one_at_a_time(declared):
    """The defaults, then each other value of each knob with the rest at their defaults."""
    base = {name: values[0] for name, values in declared.items()}
    configs = [base]
    for name, values in declared.items():
        configs += [{**base, name: v} for v in values[1:]]
    return configs


@pytest.mark.parametrize("op_name", sorted(CASES))
def test_every_knob_value_agrees_in_the_simulator_and_the_cpu_twin(op_name, load_op):
    config, op = load_op(REPO, op_name)
    choice = declared_choice(op)
    assert op.definition.knobs, f"{op_name} declares no knobs"
    backends = [create("sim", config)]
    if find_compiler() is not None:
        backends.append(create("twin-cpu", config))
    failures = []
    configs = one_at_a_time(choice.declared)
    defaults: dict[str, list] = {}
    for values in configs:
        label = describe(values)
        pinned = choice.pinned(values, label)
        group = [PinnedBackend(b, pinned, label) for b in backends]
        launches = {
            c: launches_of(op, op.case(c), pinned) for c in CASES[op_name]
        }  # what sim and twin-cpu get (both run with the simulated SM count)
        if values is configs[0]:
            defaults = launches
        changed = [c for c in CASES[op_name] if launches[c] != defaults[c]]
        if values is not configs[0]:
            assert changed, f"{op_name} {label}: no case launches differently from the defaults"
        for case_name in CASES[op_name] if values is configs[0] else changed:
            results = run_case(op, op.case(case_name), group)
            ran = [r for r in results if r.status == "pass"]
            assert ran, f"{op_name} {case_name} {label}: nothing ran"
            failures += [
                f"{r.backend} {r.check} {case_name}: {r.detail[:200]}" for r in results if r.failed
            ]
            if len(backends) == 2:  # prototype against twin within the configuration
                assert any(r.check.startswith("vs ") for r in ran), (op_name, case_name, label)
    assert not failures, "\n".join(failures)


def launches_of(op, case, choice) -> list:
    """Kernel, launch configuration and arguments (tensors by dtype and shape, scalars by
    value) of each launch of the forward and backward, as a simulated ``k`` makes them."""
    return [
        (launch.kernel, launch.config, launch.args)
        for launch in record_launches(op, case, knob_choice=choice, kind=KernelsKind.SIMULATED)
    ]
