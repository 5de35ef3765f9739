"""The numba backend under compute-sanitizer compiles with line info; where numba-cuda
cannot link that, the kernel is compiled again without it (checked with a fake dispatcher:
the real conflict needs a GPU, and scripts/gpu.sh's sanitizer run exercises it)."""

from __future__ import annotations

import pytest


def test_a_link_conflict_with_line_info_recompiles_the_kernel_without_it(monkeypatch, capsys):
    """nvJitLink refuses line info next to numba-cuda's half-precision library: the numba
    backend recompiles that kernel without line info instead of failing the check."""
    import types

    import torch
    from numba import cuda

    from portkit.backends import numba_gpu
    from portkit.launch.kernel_set import LaunchConfig

    monkeypatch.setattr(cuda, "external_stream", lambda handle: "stream")
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: types.SimpleNamespace(cuda_stream=0))
    launched = []

    class FakeDispatcher:
        def __init__(self, py_func, targetoptions):
            self.py_func, self.targetoptions = py_func, targetoptions

        def __getitem__(self, launch):
            def run(*args):
                if self.targetoptions.get("lineinfo"):
                    raise RuntimeError(
                        "ERROR_NVVM_COMPILE linking module flags 'Debug Info Version': "
                        "IDs have conflicting behaviors"
                    )
                launched.append((launch, args))

            return run

    def scale_fwd(x):
        pass

    kernel = numba_gpu.NumbaKernel(FakeDispatcher(scale_fwd, {"lineinfo": True, "opt": 3}))
    config = LaunchConfig(grid=(1, 1, 1), block=(32, 1, 1), shared_bytes=0)
    kernel.launch(config, [3])
    kernel.launch(config, [4])
    assert [args for _, args in launched] == [(3,), (4,)]
    assert kernel.lineinfo_dropped
    assert kernel._plain.targetoptions == {"opt": 3}
    assert "scale_fwd: compiled without line info" in capsys.readouterr().err

    other = numba_gpu.NumbaKernel(FakeDispatcher(scale_fwd, {"lineinfo": False}))
    other._dispatcher.targetoptions["lineinfo"] = False

    def broken(self, launch):
        raise RuntimeError("Debug Info Version")

    other._dispatcher.__class__ = type("Broken", (FakeDispatcher,), {"__getitem__": broken})
    with pytest.raises(RuntimeError):  # without line info the error is the kernel's own
        other.launch(config, [5])


def test_the_conflict_is_recognised_when_the_log_is_not_in_the_message():
    """On the H100, numba-cuda's nvJitLinkError said only 'ERROR_NVVM_COMPILE (5)'."""
    from portkit.backends.numba_gpu import _link_conflict

    class nvJitLinkError(RuntimeError):  # noqa: N801 (cuda.bindings' spelling)
        pass

    assert _link_conflict(nvJitLinkError("ERROR_NVVM_COMPILE (5)"))
    assert _link_conflict(RuntimeError("module flags 'Debug Info Version': conflicting"))
    assert not _link_conflict(RuntimeError("ERROR_NVVM_COMPILE (5)"))
    assert not _link_conflict(nvJitLinkError("ERROR_INVALID_INPUT"))
