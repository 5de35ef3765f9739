"""An exported package replays like ``portkit.load``: recordings prepared into one Python
function each, plain-eager calls through them, torch's launcher where this torch has
one and cuda.bindings' ``cuLaunchKernel`` where it has not; the values and the errors
are the launcher's.

No GPU: the package (sigmoid) is imported in this process with CPU tensors passing for
CUDA ones, and both launchers replaced by one that runs the kernel on the CPU from its
arguments (data pointers and all), as the GPU would."""

from __future__ import annotations

import ctypes
import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from portkit.launch.replay import recording
from portkit.runtime import recorder
from tests.export.package_env import project_with, run_cli

_C_TYPES = {"float": (ctypes.c_float, torch.float32), "double": (ctypes.c_double, torch.float64)}


class _Gpu:
    """The kernels of the package by handle, run on the CPU; every launch noted."""

    def __init__(self, manifest: dict) -> None:
        self.kernels: dict[int, tuple[str, str]] = {}
        self.handles: dict[str, int] = {}
        for name, spec in manifest["ops"]["sigmoid"]["kernels"].items():
            for ctype, lowered in spec["lowered"].items():
                handle = self.handles[lowered] = 1000 + len(self.handles)
                self.kernels[handle] = (name, ctype)
        self.launches: list[tuple[str, str, tuple]] = []  # (launcher, kernel, values)

    def run(self, launcher: str, handle: int, values: tuple) -> None:
        name, ctype = self.kernels[handle]
        self.launches.append((launcher, name, values))
        *pointers, n = values
        c_type, dtype = _C_TYPES[ctype]
        with _disable_current_modes():  # the kernel's work, unseen by a recorder's watch
            x, *rest = [
                torch.frombuffer((c_type * n).from_address(p), dtype=dtype) for p in pointers
            ]
            if name == "sigmoid_fwd":
                rest[0].copy_(torch.sigmoid(x))
            else:  # sigmoid_bwd(y, dy, dx, n)
                rest[1].copy_(rest[0] * x * (1 - x))

    def static(self, handle, gx, gy, gz, warps, shared, codes, values, stream) -> None:
        assert codes == "OOl" or codes == "OOOl"
        self.run("torch", handle, tuple(values))

    def cu_launch_kernel(self, function, *rest: Any) -> tuple:
        from cuda.bindings import driver

        name, _ = self.kernels[int(function)]
        count = 3 if name == "sigmoid_fwd" else 4
        slots = (ctypes.c_void_p * count).from_address(rest[-2])
        values = tuple(ctypes.c_uint64.from_address(s).value for s in slots)
        self.run("driver", int(function), values[:-1] + (ctypes.c_int64(values[-1]).value,))
        return (driver.CUresult.CUDA_SUCCESS,)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, _Gpu, Any]]:
    """(the package, its stand-in GPU, its _driver_launch) imported in this process."""
    root = project_with(tmp_path_factory.mktemp("prep") / "proj", ["sigmoid"], "prepns")
    out = root.parent / "out"
    done = run_cli(root, "export", "sigmoid", "--out", str(out), "--arch", "sm_90")
    assert done.returncode == 0, done.stderr
    gpu = _Gpu(json.loads((out / "prepns_kernels" / "manifest.json").read_text()))
    from cuda.bindings import driver

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.Tensor, "is_cuda", property(lambda self: True), raising=False)
        mp.setattr(torch.Tensor, "get_device", lambda self: 0)  # cuda:0, as current_device
        mp.setattr(torch.cuda, "current_device", lambda: 0)
        mp.setattr(driver, "cuLaunchKernel", gpu.cu_launch_kernel)
        mp.syspath_prepend(str(out))
        launch = importlib.import_module("prepns_kernels._runtime.driver_launch")
        mp.setattr(launch, "static_launcher", lambda: gpu.static)
        mp.setattr(launch, "current_stream", lambda device: 0)
        contract = importlib.import_module("prepns_kernels._runtime.launch_contract")
        mp.setattr(contract, "_get_device", lambda: 0)
        mp.setattr(contract, "_cuda_sm_count", lambda device: 132)
        runtime = importlib.import_module("prepns_kernels._runtime.exported")
        mp.setattr(runtime.Library, "kernel", lambda self, lowered: gpu.handles[lowered])
        mp.setattr(
            runtime.Kernels, "empty", lambda self, shape, dtype: torch.empty(shape, dtype=dtype)
        )
        yield importlib.import_module("prepns_kernels"), gpu, launch


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
    """The recorder's rules live in one module that ships byte for byte
    (test_export_contract checks every shipped copy)."""
    from portkit.export.package import runtime_sources

    assert runtime_sources()["recorder.py"] == Path(recorder.__file__)
    assert recording.record is recorder.record
    replaying = Path(__file__).parents[2] / "portkit" / "runtime" / "replaying.py"
    assert "from .recorder import" in replaying.read_text()
    assert "__torch_dispatch__" not in replaying.read_text()  # the watch is the recorder's
