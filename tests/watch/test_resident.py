"""What a resident process relies on below the engine: a catalog that keeps an op whose
twin alone was edited, and commands that need no GPU touching none."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from portkit.project.session import Session
from tests.launch.test_replaced_versions import collect_fully
from tests.watch.conftest import edit


def test_a_twin_edit_keeps_the_op_when_asked_and_forgets_it_otherwise(watched):
    root = watched("res_twin")
    session = Session.from_environment(root)
    op = session.op("res_twin")
    twin = root / "cuda_src" / "res_twin.cu"
    edit(twin, "T(2)", "T(3)")
    assert session.refresh(keep_ops_on_twin_edit=True) == []
    assert session.op("res_twin") is op
    assert session.refresh() == []  # the new content was noted: nothing is stale now
    edit(twin, "T(3)", "T(4)")
    assert session.refresh() == ["res_twin"]  # the default forgets it, as before
    assert session.op("res_twin") is not op


def test_a_twin_that_is_no_longer_utf8_is_forgotten_so_loading_says_why(watched):
    root = watched("res_utf8")
    session = Session.from_environment(root)
    session.op("res_utf8")
    (root / "cuda_src" / "res_utf8.cu").write_bytes(b"// caf\xe9\n")
    assert session.refresh(keep_ops_on_twin_edit=True) == ["res_utf8"]
    assert "res_utf8" in session.catalog.broken
    assert "is not UTF-8" in session.catalog.broken["res_utf8"]


PROBE = """
import json, sys
import torch, numba.cuda
calls = []
def spy(module, name):
    real = getattr(module, name)
    def call(*a, **k):
        calls.append(module.__name__ + "." + name)
        return real(*a, **k)
    setattr(module, name, call)
for name in ("is_available", "device_count", "init", "current_device", "synchronize"):
    spy(torch.cuda, name)
for name in ("is_available", "current_context", "get_current_device", "list_devices"):
    spy(numba.cuda, name)
from portkit.cli import main
try:
    main(sys.argv[1:], prog_name="portkit")
except SystemExit as exc:
    code = exc.code
print("PROBE=" + json.dumps({"code": code, "calls": calls,
                             "torch_cuda": torch.cuda.is_initialized()}))
"""


def test_sim_and_watch_sim_ask_nothing_of_cuda(watched):
    """`portkit sim` and `portkit watch --sim` run on the CPU: no CUDA probe, no context
    (on a GPU machine each would cost the CUDA context's start and memory)."""
    root = watched("res_nocuda")
    for args in (["sim", "res_nocuda"], ["watch", "res_nocuda", "--sim", "--runs", "1"]):
        proc = subprocess.run(
            [sys.executable, "-c", PROBE, *args],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
        )
        line = next(l for l in proc.stdout.splitlines() if l.startswith("PROBE="))
        probe = json.loads(line.removeprefix("PROBE="))
        assert probe == {"code": 0, "calls": [], "torch_cuda": False}, (args, proc.stderr)


class FakeDriver:
    """The CUDA driver's library calls, recorded: ``loaded`` the handles in load order,
    ``unloaded`` those given to cuLibraryUnload."""

    def __init__(self) -> None:
        self.loaded: list[tuple[str, bytes]] = []
        self.unloaded: list[tuple[str, bytes]] = []

    def load(self, image: bytes) -> tuple[str, bytes]:
        handle = (f"library {len(self.loaded)}", image)
        self.loaded.append(handle)
        return handle

    @staticmethod
    def kernel(library: tuple[str, bytes], lowered: str) -> int:
        return 0x1000 + len(lowered)


@pytest.fixture
def fake_driver(monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    """The twin backend's kernels on a CPU machine: NVRTC compiles the cubin for real, the
    driver is ``FakeDriver`` and the current GPU is 0."""
    import torch

    from portkit.backends.twin import backend as twin_backend
    from portkit.runtime import driver_launch

    fake = FakeDriver()
    monkeypatch.setattr(driver_launch, "load_library", fake.load)
    monkeypatch.setattr(driver_launch, "get_kernel", fake.kernel)
    monkeypatch.setattr(driver_launch, "unload_library", fake.unloaded.append)
    monkeypatch.setattr(twin_backend, "_current_device_arch", lambda: "sm_90")
    monkeypatch.setattr(twin_backend, "_LIBRARIES", type(twin_backend._LIBRARIES)())
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    return fake


def test_an_edited_twin_unloads_its_old_library_once_nothing_launches_it(watched, fake_driver):
    """A resident process asks for the twin's kernels on every run: the same content is
    loaded once; an edit loads the new cubin and unloads the old one exactly once, when
    the last KernelSet (or a kernel handle, as a recording keeps) that launches it is
    gone, and never the one in use."""
    import gc

    from portkit.backends import create
    from portkit.backends.twin.instances import twin_instantiations
    from portkit.runtime.driver_launch import DriverKernel

    root = watched("res_unload")
    session = Session.from_environment(root)
    twin = create("twin", session.config)
    first = twin.kernels(session.op("res_unload"))
    again = twin.kernels(session.op("res_unload"))
    assert len(fake_driver.loaded) == 1  # one cubin content, one library
    (combo, *_) = twin_instantiations(session.op("res_unload"))["res_unload_fwd"]
    kept = first.targets["res_unload_fwd"]._handle_of(combo)  # one kernel of the library
    edit(root / "cuda_src" / "res_unload.cu", "T(2)", "T(3)")
    session.refresh(keep_ops_on_twin_edit=True)
    second = twin.kernels(session.op("res_unload"))
    old, new = fake_driver.loaded
    assert old[1] != new[1] and fake_driver.unloaded == []  # `first` may still launch
    del first, again
    gc.collect()
    assert fake_driver.unloaded == []  # `kept`, a handle of it, still launches it
    driver = DriverKernel(kept, ["pointer", "pointer", "int"])  # a recording's kernel
    del kept
    gc.collect()
    assert fake_driver.unloaded == []
    del driver
    gc.collect()
    assert fake_driver.unloaded == [old]
    third = twin.kernels(session.op("res_unload"))  # the live library: served, kept
    del second, third
    gc.collect()
    assert fake_driver.unloaded == [old] and len(fake_driver.loaded) == 2


def test_the_twin_keeps_the_libraries_of_the_twins_used_last(fake_driver, monkeypatch):
    """Twins at other paths (``portkit mutate`` writes each mutant to a folder of its own)
    do not pile up: past ``MAX_LIBRARIES`` the twin used least recently leaves the table,
    and its library is unloaded once nothing launches it."""
    import gc

    from portkit.backends.twin import backend as twin_backend

    monkeypatch.setattr(twin_backend, "MAX_LIBRARIES", 2)
    a = twin_backend.current_library(Path("a.cu"), b"A", 0)
    twin_backend.current_library(Path("b.cu"), b"B", 0)
    assert twin_backend.current_library(Path("a.cu"), b"A", 0) is a  # same content: kept
    twin_backend.current_library(Path("c.cu"), b"C", 0)  # b.cu, used least recently, leaves
    gc.collect()
    assert [image for _, image in fake_driver.unloaded] == [b"B"]
    assert [image for _, image in fake_driver.loaded] == [b"A", b"B", b"C"]


@pytest.fixture
def unloaded(monkeypatch) -> set[int]:
    """The CUlibrary handles the driver unloaded during the test (``cuLibraryUnload``
    succeeded on them). Spied, not asked: a query of an unloaded handle
    (``cuLibraryGetKernelCount``) crashed the process on an H200 (2026-11-27)."""
    from cuda.bindings import driver

    real = driver.cuLibraryUnload
    done: set[int] = set()

    def spy(handle):
        result = real(handle)
        if result[0] == driver.CUresult.CUDA_SUCCESS:
            done.add(int(handle))
        return result

    monkeypatch.setattr(driver, "cuLibraryUnload", spy)
    return done


@pytest.mark.gpu
@pytest.mark.skipif(
    not __import__("torch").cuda.is_available(), reason="no CUDA GPU visible to PyTorch"
)
def test_the_gpu_twin_loads_one_library_per_cubin_content(watched, unloaded):
    """A resident process asks for the twin's kernels every run: the same content loads
    its cubin once; an edit loads the new one (and runs it) and unloads the old one once
    its kernels are gone."""
    import gc

    import torch

    from portkit.backends import create
    from portkit.backends.twin import backend as twin_backend
    from portkit.launch.kernel_set import LaunchConfig
    from portkit.runtime.driver_launch import loaded_libraries

    root = watched("res_gpu_twin")
    session = Session.from_environment(root)
    twin = create("twin", session.config)
    op = session.op("res_gpu_twin")

    def entries() -> list:
        return [v for k, v in twin_backend._LIBRARIES.items() if k[0].endswith("/res_gpu_twin.cu")]

    first = twin.kernels(op)
    ((_, library),) = entries()
    twin.kernels(op)
    assert entries() == [(entries()[0][0], library)]  # the same content: loaded once
    old_handle = library.handle
    del library
    edit(root / "cuda_src" / "res_gpu_twin.cu", "T(2)", "T(3)")
    session.refresh(keep_ops_on_twin_edit=True)
    kernels = twin.kernels(session.op("res_gpu_twin"))
    ((_, current),) = entries()  # replaced, not added
    assert current.handle is not old_handle
    x = torch.arange(64, dtype=torch.float32, device="cuda")
    out = torch.zeros_like(x)
    kernels.targets["res_gpu_twin_fwd"].launch(LaunchConfig((2, 1, 1), (32, 1, 1)), [x, out, 64])
    torch.cuda.synchronize()
    assert torch.equal(out, x * 3)
    assert int(old_handle) not in unloaded  # `first` may still launch it
    live = loaded_libraries()
    del first
    gc.collect()
    assert loaded_libraries() <= live - 1
    assert int(old_handle) in unloaded, "the old library is still loaded"
    assert int(current.handle) not in unloaded


@pytest.mark.gpu
@pytest.mark.skipif(
    not __import__("torch").cuda.is_available(), reason="no CUDA GPU visible to PyTorch"
)
def test_fifty_edits_in_a_notebook_keep_two_libraries_loaded_at_most(
    make_project, sources, monkeypatch, unloaded
):
    """``portkit.load`` after each of 50 edits of a differentiable twin, as a notebook
    does: every version computes its own values and gradients (replayed, through the
    compiled replayer's autograd node where it builds), the old version's last launch
    maybe still in flight when it is replaced; each replaced library is unloaded and the
    libraries loaded stay bounded instead of growing by one per edit."""
    import gc

    import torch

    import portkit
    from portkit.backends.twin import backend as twin_backend
    from portkit.runtime.driver_launch import loaded_libraries

    name = "res_fifty"
    prototype = sources.unary_op(name, cases=sources.ONE_CASE, backward="dx[i] = dy[i] * 2.0")
    twin_source = sources.unary_twin(name, backward="dx[i] = dy[i] * T(2);")
    root = make_project({name: (prototype, twin_source)})
    monkeypatch.chdir(root)
    session = Session.from_environment(root)
    twin = root / "cuda_src" / f"{name}.cu"

    def run(f, factor: int) -> None:  # twice: the first call of a signature records
        for _ in range(2):
            x = torch.arange(1 << 16, dtype=torch.float32, device="cuda").requires_grad_()
            y = f(x)
            y.backward(torch.ones_like(y))
            assert torch.equal(y.detach(), x.detach() * factor)
            assert torch.equal(x.grad, torch.full_like(x, factor))

    f = portkit.load(name, "twin", session=session)
    run(f, 2)
    (key,) = [k for k in twin_backend._LIBRARIES if k[0].endswith(f"/{name}.cu")]
    gc.collect()
    live = loaded_libraries()
    big = torch.arange(1 << 22, dtype=torch.float32, device="cuda")
    for factor in range(3, 53):
        # The driver may hand an unloaded library's handle to a later one: count afresh.
        unloaded.clear()
        old_handle = twin_backend._LIBRARIES[key][1].handle
        edit(twin, f"T({factor - 1})", f"T({factor})")  # forward and backward
        session.refresh(keep_ops_on_twin_edit=True)
        pending = f(big)  # the old version, maybe still running when it is replaced
        f = portkit.load(name, "twin", session=session)
        run(f, factor)
        assert torch.equal(pending, big * (factor - 1))
        del pending
        collect_fully()
        assert loaded_libraries() <= live, "an old version of the twin stayed loaded"
        assert int(old_handle) in unloaded, f"version {factor - 1} is still loaded"
