"""Prototypes written against numba-cuda-mlir (``from numba_cuda_mlir import cuda``) beside
numba-cuda prototypes in one project: discovered, simulated, checked; the compile and
lint checks skip them with the reason (numba-cuda-mlir 0.6 cannot compile without a GPU),
and numba's simulator refuses them. Skipped where numba_cuda_mlir is not importable (it
is on no package index portkit's CI uses: docs/numba-world.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from portkit.errors import LaunchError
from portkit.project.discovery import is_kernel
from portkit.simt import simulate
from portkit.simt.records import SimulationFault
from tests.cli.test_errors import assert_clean

mlir = pytest.importorskip(
    "numba_cuda_mlir.cuda", reason="numba_cuda_mlir is not installed (docs/numba-world.md)"
)
cuda = mlir  # the kernels below are written against numba-cuda-mlir's cuda module


@cuda.jit(device=True)
def twice(v):
    return v * 2


@cuda.jit
def staged(x, out, n):
    s = cuda.shared.array(32, cuda.float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    if i < n:
        s[t] = twice(x[i])
    cuda.syncthreads()
    if i < n:
        out[i] = s[t] + cuda.float32(1)


@cuda.jit
def unguarded(x):
    x[cuda.grid(1)] = 1


def test_discovery_recognises_numba_cuda_mlir_kernels() -> None:
    assert is_kernel(staged)
    assert not is_kernel(twice)  # a device=True function


def test_the_simulator_runs_them_with_numba_cudas_intrinsics() -> None:
    x = np.arange(40, dtype=np.float32)
    out = np.zeros_like(x)
    simulate(staged)[2, 32](x, out, 40)
    assert np.array_equal(out, x * 2 + 1)
    with pytest.raises(SimulationFault, match=r"out-of-bounds write of global array x\[40\]"):
        simulate(unguarded)[1, 64](np.zeros(40, np.float32))
    with pytest.raises(LaunchError, match="device function"):
        simulate(twice)


def _mlir_prototype(sources, name: str) -> str:
    source = sources.unary_op(name, cases=sources.SMALL_CASES)
    assert "from numba import cuda\n" in source
    return source.replace("from numba import cuda\n", "from numba_cuda_mlir import cuda\n")


@pytest.fixture
def both(make_project, sources):
    """A project with one numba-cuda-mlir prototype and one numba-cuda prototype."""
    return make_project(
        {
            "mlir_double": (_mlir_prototype(sources, "mlir_double"), None),
            "numba_double": (sources.unary_op("numba_double"), None),
        }
    )


def test_sim_and_check_pass_on_both(both, cli) -> None:
    for name in ("mlir_double", "numba_double"):
        assert "PASS" in assert_clean(cli(both, "sim", name), 0)
    out = assert_clean(cli(both, "check", "--all", "--backend", "sim"), 0)
    assert "0 failed" in out
    assert "mlir_double_fwd is written against numba-cuda-mlir" in out


def test_compile_and_lint_skip_them_saying_why(both, cli) -> None:
    out = assert_clean(cli(both, "compile"), 0)
    assert "1 passed, 0 failed, 1 skipped" in out
    out = assert_clean(cli(both, "lint", "--no-resources"), 0)
    assert (
        "skipped mlir_double: prototype not linted: mlir_double_fwd is written against "
        "numba-cuda-mlir: portkit compiles and lints numba-cuda kernels, and numba-cuda-mlir "
        "0.6 cannot compile without a GPU"
    ) in out


def test_numba_sim_refuses_them_in_one_line(both, cli) -> None:
    out = assert_clean(cli(both, "check", "mlir_double", "--backend", "numba-sim"), 3)
    assert "numba's simulator runs numba-cuda kernels only, not numba-cuda-mlir's" in out


@pytest.mark.gpu
def test_check_on_a_gpu_runs_both_through_numba(both, cli) -> None:
    if not torch.cuda.is_available() or not mlir.is_available():
        pytest.skip("no GPU visible to PyTorch and numba-cuda-mlir")
    out = assert_clean(cli(both, "check", "--all", "--backend", "numba", "--backend", "sim"), 0)
    assert "0 failed" in out


FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mlir_project"


@pytest.fixture
def example(tmp_path) -> Path:
    """The example project of scripts/gpu_mlir_check.sh, copied (its cache stays out)."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "mlir_project"))


def test_the_gpu_scripts_example_op_passes_in_the_simulator(example, cli) -> None:
    out = assert_clean(cli(example, "check", "mlir_axpb", "--backend", "sim"), 0)
    assert "0 failed" in out
    assert "mlir_axpb_fwd is written against numba-cuda-mlir" in out


@pytest.mark.gpu
def test_the_gpu_scripts_example_op_checks_and_diffs_on_a_gpu(example, cli) -> None:
    if not torch.cuda.is_available() or not mlir.is_available():
        pytest.skip("no GPU visible to PyTorch and numba-cuda-mlir")
    out = assert_clean(cli(example, "check", "mlir_axpb", "--backend", "numba"), 0)
    assert "0 failed" in out
    assert_clean(cli(example, "diff", "mlir_axpb"), 0)
