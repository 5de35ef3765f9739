"""The compiled replayer's autograd node (native.cpp ``ReplayNode``), on the CPU: a
plain-eager call that wants a gradient replays its forward and gets a C++ node whose
backward replays the backward's recording. Everything is compared with the same op
through the Python ``autograd.Function`` (replay off): values, gradients, accumulation,
retain_graph, the refusal of double backward, version checks, and the fall-back to the
Python backward where the backward cannot be replayed.

The op is ``square(x) = x * x`` on float64, its backward ``2 * x * g``, with kernels
that multiply and scale through raw CPU pointers, so a wrong pointer gives wrong numbers.
"""

from __future__ import annotations

import ctypes
import itertools
import shutil
import struct

import numpy as np
import pytest
import torch

from portkit.errors import OpDefinitionError
from portkit.launch.kernel_set import KernelSet, LaunchTarget
from portkit.runtime.autograd_function import Binding, OpLayout
from portkit.runtime.registration import OpCallable, register
from portkit.runtime.replaying import ReplayingLauncher
from portkit.runtime.steps import ReplayLaunch
from tests.launch.test_replay import c_launch as scale_launch

LAYOUT = OpLayout(("Tensor",), 1, (("input", 0),), (True,), True)
TARGETS: dict[int, Target] = {}
CALLS = {"forward": 0, "backward": 0}  # how often each launcher's Python ran
_names = itertools.count()


def doubles(pointer: int, n: int) -> np.ndarray:
    return np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_double)), (n,))


class Target(LaunchTarget):
    """``mul(a, b, out, n)``: out = a * b; ``scale(a, out, n, factor)``: out = a * factor."""

    has_plain_launch = has_replay_step = True

    def __init__(self, kind: str) -> None:
        self.kind, self.launches = kind, 0
        self.handle = len(TARGETS) + 1
        TARGETS[self.handle] = self

    def run(self, values) -> None:
        self.launches += 1
        if self.kind == "mul":
            a, b, out, n = values
            doubles(out, n)[:] = doubles(a, n) * doubles(b, n)
        else:
            a, out, n, factor = values
            doubles(out, n)[:] = doubles(a, n) * factor

    def launch(self, config, args) -> None:
        self.run([a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args])

    def plain_launch(self, config):
        def launch(args) -> bool:
            self.launch(config, args)
            return True

        return launch

    def replay_step(self, config, args) -> ReplayLaunch:
        tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        values = tuple(None if i in tensors else a for i, a in enumerate(args))
        return ReplayLaunch(
            self, config.grid, config.block, 0, 0, values, tuple((i, i) for i in tensors)
        )

    def packed(self, values) -> bytes:  # the compiled replayer's parameter block
        return struct.pack("=QQQq" if self.kind == "mul" else "=QQqd", *values)


@type(scale_launch)  # cuLaunchKernel's signature, as test_replay.py's
def c_launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra) -> int:
    target = TARGETS[function]
    slots = [ctypes.cast(params[i], ctypes.POINTER(ctypes.c_uint64))[0] for i in range(4)]
    if target.kind == "scale":
        slots[3] = ctypes.cast(params[3], ctypes.POINTER(ctypes.c_double))[0]
    target.run(slots)
    return 0


def forward(k, x):
    CALLS["forward"] += 1
    out = k.empty_like(x)
    k.mul[1, 32](x, x, out, x.numel())
    return out, (x,)


def backward(k, saved, g):
    CALLS["backward"] += 1
    (x,) = saved
    product = k.empty_like(g)
    k.mul[1, 32](g, x, product, g.numel())
    grad = k.empty_like(g)
    k.scale[1, 32](product, grad, g.numel(), 2.0)
    return (grad,)


def make_op(mode: str, backward_launcher=backward, check=None) -> OpCallable:
    """``square`` as portkit.load builds it: "compiled" replays both directions with the
    compiled replayer (built against this CPU torch), "off" runs the launchers in the
    Python ``autograd.Function``. ``check``: the op's input check (none by default)."""
    k = KernelSet("square", "fake", "cpu", {"mul": Target("mul"), "scale": Target("scale")})
    qualname = f"pkreplaygrad::square{next(_names)}"
    if mode == "off":
        binding = Binding(forward, backward_launcher, k, check or _no_check, OpDefinitionError)
        return OpCallable(register(qualname, LAYOUT, ["mul", "scale"], binding), binding)
    if not (shutil.which("ninja") and shutil.which("c++")):
        pytest.skip("no ninja or C++ compiler here to build the compiled replayer")
    from portkit.runtime.eager_replay import ReplayedOpCallable
    from portkit.runtime.native_replayer import NativeReplayer, _built, compiled_module

    module = compiled_module()
    assert module is not None, _built.get("reason")
    address = ctypes.cast(c_launch, ctypes.c_void_p).value

    def replayer() -> NativeReplayer:
        return NativeReplayer(module, address, 0, 16)

    fwd = ReplayingLauncher(forward, k, replayer(), True, check, 1, LAYOUT.saved)
    bwd = ReplayingLauncher(backward_launcher, k, replayer(), False)
    binding = Binding(fwd, bwd, k, lambda a: None, OpDefinitionError)
    registered = register(qualname, LAYOUT, ["mul", "scale"], binding)
    return ReplayedOpCallable(registered, binding, fwd.run_eager)


def _no_check(inputs) -> None:
    return None


def warm(f: OpCallable, n: int = 5) -> None:
    """Record both directions (a signature records on its first call here)."""
    x = torch.rand(n, dtype=torch.float64, requires_grad=True)
    f(x).sum().backward()


def fwd_bwd(f, x, g):
    x = x.detach().clone().requires_grad_()
    y = f(x)
    y.backward(g)
    return y.detach(), x.grad, y.grad_fn


def test_forward_and_backward_replay_through_the_native_node_as_the_python_path() -> None:
    native, python = make_op("compiled"), make_op("off")
    warm(native)
    calls = dict(CALLS)
    x, g = torch.rand(5, dtype=torch.float64), torch.rand(5, dtype=torch.float64)
    y, grad, node = fwd_bwd(native, x, g)
    assert CALLS == calls  # neither launcher's Python ran: both directions replayed
    y_py, grad_py, node_py = fwd_bwd(python, x, g)
    assert type(node).__name__ != type(node_py).__name__
    assert node.name().endswith("Backward") and "square" in node.name()
    assert torch.equal(y, y_py) and torch.equal(y, x * x)
    assert torch.equal(grad, grad_py) and torch.equal(grad, 2 * x * g)


def test_gradcheck_through_the_native_node() -> None:
    native = make_op("compiled")
    x = torch.rand(6, dtype=torch.float64, requires_grad=True)
    warm(native, 6)
    assert torch.autograd.gradcheck(native, (x,))
    assert native(x).grad_fn.name() == native(x).grad_fn.name()  # same node kind each call


def test_grads_accumulate_and_retain_graph_allows_a_second_backward() -> None:
    native = make_op("compiled")
    warm(native)
    x = torch.rand(5, dtype=torch.float64, requires_grad=True)
    y = native(x)
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    native(x).sum().backward()
    assert torch.equal(x.grad, 2 * x.detach() * 3)


@pytest.mark.parametrize("mode", ["compiled", "off"])
def test_a_second_backward_without_retain_graph_and_a_modified_input_are_refused(mode) -> None:
    f = make_op(mode)
    warm(f)
    x = torch.rand(5, dtype=torch.float64, requires_grad=True)
    y = f(x)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.sum().backward()
    leaf = torch.rand(5, dtype=torch.float64, requires_grad=True)
    x = leaf * 1.0
    y = f(x)
    x.add_(1)  # a saved input changed in place: the version check
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.parametrize("mode", ["compiled", "off"])
def test_double_backward_is_refused_as_once_differentiable_refuses_it(mode) -> None:
    f = make_op(mode)
    warm(f)
    x = torch.rand(5, dtype=torch.float64, requires_grad=True)
    g = torch.rand(5, dtype=torch.float64, requires_grad=True)
    (gx,) = torch.autograd.grad(f(x), x, g, create_graph=True)
    assert torch.equal(gx.detach(), 2 * x.detach() * g.detach())
    with pytest.raises(RuntimeError, match="differentiate twice"):
        gx.sum().backward()
    (gx,) = torch.autograd.grad(f(x).sum(), x, create_graph=True)  # a grad wanting none
    with pytest.raises(RuntimeError, match="does not require grad"):
        gx.sum().backward()


def test_a_backward_that_cannot_be_replayed_falls_back_to_the_python_backward() -> None:
    def viewing_backward(k, saved, g):
        return backward(k, saved, g.view(-1))  # a view: never recorded

    native = make_op("compiled", viewing_backward)
    warm(native)
    x, g = torch.rand(5, dtype=torch.float64), torch.rand(5, dtype=torch.float64)
    before = dict(CALLS)
    y, grad, node = fwd_bwd(native, x, g)
    assert CALLS == {"forward": before["forward"], "backward": before["backward"] + 1}
    assert node.name().endswith("Backward") and torch.equal(grad, 2 * x * g)
    assert "aten.view" in next(iter(native.binding.backward.unreplayable.values()))


@pytest.mark.parametrize("mode", ["compiled", "off"])
def test_a_backward_error_reaches_the_caller_as_the_python_path_raises_it(mode) -> None:
    def two_grads(k, saved, g):
        return backward(k, saved, g) * 2

    f = make_op(mode, two_grads)
    warm_x = torch.rand(5, dtype=torch.float64, requires_grad=True)
    for _ in range(2):  # the backward never replays: the error each time
        with pytest.raises(
            OpDefinitionError, match=r"backward returned 2 gradient\(s\), expected 1"
        ):
            f(warm_x).sum().backward()


def test_torch_ops_with_a_gradient_takes_the_native_node_in_plain_eager() -> None:
    native = make_op("compiled")
    warm(native)
    calls = dict(CALLS)
    x = torch.rand(5, dtype=torch.float64, requires_grad=True)
    y = native.op(x)
    assert y.grad_fn.name() == native(x).grad_fn.name()
    y.sum().backward()
    assert CALLS == calls
    assert torch.equal(x.grad, 2 * x.detach())
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        z = native.op(x)  # no mode here: still the node; the same gradient
    assert torch.equal(torch.autograd.grad(z.sum(), x)[0], 2 * x.detach())


def test_a_signature_not_recorded_yet_takes_the_python_function_then_the_node() -> None:
    native = make_op("compiled")
    x = torch.rand(5, dtype=torch.float64, requires_grad=True)
    first = native(x)  # not recorded yet: the Python Function runs (and records) it
    assert type(first.grad_fn).__name__ == type(make_op("off")(x).grad_fn).__name__
    second = native(x)
    assert second.grad_fn.name() == f"{native.registered.name}Backward"
    assert torch.equal(first, second)


def test_an_op_loaded_again_lets_its_old_kernels_go() -> None:
    """The compiled replayer keeps the backward's fallback, and the forward keeps the
    compiled replayer: a fallback holding the whole binding closed a cycle through C++,
    which the collector cannot see, so an op loaded again (an edited twin in a notebook)
    kept its old kernels, and their library, loaded for the process. An output whose
    graph is still alive keeps them, and its backward still runs."""
    import gc
    import weakref

    old = make_op("compiled")
    warm(old)
    x = torch.rand(5, dtype=torch.float64, requires_grad=True)
    kept = old(x)  # its node (and the old kernels) stay while its graph lives
    kernels = weakref.ref(old.binding.kernels)
    qualname = old.registered.qualname
    k = KernelSet("square", "fake", "cpu", {"mul": Target("mul"), "scale": Target("scale")})
    fresh = Binding(forward, backward, k, _no_check, OpDefinitionError)
    register(qualname, LAYOUT, ["mul", "scale"], fresh)  # loaded again: rebound
    del old
    gc.collect()
    assert kernels() is not None  # `kept`'s graph can still run the backward
    kept.sum().backward()
    assert torch.equal(x.grad, 2 * x.detach())
    del kept
    gc.collect()
    assert kernels() is None, "the old kernels are kept for the process"
