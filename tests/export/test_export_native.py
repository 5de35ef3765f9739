"""An exported package replays with ``portkit.load``'s compiled replayer and its C++
autograd node where portkit does (``native.cpp`` ships in ``_runtime/`` and the package
loads the one build portkit makes), and with its prepared Python functions, after one
line on stderr, where the build is refused (no C++ compiler); the values and gradients
of both paths are equal.

No GPU: the package built by ``portkit export`` (sigmoid) is imported in this process on
the stand-in GPU (stand_in_gpu.py: CPU tensors pass for CUDA ones, every launcher runs
the kernel on the CPU from its arguments); the compiled replayer is built against this
CPU torch, as tests/launch builds it, and launches through a C function of the stand-in
with ``cuLaunchKernel``'s signature."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from portkit.runtime import native_replayer as portkit_native
from tests.export.package_env import project_with, run_cli
from tests.export.stand_in_gpu import StandInGpu, import_on_stand_in

NATIVE, FALLBACK = "natns_kernels", "fallns_kernels"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder holding sigmoid exported as ``natns_kernels`` and, the same package
    under another name and op namespace (a process registers an op name once),
    ``fallns_kernels``."""
    if not (shutil.which("ninja") and shutil.which("c++")):
        pytest.skip("no ninja or C++ compiler here to build the compiled replayer")
    root = project_with(tmp_path_factory.mktemp("native") / "proj", ["sigmoid"], "natns")
    out = root.parent / "out"
    done = run_cli(root, "export", "sigmoid", "--out", str(out), "--arch", "sm_90")
    assert done.returncode == 0, done.stderr
    shutil.copytree(out / NATIVE, out / FALLBACK)
    manifest = json.loads((out / FALLBACK / "manifest.json").read_text())
    manifest["namespace"] = "fallns"
    (out / FALLBACK / "manifest.json").write_text(json.dumps(manifest))
    return out


def _gpu(folder: Path, package: str) -> StandInGpu:
    return StandInGpu(json.loads((folder / package / "manifest.json").read_text()))


@pytest.fixture(scope="module")
def compiled(exported: Path) -> Iterator[tuple[Any, StandInGpu, str]]:
    """(the package, its stand-in GPU, what its import wrote on stderr), where the
    compiled replayer builds (or was built)."""
    gpu = _gpu(exported, NATIVE)
    err = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        with contextlib.redirect_stderr(err):
            package = import_on_stand_in(mp, exported, NATIVE, gpu, compiled=True)
        yield package, gpu, err.getvalue()


@pytest.fixture(scope="module")
def refused(
    exported: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, StandInGpu, str, Path]]:
    """(the package, its stand-in GPU, its import's stderr, the extension folder) where
    the compiled replayer is not built yet and the build is refused: no C++ compiler."""
    extensions = tmp_path_factory.mktemp("extensions")
    gpu = _gpu(exported, FALLBACK)
    err = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        # only while it imports: the other package's fixture may be made after this one
        with pytest.MonkeyPatch.context() as build, contextlib.redirect_stderr(err):
            build.setenv("TORCH_EXTENSIONS_DIR", str(extensions))  # no build there
            build.setenv("CXX", str(extensions / "no-such-c++"))
            build.delitem(sys.modules, portkit_native.extension_name(), raising=False)
            package = import_on_stand_in(mp, exported, FALLBACK, gpu, compiled=True)
        yield package, gpu, err.getvalue(), extensions


def _forward_backward(f: Any, x: torch.Tensor, g: torch.Tensor) -> tuple[Any, Any]:
    leaf = x.clone().requires_grad_()
    y = f(leaf)
    y.backward(g)
    return y, leaf.grad


def test_the_package_replays_with_the_compiled_replayer_portkit_builds(
    compiled, monkeypatch: pytest.MonkeyPatch
) -> None:
    package, gpu, err = compiled
    assert "launches replay in Python" not in err
    sigmoid = package.sigmoid
    assert type(sigmoid).__name__ == "ReplayedOpCallable"  # portkit.load's callable
    forward, backward = sigmoid.binding.forward, sigmoid.binding.backward
    assert type(forward.replayer).__name__ == type(backward.replayer).__name__
    assert type(forward.replayer).__name__ == "NativeReplayer"
    # portkit takes the same path here, and both run the one build of native.cpp
    monkeypatch.setattr(portkit_native, "launch_entry_points", lambda: (gpu.c_launch_address, 0))
    from portkit.runtime.replaying import replayers

    pair = replayers("portkit", "auto")
    assert pair is not None and isinstance(pair[0], portkit_native.NativeReplayer)
    assert forward.replayer._module is portkit_native.compiled_module()
    x = torch.randn(1000)
    sigmoid(x), sigmoid(x)  # the first launch builds its plan; the second call records
    recorded, before = forward.recorded, len(gpu.launches)
    x2 = torch.randn(1000)
    out = sigmoid(x2)
    assert forward.recorded == recorded  # the launcher's Python did not run
    assert gpu.launches[before:] == [
        ("compiled", "sigmoid_fwd", (x2.data_ptr(), out.data_ptr(), 1000))
    ]
    assert torch.equal(out, torch.sigmoid(x2))


def test_a_refused_build_says_so_once_and_replays_in_python(refused) -> None:
    package, gpu, err, extensions = refused
    no_compiler = extensions / "no-such-c++"
    assert err == (
        f"{FALLBACK}: launches replay in Python: no C++ compiler ({no_compiler} not found) "
        "to build the replayer\n"
    )
    assert not list(extensions.rglob("*.so")) and not list(extensions.rglob("build.ninja"))
    sigmoid = package.sigmoid
    assert type(sigmoid).__name__ == "ReplayedOp"  # the prepared functions
    assert type(sigmoid.binding.backward.replayer).__name__ == "PreparedReplayer"
    x = torch.randn(1000)
    for _ in range(3):
        out = sigmoid(x)
    assert gpu.launches[-1] == ("torch", "sigmoid_fwd", (x.data_ptr(), out.data_ptr(), 1000))
    assert torch.equal(out, torch.sigmoid(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gradients_through_the_c_node_equal_the_python_path_s(compiled, refused, dtype) -> None:
    (native, native_gpu, _), (python, python_gpu, _, _) = compiled, refused
    x, g = torch.randn(3, 37, dtype=dtype), torch.randn(3, 37, dtype=dtype)
    for _ in range(3):  # a plan, a recording of each direction, then both replayed
        y, grad = _forward_backward(native.sigmoid, x, g)
        y_python, grad_python = _forward_backward(python.sigmoid, x, g)
    # the compiled replayer's autograd node (native.cpp ReplayNode), not a Function
    assert y.grad_fn.name() == f"{native.sigmoid.registered.name}Backward"
    assert y_python.grad_fn.name() != y.grad_fn.name()
    assert [(who, k) for who, k, _ in native_gpu.launches[-2:]] == [
        ("compiled", "sigmoid_fwd"),
        ("compiled", "sigmoid_bwd"),
    ]
    assert [k for _, k, _ in python_gpu.launches[-2:]] == ["sigmoid_fwd", "sigmoid_bwd"]
    expected = torch.sigmoid(x)
    for actual in (y, y_python):
        torch.testing.assert_close(actual.detach(), expected, rtol=0, atol=0)
    for actual in (grad, grad_python):
        torch.testing.assert_close(actual, g * expected * (1 - expected), rtol=0, atol=0)
