"""The repository's own prototypes in the lockstep engine: every kernel of every op runs
there (not in the per-thread fall-back, which is 50-100x slower and would make the
large cases too slow for CI), and its outputs and gradients are bit-identical to the
per-thread engine's on the same case."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
import torch

from portkit.simt.machine import LOCKSTEP, PER_THREAD

ROOT = Path(__file__).resolve().parents[2]
# Kernels that stay per thread, with the reason the engine gives (none since bfloat16
# runs in lockstep: lockstep/bfloat16.py).
PER_THREAD_KERNELS: dict[str, str] = {}
PROTOTYPES = sorted(p.stem for p in (ROOT / "prototypes").glob("[!_]*.py"))
# Ops whose largest ordinary case is too slow in the per-thread engine for CI: the case
# used instead still launches every kernel. matmul's register tiles make 130x12x68 about
# 100 s per thread on the 2-core machine; 17x20x9 covers the same kernels and edge tiles.
SMALLER_CASE = {"matmul": 340}


@cache
def _catalog():
    from portkit.project.session import Session

    return Session.from_environment(ROOT).catalog


def _middle_case(op, dtype: str):
    """The op's largest ordinary case of ``dtype`` (a few thousand elements at most)."""
    ordinary = [
        c
        for c in op.definition.cases
        if c.dtype == dtype
        and not (c.gpu_only or c.large or c.special)
        and c.numel <= SMALLER_CASE.get(op.name, 4096)
    ]
    return max(ordinary, key=lambda c: c.numel)


def _run(op, case, engine: str, monkeypatch):
    from portkit.backends import create
    from portkit.checking.harness import CaseRunner

    config = _catalog().config
    backend = create("sim", replace(config, settings=config.settings.changed(simt_engine=engine)))
    runner = CaseRunner(op, case)
    run = runner.run_implementation(backend)
    failed = [r for r in runner.results if r.failed]
    assert run is not None and not failed, failed
    return run, backend.machine.engines


@pytest.mark.parametrize("name", PROTOTYPES)
def test_prototype_runs_in_lockstep_bit_identical_to_per_thread(name, monkeypatch):
    op = _catalog().get(name)
    _same_in_both_engines(name, op, op.definition.dtypes[0], monkeypatch)


@pytest.mark.parametrize("name", PROTOTYPES)
def test_bfloat16_prototype_runs_in_lockstep_bit_identical_to_per_thread(name, monkeypatch):
    op = _catalog().get(name)
    if "bfloat16" not in op.definition.dtypes or op.definition.dtypes[0] == "bfloat16":
        pytest.skip(f"{name}: no bfloat16, or it is the test above's dtype")
    if name == "matmul":  # its per-thread run takes minutes; its bfloat16 path (float64
        # loads, one rounding at the store) is layernorm's, checked here
        pytest.skip("matmul: the per-thread run of its register tiles is too slow for CI")
    _same_in_both_engines(name, op, "bfloat16", monkeypatch)


def _same_in_both_engines(name, op, dtype: str, monkeypatch) -> None:
    case = _middle_case(op, dtype)
    slow, _ = _run(op, case, PER_THREAD, monkeypatch)
    fast, engines = _run(op, case, "auto", monkeypatch)
    assert engines, "no kernel was launched"
    for choice in engines:
        if name in PER_THREAD_KERNELS:
            assert choice.engine == PER_THREAD and PER_THREAD_KERNELS[name] in choice.reason
        else:
            assert choice.engine == LOCKSTEP, f"{choice.kernel}: {choice.reason}"
    pairs = list(zip(slow.outputs, fast.outputs)) + list(zip(slow.grads, fast.grads))
    assert len(pairs) == len(slow.outputs) + len(slow.grads) > 0
    for a, b in pairs:
        if a is None:
            assert b is None
            continue
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(_bits(a), _bits(b)), f"{name} {case.name}: the engines differ"


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().view(-1).view(torch.uint8)
