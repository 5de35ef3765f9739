"""An exported package replays like ``portkit.load``: recordings prepared into one Python
function each, plain-eager calls through them, torch's launcher where this torch has
one and cuda.bindings' ``cuLaunchKernel`` where it has not; the values and the errors
are the launcher's.

This is the package's Python path (``PORTKIT_REPLAY=python`` here), the one it takes
where the compiled replayer cannot be built (no C++ compiler: test_export_native.py).
No GPU: the package (sigmoid) is imported in this process with CPU tensors passing for
CUDA ones, and both launchers replaced by one that runs the kernel on the CPU from its
arguments (data pointers and all), as the GPU would (stand_in_gpu.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from portkit.runtime import recorder
from tests.export.package_env import project_with, run_cli
from tests.export.stand_in_gpu import StandInGpu, import_on_stand_in


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, StandInGpu, Any]]:
    """(the package, its stand-in GPU, its _driver_launch) imported in this process."""
    root = project_with(tmp_path_factory.mktemp("prep") / "proj", ["sigmoid"], "prepns")
    out = root.parent / "out"
    done = run_cli(root, "export", "sigmoid", "--out", str(out), "--arch", "sm_90")
    assert done.returncode == 0, done.stderr
    gpu = StandInGpu(json.loads((out / "prepns_kernels" / "manifest.json").read_text()))
    with pytest.MonkeyPatch.context() as mp:
        package = import_on_stand_in(mp, out, "prepns_kernels", gpu)
        yield package, gpu, sys.modules["prepns_kernels._runtime.driver_launch"]


def test_plain_eager_calls_replay_the_recording_with_the_launcher_s_values(exported) -> None:
    package, gpu, _ = exported
    sigmoid = package.sigmoid
    x = torch.randn(1000)
    sigmoid(x)  # the first launch of float32 builds its plan (the checked path), as in portkit
    first = sigmoid(x)  # recorded: the launcher ran
    recorded = gpu.launches.pop()
    assert type(sigmoid).__name__ == "ReplayedOp" and len(sigmoid._eager) == 1
    x2 = torch.randn(1000)
    replay = next(iter(sigmoid._eager.values()))
    ran: list[tuple] = []
    sigmoid._eager = {
        key: lambda inputs, r=replay: ran.append(inputs) or r(inputs) for key in sigmoid._eager
    }
    second = sigmoid(x2)
    assert ran == [(x2,)]  # the prepared function, not the launcher
    launcher, kernel, values = gpu.launches.pop()
    assert (launcher, kernel) == ("torch", "sigmoid_fwd") == recorded[:2]
    assert values == (x2.data_ptr(), second.data_ptr(), 1000)
    assert torch.equal(first, torch.sigmoid(x)) and torch.equal(second, torch.sigmoid(x2))
    assert second.data_ptr() != first.data_ptr() and second.shape == x2.shape


def test_backward_and_gradient_calls_replay_and_match_torch(exported) -> None:
    package, gpu, _ = exported
    x = torch.randn(64, requires_grad=True)
    g = torch.randn(64)
    for _ in range(3):  # recorded, then replayed through autograd (not the eager table)
        x.grad = None
        y = package.sigmoid(x)
        y.backward(g)
    assert y.grad_fn is not None
    expected = torch.sigmoid(x.detach())
    assert torch.equal(y.detach(), expected)
    torch.testing.assert_close(x.grad, g * expected * (1 - expected), rtol=0, atol=0)
    assert [k for _, k, _ in gpu.launches[-2:]] == ["sigmoid_fwd", "sigmoid_bwd"]


def test_without_torch_s_launcher_the_replay_launches_through_cuda_bindings(
    exported, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A torch without ``_StaticCudaLauncher`` (older releases, some builds): the kernels
    loaded then (float64's, here) and their prepared replays pack and call cuLaunchKernel."""
    package, gpu, launch = exported
    monkeypatch.setattr(launch, "static_launcher", lambda: None)
    x = torch.randn(300, dtype=torch.float64)
    for _ in range(3):
        out = package.sigmoid(x)
        assert torch.equal(out, torch.sigmoid(x))
    assert [(who, k) for who, k, _ in gpu.launches[-3:]] == [("driver", "sigmoid_fwd")] * 3
    assert gpu.launches[-1][2] == (x.data_ptr(), out.data_ptr(), 300)


def test_a_watched_call_takes_the_registered_op(exported) -> None:
    package, gpu, _ = exported
    x = torch.randn(1000)
    package.sigmoid(x)
    seen: list[str] = []

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Watch():
        out = package.sigmoid(x)
    assert "prepns.sigmoid.default" in seen and torch.equal(out, torch.sigmoid(x))


def test_errors_after_a_recorded_signature_are_the_launcher_s(exported) -> None:
    package, _, _ = exported
    x = torch.randn(8, 8)
    package.sigmoid(x)
    package.sigmoid(x)
    with pytest.raises(package.InputError) as info:
        package.sigmoid(x.t())  # same shape, other strides: not the recorded signature
    # portkit's messages (runtime/op_inputs.py checks both)
    assert str(info.value) == (
        "op sigmoid, input 0: tensor with strides (1, 8) is not contiguous; pass .contiguous()"
    )
    with pytest.raises(package.InputError) as info:
        package.sigmoid(torch.ones(8, 8, dtype=torch.int32))
    assert str(info.value).startswith(
        "op sigmoid: input 0 is int32, a dtype the op does not accept; it takes "
    )


def test_portkit_and_the_package_record_with_one_recorder() -> None:
    """The recorder's rules and the recording ``k`` live in modules that ship byte for
    byte (test_export_contract checks every shipped copy); portkit has no copy."""
    from portkit.export.package import runtime_sources

    assert runtime_sources()["recorder.py"] == Path(recorder.__file__)
    package = Path(__file__).parents[2] / "portkit"
    defined = [p for p in package.rglob("*.py") if "class RecordingKernels" in p.read_text()]
    assert defined == [package / "runtime" / "replaying.py"]
    replaying = Path(__file__).parents[2] / "portkit" / "runtime" / "replaying.py"
    assert "from .recorder import" in replaying.read_text()
    assert "__torch_dispatch__" not in replaying.read_text()  # the watch is the recorder's
