"""Which backends `portkit check` runs when none is named, and `--backend all`."""

from __future__ import annotations

import json

import pytest
import torch


def backends_run(output: str) -> set[str]:
    report = json.loads(output[output.index('{\n "results"') :])
    return {r["backend"] for r in report["results"] if r["status"] != "skip"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only default")
def test_on_a_cpu_machine_all_equals_the_default(make_project, sources, cli):
    root = make_project({"double": (sources.unary_op("double", cases=sources.ONE_CASE), None)})
    default = cli(root, "check", "double", "--no-compile", "--json")
    every = cli(root, "check", "double", "--backend", "all", "--no-compile", "--json")
    assert default.exit_code == every.exit_code == 0, default.output + every.output
    assert backends_run(default.output) == backends_run(every.output)
    assert "sim" in backends_run(default.output)
    assert "not run on this GPU machine" not in default.output


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to PyTorch")
def test_on_a_gpu_machine_the_cpu_stand_ins_run_only_when_asked(make_project, sources, cli):
    root = make_project(
        {
            "double": (
                sources.unary_op("double", cases=sources.ONE_CASE),
                sources.unary_twin("double"),
            )
        }
    )
    default = cli(root, "check", "double", "--no-compile", "--json")
    assert default.exit_code == 0, default.output
    assert backends_run(default.output) >= {"numba", "twin"}
    assert not backends_run(default.output) & {"sim", "twin-cpu"}
    assert "not run on this GPU machine: sim, twin-cpu" in default.output
    every = cli(root, "check", "double", "--backend", "all", "--no-compile", "--json")
    assert every.exit_code == 0, every.output
    assert backends_run(every.output) >= {"numba", "twin", "sim", "twin-cpu"}
