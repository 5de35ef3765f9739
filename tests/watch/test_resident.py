"""What a resident process relies on below the engine: a catalog that keeps an op whose
twin alone was edited, and commands that need no GPU touching none."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from portkit.project.session import Session
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


@pytest.mark.gpu
@pytest.mark.skipif(
    not __import__("torch").cuda.is_available(), reason="no CUDA GPU visible to PyTorch"
)
def test_the_gpu_twin_loads_one_library_per_cubin_content(watched):
    """A resident process asks for the twin's kernels every run: the same content loads
    its cubin once; an edit loads the new one (and runs it)."""
    import torch

    from portkit.backends import create
    from portkit.backends.twin import backend as twin_backend
    from portkit.launch.kernel_set import LaunchConfig

    root = watched("res_gpu_twin")
    session = Session.from_environment(root)
    twin = create("twin", session.config)
    op = session.op("res_gpu_twin")
    loaded = len(twin_backend._LIBRARIES)
    twin.kernels(op)
    twin.kernels(op)
    assert len(twin_backend._LIBRARIES) == loaded + 1
    edit(root / "cuda_src" / "res_gpu_twin.cu", "T(2)", "T(3)")
    session.refresh(keep_ops_on_twin_edit=True)
    kernels = twin.kernels(session.op("res_gpu_twin"))
    assert len(twin_backend._LIBRARIES) == loaded + 2
    x = torch.arange(64, dtype=torch.float32, device="cuda")
    out = torch.zeros_like(x)
    kernels.targets["res_gpu_twin_fwd"].launch(LaunchConfig((2, 1, 1), (32, 1, 1)), [x, out, 64])
    torch.cuda.synchronize()
    assert torch.equal(out, x * 3)
