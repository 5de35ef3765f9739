"""Every op of the repository exported into one package, installed into a fresh virtual
environment and run there on a GPU with portkit and numba blocked: for every dtype each
op takes (float16 and bfloat16 included) opcheck, torch.compile with ``fullgraph=True``
and CUDA graph replay pass, and outputs and gradients equal ``portkit.load(op, "twin")``
on the same inputs exactly (the same NVRTC and options build both).

The run is marked ``gpu`` and skips, saying why, on a machine where PyTorch sees no GPU.
``scripts/gpu.sh export`` runs them.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

import portkit
from portkit.project.cases import Case, make_grad_outputs, make_inputs
from portkit.project.config import load_config
from portkit.project.discovery import discover
from portkit.runtime.native_replayer import NativeReplayer
from portkit.runtime.replaying import replayers
from tests.export.package_env import BLOCK_PORTKIT_AND_NUMBA, REPO, install, run_cli
from tests.torch_op.checks import makes_nan

NO_GPU = "no CUDA GPU visible to PyTorch: an exported package runs on a GPU"

CATALOG = discover(load_config(REPO))
OPS = sorted(name for name, op in CATALOG.ops.items() if op.has_twin)
PACKAGE = "pk_every_op"
CHILD = Path(__file__).with_name("exported_child.py")
# The largest case of a dtype up to this size: every kernel path, seconds per op.
MAX_CASE_ELEMENTS = 1 << 16


def test_every_op_of_the_repository_is_exported() -> None:
    files = {p.stem for p in (REPO / "prototypes").glob("*.py") if not p.stem.startswith("_")}
    assert OPS == sorted(files)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package of every op, for this GPU's architecture, installed; its python."""
    folder = tmp_path_factory.mktemp("every_op")
    major, minor = torch.cuda.get_device_capability()
    out = folder / "pkg"
    arch = f"sm_{major}{minor}"
    done = run_cli(
        REPO, "export", *OPS, "--out", str(out), "--arch", arch, "--name", PACKAGE, "--json"
    )
    assert done.returncode == 0, done.stderr
    return install(json.loads(done.stdout)["wheel"], folder / "venv")


def case_of(op, dtype: str) -> Case:
    """The op's largest case of ``dtype`` (all inputs of it) up to MAX_CASE_ELEMENTS."""
    cases = [
        c
        for c in op.definition.cases
        if set(c.dtypes) == {dtype} and not c.large and 0 < c.numel <= MAX_CASE_ELEMENTS
    ]
    assert cases, f"op {op.name} has no case of {dtype} up to {MAX_CASE_ELEMENTS} elements"
    return max(cases, key=lambda c: c.numel)


def as_list(value) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def twin_run(f, op, case: Case) -> tuple[dict, dict]:
    """(what the exported op gets: inputs, upstream gradients; what the twin ``f`` returns)."""
    grad = op.definition.has_backward
    inputs = make_inputs(case, "cuda")
    leaves = [x.clone().requires_grad_(grad and x.dtype.is_floating_point) for x in inputs]
    outputs = as_list(f(*leaves, *case.extra))
    grad_outputs = make_grad_outputs(case, outputs) if grad else []
    grads = []
    if grad:
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        grads = [x.grad.cpu() if x.grad is not None else None for x in leaves]
    given = {
        "inputs": [x.cpu() for x in inputs],
        "extra": list(case.extra),
        "grad": grad,
        "grad_outputs": [g.cpu() for g in grad_outputs],
        "nan": makes_nan(case),
    }
    return given, {"outputs": [o.detach().cpu() for o in outputs], "grads": grads}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_GPU)
@pytest.mark.parametrize("name", OPS)
def test_exported_op_runs_every_dtype_without_portkit_and_equals_the_twin(
    installed: Path, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # portkit.load reads the repository's project
    op = CATALOG.get(name)
    twin = portkit.load(name, "twin")
    given, expected = {}, {}
    for dtype in op.definition.dtypes:
        given[dtype], expected[dtype] = twin_run(twin, op, case_of(op, dtype))
    torch.save(given, tmp_path / "inputs.pt")
    run = BLOCK_PORTKIT_AND_NUMBA + "import runpy; runpy.run_path(sys.argv[1], None, '__main__')"
    done = subprocess.run(
        [str(installed), "-c", run, str(CHILD), PACKAGE, name]
        + [str(tmp_path / "inputs.pt"), str(tmp_path / "outputs.pt"), str(REPO)],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["file"].startswith(str(installed.parents[1]))  # the installed copy
    assert result["loaded"] == []
    # portkit.load's compiled replayer where portkit has it (native.cpp ships in the
    # package and builds, or is found built, at its import), its Python one where not
    native = isinstance(replayers("portkit", "auto")[0], NativeReplayer)  # portkit.load's pick
    assert result["replayer"] == ("NativeReplayer" if native else "PreparedReplayer")
    if native and name == "sigmoid":  # both directions replay: the C++ autograd node
        assert set(result["nodes"].values()) == {f"{name}Backward"}  # the package's op name
    assert set(result["report"]) == set(op.definition.dtypes)
    failed = {
        f"{dtype}/{check}": outcome
        for dtype, checks in result["report"].items()
        for check, outcome in checks.items()
        if outcome != "ok"
    }
    assert failed == {}
    exported = torch.load(tmp_path / "outputs.pt")
    for dtype in op.definition.dtypes:
        torch.testing.assert_close(
            exported[dtype],
            expected[dtype],
            rtol=0,
            atol=0,
            equal_nan=True,
            msg=lambda m, dtype=dtype: f"{name} {dtype}, exported vs twin: {m}",
        )
