"""The on-disk cache of numba-compiled prototypes (portkit/backends/prototype_cache.py).

numba-cuda's cache asks a CUDA context for the compute capability (its index key) and
binds each kernel to a context after compiling, so without a GPU the tests below answer
those four device questions with sm_90 (``fake_device``); everything else, the compile,
numba's own save/load/index code and portkit's key and folder, runs for real. Each
"fresh process" is a fresh import of the prototype: new dispatchers, empty memory.
The GPU test at the end does the same with nothing faked.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest
from numba import types

from portkit.backends import prototype_cache
from portkit.backends.numba_gpu import NumbaGPU
from portkit.project.config import ProjectConfig
from portkit.project.discovery import load_op
from portkit.project.environment import Settings
from tests.conftest import unary_op

F32 = (types.float32[::1], types.float32[::1], types.int64)
F64 = (types.float64[::1], types.float64[::1], types.int64)


@pytest.fixture
def fake_device():
    from numba.cuda import dispatcher
    from numba.cuda.codegen import CUDACodeLibrary, JITCUDACodegen

    sm90 = SimpleNamespace(compute_capability=(9, 0))
    with (
        mock.patch.object(dispatcher, "get_current_device", lambda: sm90),
        mock.patch.object(JITCUDACodegen, "magic_tuple", lambda self: ("cpu-test", (9, 0))),
        mock.patch.object(CUDACodeLibrary, "_ensure_cc", lambda self, cc: cc or (9, 0, "a")),
        mock.patch.object(dispatcher._Kernel, "bind", lambda self: None),
    ):
        yield


def write_op(root: Path, name: str, body: str = "out[i] = x[i] * 2.0") -> Path:
    path = root / "prototypes" / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(unary_op(name, body))
    return path


def fresh_kernel(path: Path, name: str, cache_dir: Path):
    """The op's forward kernel as a new process sees it, attached to the cache."""
    dispatcher = load_op(name, path, None).kernels[f"{name}_fwd"]
    prototype_cache.attach(dispatcher, name, path.parent.parent, cache_dir)
    return dispatcher


def compiled_from(dispatcher, sig) -> str:
    dispatcher.compile(sig)
    return prototype_cache.origin(dispatcher)


def test_second_process_loads_the_kernel_from_the_cache(tmp_path, fake_device):
    path, cache = write_op(tmp_path, "pc_hit"), tmp_path / "cache"
    first = fresh_kernel(path, "pc_hit", cache)
    assert compiled_from(first, F32) == "1 compiled"
    second = fresh_kernel(path, "pc_hit", cache)
    assert second._portkit_cache_dir == first._portkit_cache_dir
    assert compiled_from(second, F32) == "1 from cache"
    # The loaded kernel is the compiled one: same PTX.
    assert second.overloads[F32].inspect_asm((9, 0, "a")) == first.overloads[F32].inspect_asm(
        (9, 0, "a")
    )


def test_an_edited_prototype_is_compiled_again(tmp_path, fake_device):
    path, cache = write_op(tmp_path, "pc_edit"), tmp_path / "cache"
    before = fresh_kernel(path, "pc_edit", cache)
    compiled_from(before, F32)
    write_op(tmp_path, "pc_edit", body="out[i] = x[i] * 3.0")
    after = fresh_kernel(path, "pc_edit", cache)
    assert after._portkit_cache_dir != before._portkit_cache_dir
    assert compiled_from(after, F32) == "1 compiled"
    assert after.inspect_asm(F32) != before.inspect_asm(F32)


def test_another_argument_type_is_a_miss(tmp_path, fake_device):
    path, cache = write_op(tmp_path, "pc_types"), tmp_path / "cache"
    compiled_from(fresh_kernel(path, "pc_types", cache), F32)
    again = fresh_kernel(path, "pc_types", cache)
    assert compiled_from(again, F64) == "1 compiled"
    assert compiled_from(again, F32) == "1 from cache, 1 compiled"


@pytest.mark.parametrize("damaged", ["nbc", "nbi"])
def test_a_damaged_cache_file_is_compiled_again(tmp_path, fake_device, damaged):
    name = f"pc_damaged_{damaged}"
    path, cache = write_op(tmp_path, name), tmp_path / "cache"
    first = fresh_kernel(path, name, cache)
    compiled_from(first, F32)
    (entry,) = Path(first._portkit_cache_dir).glob(f"*.{damaged}")
    entry.write_bytes(b"\x80\x04not a pickle")
    second = fresh_kernel(path, name, cache)
    assert compiled_from(second, F32) == "1 compiled"
    # ... and saved whole again: the next process loads it.
    assert compiled_from(fresh_kernel(path, name, cache), F32) == "1 from cache"


def config_for(root: Path) -> ProjectConfig:
    return ProjectConfig(root, root / "prototypes", root / "cuda_src", root / "cache")


@pytest.mark.parametrize("switch", ["option", "environment"])
def test_the_cache_can_be_turned_off(tmp_path, fake_device, monkeypatch, switch):
    name = f"pc_off_{switch}"
    path = write_op(tmp_path, name)
    op = load_op(name, path, None)
    backend = NumbaGPU(config_for(tmp_path))
    backend.kernels(op)  # on: attached
    assert op.kernels[f"{name}_fwd"]._portkit_cache_dir is not None
    if switch == "option":
        backend.use_cache = False
    else:  # what a session reads from PORTKIT_PROTOTYPE_CACHE=0 (or --no-cache)
        monkeypatch.setenv("PORTKIT_PROTOTYPE_CACHE", "0")
        backend = NumbaGPU(replace(config_for(tmp_path), settings=Settings.from_environment()))
    backend.kernels(op)
    dispatcher = op.kernels[f"{name}_fwd"]
    assert dispatcher._portkit_cache_dir is None
    assert compiled_from(dispatcher, F32) == "1 compiled"
    assert not any((tmp_path / "cache").rglob("*.nbi")), "nothing written with the cache off"
    assert "(no disk cache)" in backend.cache_report([op])[0]


def test_the_key_follows_device_functions_in_other_files(tmp_path, monkeypatch):
    helper = tmp_path / "pc_helpers.py"
    helper.write_text(
        "from numba import cuda\n\n@cuda.jit(device=True)\ndef scale(v):\n    return v * 2.0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pc_helpers", raising=False)
    body = "out[i] = scale(x[i])"
    path = tmp_path / "prototypes" / "pc_dep.py"
    path.parent.mkdir()
    path.write_text("from pc_helpers import scale\n" + unary_op("pc_dep", body))
    key = prototype_cache.cache_key(load_op("pc_dep", path, None).kernels.values(), tmp_path, {})
    helper.write_text(helper.read_text().replace("2.0", "4.0"))
    monkeypatch.delitem(sys.modules, "pc_helpers")
    edited = load_op("pc_dep", path, None).kernels.values()
    assert prototype_cache.cache_key(edited, tmp_path, {}) != key
    files, _ = prototype_cache.dependencies(edited, tmp_path)
    assert helper.resolve() in files and path.resolve() in files


def test_the_key_follows_constants_and_compile_options(tmp_path):
    path = tmp_path / "prototypes" / "pc_const.py"
    path.parent.mkdir()
    path.write_text("SCALE = 2.0\n" + unary_op("pc_const", "out[i] = x[i] * SCALE"))
    op = load_op("pc_const", path, None)
    key = prototype_cache.cache_key(op.kernels.values(), tmp_path, {})
    assert prototype_cache.cache_key(op.kernels.values(), tmp_path, {}) == key
    # numba freezes a global constant into the code: a value set at run time counts.
    vars(sys.modules["portkit_ops.pc_const"])["SCALE"] = 3.0
    assert prototype_cache.cache_key(op.kernels.values(), tmp_path, {}) != key
    vars(sys.modules["portkit_ops.pc_const"])["SCALE"] = 2.0
    assert prototype_cache.cache_key(op.kernels.values(), tmp_path, {"lineinfo": True}) != key


def test_the_key_is_the_same_in_every_process(tmp_path):
    """A key that changed between processes (hash randomisation, addresses) would never hit."""
    path = write_op(tmp_path, "pc_stable")
    script = (
        "import sys; from pathlib import Path;"
        "from portkit.project.discovery import load_op;"
        "from portkit.backends.prototype_cache import cache_key;"
        f"op = load_op('pc_stable', Path({str(path)!r}), None);"
        f"print(cache_key(op.kernels.values(), Path({str(tmp_path)!r}), {{'opt': True}}))"
    )
    root = Path(__file__).resolve().parents[2]
    keys = {
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
            env={"PYTHONHASHSEED": seed, "PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert len(keys) == 1 and len(next(iter(keys))) == 64


@pytest.mark.gpu
@pytest.mark.skipif(
    not __import__("torch").cuda.is_available(), reason="no CUDA GPU visible to PyTorch"
)
def test_on_a_gpu_the_cached_kernel_runs_and_matches(tmp_path):
    import torch

    from portkit.launch.kernel_set import LaunchConfig

    path = write_op(tmp_path, "pc_gpu")
    config = config_for(tmp_path)
    x = torch.arange(100, dtype=torch.float32, device="cuda")
    outputs, origins = [], []
    for _ in range(2):
        op = load_op("pc_gpu", path, None)
        kernels = NumbaGPU(config).kernels(op)
        out = torch.zeros_like(x)
        kernels.targets["pc_gpu_fwd"].launch(LaunchConfig((4, 1, 1), (32, 1, 1)), [x, out, 100])
        torch.cuda.synchronize()
        outputs.append(out.cpu())
        origins.append(prototype_cache.origin(op.kernels["pc_gpu_fwd"]))
    assert origins == ["1 compiled", "1 from cache"]
    assert torch.equal(outputs[0], x.cpu() * 2) and torch.equal(outputs[1], outputs[0])


def test_a_kernel_that_links_files_is_saved_with_its_cubin(tmp_path, fake_device):
    """float16/bfloat16 kernels link numba-cuda's .cu shims, which numba will not pickle;
    with the cubin for this GPU built, the entry is saved without them (and the kernel
    in memory keeps them)."""
    path, cache = write_op(tmp_path, "pc_linked"), tmp_path / "cache"
    compiled = fresh_kernel(path, "pc_linked", cache)
    compiled.compile(F32)
    library = compiled.overloads[F32]._codelibrary
    library._linking_files.add("/numba-cuda/shim.cu")
    library._cubin_cache[(9, 0, "a")] = b"built cubin"
    other = prototype_cache._cache_classes(tmp_path / "other")(compiled.py_func)
    (tmp_path / "other").mkdir()
    other.save_overload(F32, compiled.overloads[F32])
    assert library._linking_files == {"/numba-cuda/shim.cu"}
    from numba.cuda.descriptor import cuda_target

    loaded = prototype_cache._cache_classes(tmp_path / "other")(compiled.py_func).load_overload(
        F32, cuda_target.target_context
    )
    assert loaded is not None
    assert loaded._codelibrary._cubin_cache[(9, 0, "a")] == b"built cubin"
    assert not loaded._codelibrary._linking_files


def test_a_cache_folder_that_cannot_be_made_compiles_in_memory(tmp_path, fake_device):
    path = write_op(tmp_path, "pc_unwritable")
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    dispatcher = load_op("pc_unwritable", path, None).kernels["pc_unwritable_fwd"]
    assert prototype_cache.attach(dispatcher, "pc_unwritable", tmp_path, blocked) is None
    assert compiled_from(dispatcher, F32) == "1 compiled"
