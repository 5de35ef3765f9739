"""An op loaded again under the same name (a notebook after an edit) lets its old version
go: with the compiled replayer built against this CPU torch, every replaced version's
``k`` (and so, on a GPU, its twin's library) is freed by a full collection, and the
versions alive stay at one however many loads there were."""

from __future__ import annotations

import ctypes
import gc
import weakref

import torch

from portkit.errors import OpDefinitionError
from portkit.launch.kernel_set import KernelSet
from portkit.runtime.autograd_function import Binding
from portkit.runtime.registration import register
from portkit.runtime.replaying import ReplayingLauncher
from tests.launch.test_replay_autograd import LAYOUT, Target, backward, c_launch, forward
from tests.launch.test_replay_autograd import make_op as square


def load(qualname: str, module) -> tuple[object, KernelSet]:
    """``square`` bound to fresh kernels under ``qualname``, as portkit.load builds it."""
    from portkit.runtime.eager_replay import ReplayedOpCallable
    from portkit.runtime.native_replayer import NativeReplayer

    address = ctypes.cast(c_launch, ctypes.c_void_p).value
    k = KernelSet("square", "fake", "cpu", {"mul": Target("mul"), "scale": Target("scale")})
    fwd = ReplayingLauncher(
        forward, k, NativeReplayer(module, address, 0, 16), True, None, 1, LAYOUT.saved
    )
    bwd = ReplayingLauncher(backward, k, NativeReplayer(module, address, 0, 16), False)
    binding = Binding(fwd, bwd, k, lambda a: None, OpDefinitionError)
    registered = register(qualname, LAYOUT, ["mul", "scale"], binding)
    return ReplayedOpCallable(registered, binding, fwd.run_eager), k


def collect_fully() -> None:
    """Collect until nothing is left to collect. A replaced op version is a cycle whose
    compiled replayer (C++, invisible to the collector) lets go of the op's kernels only
    when it is destroyed: they are garbage one pass later (measured here, on the CPU
    build's replayer, and on an H100, 2026-11-27: one pass left the previous version)."""
    for _ in range(10):
        if not gc.collect():
            return


def test_each_load_frees_the_version_it_replaced() -> None:
    square("compiled")  # skips where no compiler builds the compiled replayer
    from portkit.runtime.native_replayer import compiled_module

    module = compiled_module()
    versions: list[weakref.ref] = []
    for n in range(6):
        f, k = load("pkreplaced::square", module)
        versions.append(weakref.ref(k))
        del k
        for _ in range(2):  # records, then replays through the C++ node
            x = torch.rand(5, dtype=torch.float64, requires_grad=True)
            y = f(x)
            y.sum().backward()
            assert torch.equal(x.grad, 2 * x.detach())
        del f, x, y
        collect_fully()
        alive = [i for i, ref in enumerate(versions) if ref() is not None]
        assert alive == [n], f"after load {n}, versions {alive} are alive"
