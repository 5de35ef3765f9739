"""An exported package launches by portkit's launch contract: it ships
``launch_contract.py`` byte for byte, its manifest lists every dtype's instantiation
(half precision included), and its runtime picks, for every launch portkit traces on
every dtype an op takes, the kernel portkit's twin would launch.

No GPU: the package's runtime is imported without registering its ops, its tensors
are CPU tensors that say they are on a GPU, and the driver only records launches."""

from __future__ import annotations

import importlib
import json
import struct
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch

from portkit.export.package import RUNTIME_FOLDER, runtime_sources
from portkit.runtime import launch_contract as contract
from tests.export.package_env import REPO, project_with, run_cli

HALF_OPS = ["rmsnorm", "layernorm"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(project, package folder) of rmsnorm and layernorm exported for sm_90."""
    root = project_with(tmp_path_factory.mktemp("half") / "proj", HALF_OPS, "halfns")
    (root / "tuning").mkdir()  # a tuned entry for rmsnorm, none for layernorm
    (root / "tuning" / "rmsnorm.json").write_text(json.dumps({"format": 1, "gpus": {
        "FakeGPU": {"bfloat16-4096x4096": {"config": {"fwd_elems": 8}}}}}))  # fmt: skip
    out = root.parent / "out"
    done = run_cli(
        root, "export", *HALF_OPS, "--out", str(out), "--arch", "sm_90", "--name", "half_ops"
    )
    assert done.returncode == 0, done.stderr
    return root, out / "half_ops"


def test_the_shipped_runtime_is_portkit_s_folder_byte_for_byte(exported) -> None:
    _, package = exported
    folder = REPO / "portkit" / "runtime"
    sources = sorted(p.name for p in folder.iterdir() if p.suffix in (".py", ".cpp"))
    assert "launch_contract.py" in sources and "exported.py" in sources
    assert "native.cpp" in sources  # the compiled replayer, built on the package's first use
    shipped = sorted(p.name for p in (package / RUNTIME_FOLDER).iterdir() if p.is_file())
    assert shipped == sources
    for name in sources:
        assert (package / RUNTIME_FOLDER / name).read_bytes() == (folder / name).read_bytes(), name
    assert runtime_sources() == {name: folder / name for name in sources}


def test_the_manifest_lists_every_dtype_s_instantiation(exported) -> None:
    _, package = exported
    manifest = json.loads((package / "manifest.json").read_text())
    for name in HALF_OPS:
        entry = manifest["ops"][name]
        assert {"float16", "bfloat16"} <= set(entry["dtypes"])
        for kernel, spec in entry["kernels"].items():
            assert spec["templates"] == ["T"], kernel
            for dtype in entry["dtypes"]:
                key = contract.instantiation_key((contract.C_SCALAR_OF_DTYPE[dtype],))
                assert spec["lowered"].get(key, "").startswith("_Z"), (kernel, dtype)


class _OnGpu(torch.Tensor):
    """A CPU tensor that says it is on a GPU: the runtime's checks take it for a CUDA
    tensor and the recorded launch gets its data pointer; nothing runs."""

    @property
    def is_cuda(self) -> bool:
        return True

    def get_device(self) -> int:
        return 0


def _on_gpu(dtype: str, numel: int = 4) -> torch.Tensor:
    return torch.zeros(numel, dtype=getattr(torch, dtype)).as_subclass(_OnGpu)


@pytest.fixture
def runtime(exported, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """The package's ``_runtime.exported`` (imported without the package's ``__init__``, which
    would register its ops), its driver replaced by one that records launches."""
    _, package = exported
    name = f"half_ops_{id(package)}"
    parent = types.ModuleType(name)
    parent.__path__ = [str(package)]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, name, parent)
    module = importlib.import_module(f"{name}._runtime.exported")
    shipped = [f"_runtime.{p.stem}" for p in (package / RUNTIME_FOLDER).glob("*.py")]
    for sub in ("_runtime", *shipped, "ops", "ops.rmsnorm"):
        monkeypatch.delitem(sys.modules, f"{name}.{sub}", raising=False)
    launches: list[tuple] = []

    class RecordingKernel:
        def __init__(self, handle, slots) -> None:
            self.handle, self.slots = handle, slots

        def launch(self, grid, block, shared, stream, values, warps=0) -> None:
            launches.append((self.handle, grid, block, shared, tuple(values)))
            module.warps.append(warps)

    monkeypatch.setattr(module.driver_launch, "DriverKernel", RecordingKernel)
    monkeypatch.setattr(module.driver_launch, "current_stream", lambda device: 0)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    module.launches = launches  # type: ignore[attr-defined]
    module.warps = []  # type: ignore[attr-defined]
    return module


class _Library:
    """Hands out a kernel's lowered name as its handle."""

    def kernel(self, lowered: str) -> str:
        return lowered


def _kernels(runtime: types.ModuleType, package: Path, op: str) -> dict:
    entry = json.loads((package / "manifest.json").read_text())["ops"][op]
    return {n: runtime.Kernel(n, spec, _Library()) for n, spec in entry["kernels"].items()}


def test_the_runtime_launches_what_portkit_s_twin_launches_for_every_dtype(
    exported, runtime
) -> None:
    from portkit.backends.twin.instances import checked_twin_kernels
    from portkit.launch.trace import TensorArg, traced_launches
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    root, package = exported
    catalog = discover(load_config(root))
    seen: set[tuple[str, str]] = set()
    for name in HALF_OPS:
        op = catalog.get(name)
        twins = checked_twin_kernels(op)
        kernels = _kernels(runtime, package, name)
        for case, launch in traced_launches(op):
            args = [_on_gpu(a.dtype) if isinstance(a, TensorArg) else a for a in launch.args]
            dtypes = [a.dtype if isinstance(a, TensorArg) else None for a in launch.args]
            config = launch.config
            kernels[launch.kernel][config.grid, config.block, config.shared_bytes](*args)
            # portkit's twin picks this instantiation for these arguments
            instantiation = contract.template_types(twins[launch.kernel], dtypes)
            lowered = kernels[launch.kernel].spec["lowered"]
            handle, grid, block, shared, values = runtime.launches.pop()
            assert handle == lowered[contract.instantiation_key(instantiation)], case
            assert (grid, block, shared) == (config.grid, config.block, config.shared_bytes)
            for value, arg in zip(values, args):
                if isinstance(arg, torch.Tensor):
                    assert value == arg.data_ptr()
            seen.add((name, op.case(case).dtype))
    for name in HALF_OPS:
        for dtype in catalog.get(name).definition.dtypes:
            assert (name, dtype) in seen


def test_the_runtime_refuses_with_portkit_s_messages(exported, runtime) -> None:
    _, package = exported
    fwd = _kernels(runtime, package, "rmsnorm")["rmsnorm_fwd"]
    x, w, out = _on_gpu("float32"), _on_gpu("bfloat16"), _on_gpu("float32")
    rstd = _on_gpu("float32")
    with pytest.raises(runtime.InputError) as info:
        fwd[1, 32](x, w, out, rstd, 4, 1e-6)
    assert str(info.value) == (
        "twin kernel rmsnorm_fwd: w is bfloat16 but earlier T* arguments were float32; "
        "one instantiation takes one dtype per template parameter"
    )
    assert isinstance(info.value, ValueError) and isinstance(info.value, runtime.PortkitError)
    cpu = torch.zeros(4)
    with pytest.raises(runtime.InputError, match="argument 0: tensor is on cpu, this "):
        fwd[1, 32](cpu, _on_gpu("float32"), out, rstd, 4, 1e-6)
    with pytest.raises(runtime.InputError, match="parameter cols is a long long scalar; got a"):
        fwd[1, 32](x, _on_gpu("float32"), out, rstd, x, 1e-6)
    assert runtime.launches == []


def test_the_runtime_checks_launch_configurations_as_portkit_does(exported, runtime) -> None:
    _, package = exported
    fwd = _kernels(runtime, package, "rmsnorm")["rmsnorm_fwd"]
    fwd[1, 32]  # a checked configuration, cached
    with pytest.raises(runtime.LaunchError, match=r"grid must be an int or 1-3 ints, got True"):
        fwd[True, 32]  # True == 1 and hashes alike: it must not find the cached one
    with pytest.raises(runtime.LaunchError, match=r"grid dimension y=65536 > 65535"):
        fwd[(1, 65536), 32]
    with pytest.raises(runtime.LaunchError, match="bytes of dynamic shared memory"):
        fwd[1, 32, contract.MAX_SHARED_BYTES + 1]


def test_an_int_for_a_c_bool_never_reaches_torch_s_launcher_as_its_byte(runtime) -> None:
    """torch's launcher passes a C bool's value as one byte (5 stays 5); an int there
    takes the packed launch, whose struct "?" makes it 1, as portkit's twin does."""
    spec = {
        "params": [
            {"name": "x", "ctype": "float", "pointer": True},
            {"name": "flag", "ctype": "bool", "pointer": False},
        ],
        "templates": [],
        "lowered": {"": "flagged"},
    }
    kernel = runtime.Kernel("flagged", spec, _Library())
    x = _on_gpu("float32")
    kernel[1, 32](x, True)
    kernel[1, 32](x, 5)
    (*_, with_bool), (*_, with_int) = runtime.launches
    assert with_bool[1] is True and runtime.warps[0] > 0  # torch's launcher, a Python bool
    assert with_int[1] == 5 and runtime.warps[1] == 0  # packed by struct: "?" makes it 1
    assert struct.pack("=?7x", with_int[1])[0] == 1


def test_the_runtime_replays_a_recorded_signature_without_the_launcher(
    exported, runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The package's replaying launcher (portkit's, shipped) with its prepared replayer:
    the first call of a signature builds the kernels' plans on the checked path, the
    second runs the launcher on the recording k, later ones repeat its launches on new
    tensors without the launcher."""
    _, package = exported
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True), raising=False)
    monkeypatch.setattr(torch.Tensor, "get_device", lambda self: 0)
    monkeypatch.setattr(
        runtime.Kernels, "empty", lambda self, shape, dtype: torch.empty(tuple(shape), dtype=dtype)
    )
    # the replay launches through the fixture's recording kernel, not torch's launcher
    # (which a CUDA build of torch has, and which would be handed the stand-in handles)
    monkeypatch.setattr(runtime.driver_launch, "static_launcher", lambda: None)
    entry = json.loads((package / "manifest.json").read_text())["ops"]["rmsnorm"]
    parent = runtime.__name__.rsplit(".", 2)[0]
    cls = getattr(importlib.import_module(f"{parent}.ops.rmsnorm"), entry["class"])
    k = runtime.Kernels("rmsnorm", _kernels(runtime, package, "rmsnorm"))
    table = json.loads((package / "tuning" / "rmsnorm.json").read_text())  # as register_ops
    k.knob_choice = runtime.knob_choice.KnobChoice(
        "rmsnorm", table["knobs"], table, runtime.OpDefinitionError
    )
    ran = []

    def launcher(kernels, *args):
        ran.append(kernels is k)
        return cls.forward(kernels, *args)

    replay = runtime.replay
    forward = replay.ReplayingLauncher(launcher, k, replay.PreparedReplayer(), flat=True)
    x, w = torch.randn(3, 8), torch.randn(8)
    forward(k, x, w)  # the first launch of float32 builds its plan: the checked path
    out, (_, _, rstd) = forward(k, x, w)
    recorded = runtime.launches.pop()
    x2, w2 = torch.randn(3, 8), torch.randn(8)
    out2, (saved_x, saved_w, rstd2) = forward(k, x2, w2)
    replayed = runtime.launches.pop()
    assert ran == [False, False]  # on the recording k, twice; replayed after
    assert saved_x is x2 and saved_w is w2
    assert out2.shape == out.shape and rstd2.shape == rstd.shape
    assert replayed[:4] == recorded[:4]  # kernel, grid, block, shared bytes
    assert replayed[4] == (
        x2.data_ptr(),
        w2.data_ptr(),
        out2.data_ptr(),
        rstd2.data_ptr(),
        8,
        *recorded[4][5:],
    )
    forward(k, torch.randn(2, 8), w)  # a new signature records at once: the plan exists
    assert ran == [False, False, False]


class _CudaLike:
    """What a knob lookup reads of a tensor: a GPU device, a dtype and a shape."""

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype) -> None:
        self.shape, self.dtype = shape, dtype
        self.device = types.SimpleNamespace(type="cuda", index=0)


def test_the_package_ships_each_op_s_tuning_table_and_picks_by_its_rules(exported, runtime) -> None:
    _, package = exported
    assert (package / "_runtime" / "knob_choice.py").is_file()
    assert (
        "from .knob_choice import knobs as knobs"
        in (package / "_runtime" / "exported.py").read_text()
    )
    table = json.loads((package / "tuning" / "rmsnorm.json").read_text())
    assert table["knobs"]["fwd_elems"] == [16, 8, 32]  # the declaration, for the defaults
    assert table["gpus"]["FakeGPU"]["bfloat16-4096x4096"]["config"] == {"fwd_elems": 8}
    untuned = json.loads((package / "tuning" / "layernorm.json").read_text())
    assert untuned["gpus"] == {} and "bwd_threads_per_sm" in untuned["knobs"]
    choice = runtime.knob_choice.KnobChoice(
        "rmsnorm", table["knobs"], table, runtime.OpDefinitionError
    )
    choice._device_name = lambda tensor: "FakeGPU"
    k = types.SimpleNamespace(knob_choice=choice)
    assert runtime.knobs(k, _CudaLike((4000, 4096), torch.bfloat16)).fwd_elems == 8
    assert runtime.knobs(k, _CudaLike((4000, 4096), torch.float32)).fwd_elems == 16
    with pytest.raises(runtime.OpDefinitionError, match="has no knob 'fwd'"):
        _ = runtime.knobs(k, None).fwd


class _Stop(Exception):
    """Raised by a spied forward: the call got past the input check."""


def test_the_class_s_check_inputs_and_backward_are_read_where_the_manifest_declares_them(
    exported, runtime, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``register_ops`` reads an op class's ``check_inputs`` and ``backward`` where the
    manifest declares them (export records what ``@portkit.op`` found) and asks the class
    for nothing it does not declare: a class that defines more is not probed."""
    _, package = exported
    manifest = json.loads((package / "manifest.json").read_text())
    assert [manifest["ops"][n]["check_inputs"] for n in HALF_OPS] == [True, True]
    monkeypatch.setenv("PORTKIT_REPLAY", "off")
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True), raising=False)
    asked: list[str] = []

    def spied(name: str) -> type:
        def check_inputs(*inputs: Any) -> None:
            asked.append(name)

        def forward(k: Any, *inputs: Any) -> Any:
            raise _Stop

        return type(name, (), {"check_inputs": check_inputs, "forward": forward,
                               "backward": lambda k, saved, *grads: None})  # fmt: skip

    launchers = {n: spied(n) for n in HALF_OPS}
    ops = runtime.register_ops(package, launchers)
    assert ops["rmsnorm"].binding.backward is launchers["rmsnorm"].backward
    x, w = torch.randn(2, 8), torch.randn(8)
    with pytest.raises(_Stop):
        ops["rmsnorm"](x, w)
    assert asked == ["rmsnorm"]
    # The same classes under a manifest that declares neither: neither is read.
    undeclared = tmp_path / "package"
    (undeclared / "tuning").mkdir(parents=True)
    for name in HALF_OPS:
        manifest["ops"][name]["check_inputs"] = False
        manifest["ops"][name]["layout"]["has_backward"] = False
        (undeclared / "tuning" / f"{name}.json").write_bytes(
            (package / "tuning" / f"{name}.json").read_bytes()
        )
    (undeclared / "manifest.json").write_text(json.dumps(manifest))
    ops = runtime.register_ops(undeclared, launchers)
    assert ops["rmsnorm"].binding.backward is None
    with pytest.raises(_Stop):
        ops["rmsnorm"](x, w)
    assert asked == ["rmsnorm"]
