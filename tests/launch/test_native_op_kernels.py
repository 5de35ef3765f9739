"""The registered op's C++ kernels (native.cpp ``OpKernels``), on the CPU build: a call
through ``torch.ops`` reaches a C++ Autograd kernel (at AutogradCPU, in front of the
Python one) that redispatches below autograd, and a C++ backend kernel (at CPU) that
replays a recorded signature from the dispatcher's stack; everything else reaches the
Python kernels as before. Values, errors, opcheck, modes, functorch and torch.compile are
compared with the Python path; the kernels' counts and ``_dispatch_dump`` say which ran.

The op is test_replay_autograd.py's ``square`` (float64 kernels through raw pointers),
with an input check that refuses anything but float64.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from portkit.errors import InputError, OpDefinitionError
from portkit.launch.kernel_set import KernelSet
from portkit.runtime.autograd_function import Binding, OpLayout
from portkit.runtime.registration import _NATIVE, FakeKernels, OpCallable, register
from tests.launch.test_replay_autograd import CALLS, LAYOUT, Target, backward, forward
from tests.launch.test_replay_autograd import make_op as square


def check(inputs) -> None:
    if inputs[0].dtype != torch.float64:
        raise InputError(f"square takes float64, got {inputs[0].dtype}")


def make_op(mode: str) -> OpCallable:
    """test_replay_autograd's ``square`` with the check: "compiled" as portkit.load builds
    it with the compiled replayer (and so the C++ kernels), "off" the Python path."""
    return square(mode, check=check)


def counts(f: OpCallable) -> dict:
    return _NATIVE[f.registered.qualname].counts()


def warmed(n: int = 5) -> tuple[OpCallable, torch.Tensor]:
    """A compiled op whose float64 signature of ``n`` elements is recorded both ways."""
    f = make_op("compiled")
    x = torch.rand(n, dtype=torch.float64, requires_grad=True)
    f.op(x).sum().backward()  # a signature records on its first call here
    return f, x.detach()


def test_torch_ops_runs_the_cpp_kernels_and_gives_the_python_paths_values() -> None:
    f, x = warmed()
    dump = torch._C._dispatch_dump(f.registered.qualname)
    assert "CPU: registered at" in dump and "native.cpp" in dump.split("CPU: registered")[1]
    assert "AutogradCPU: registered at" in dump
    before, calls = counts(f), dict(CALLS)
    y = f.op(x)
    assert CALLS == calls  # the launcher's Python did not run
    after = counts(f)
    assert after["replayed"] == before["replayed"] + 1
    assert after["below_autograd"] == before["below_autograd"] + 1
    assert after["backend_python"] == before["backend_python"]
    assert torch.equal(y, make_op("off").op(x)) and torch.equal(y, x * x)
    assert y.data_ptr() != f.op(x).data_ptr()  # a buffer of its own per call
    with torch.no_grad():  # grad mode off: below autograd in C++ too
        assert torch.equal(f.op(x.clone().requires_grad_()), y)
    assert counts(f)["below_autograd"] == after["below_autograd"] + 2


def test_a_gradient_through_torch_ops_gets_the_node_from_the_cpp_autograd_kernel() -> None:
    f, x = warmed()
    before = counts(f)
    xg = x.clone().requires_grad_()
    y = f.op(xg)
    assert y.grad_fn.name() == f"{f.registered.name}Backward"
    assert counts(f)["nodes"] == before["nodes"] + 1
    g = torch.rand(5, dtype=torch.float64)
    y.backward(g)
    assert torch.equal(xg.grad, 2 * x * g)


def test_a_new_signature_and_bad_input_take_the_python_kernel_with_its_errors() -> None:
    f, python = make_op("compiled"), make_op("off")
    x = torch.rand(7, dtype=torch.float64)
    assert torch.equal(f.op(x), x * x)  # not recorded: the Python kernel records it
    assert counts(f)["backend_python"] == 1 and counts(f)["replayed"] == 0
    assert torch.equal(f.op(x), x * x) and counts(f)["replayed"] == 1
    bad = torch.rand(7, dtype=torch.float32)
    for op in (f.op, python.op, f.op):  # the same error before and after replays
        with pytest.raises(InputError, match=r"^square takes float64, got torch.float32$"):
            op(bad)
    assert counts(f)["backend_python"] == 3


def test_opcheck_passes_with_the_cpp_kernels() -> None:
    f, x = warmed()
    result = torch.library.opcheck(f.op, (x,))
    assert set(result.values()) == {"SUCCESS"}, result
    assert counts(f)["replayed"] > 0


class Seen(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_watched_calls_still_reach_modes_and_the_python_autograd_kernel() -> None:
    f, x = warmed()
    with Seen() as seen:
        y = f.op(x)
    name = f.registered.qualname.replace("::", ".")
    assert f"{name}.default" in seen.ops and torch.equal(y, x * x)
    before = counts(f)
    xg = x.clone().requires_grad_()
    with Seen():  # a gradient wanted under a mode: the Python kernel's autograd.Function
        y = f.op(xg)
    assert counts(f)["autograd_python"] == before["autograd_python"] + 1
    assert not y.grad_fn.name().endswith(f"{f.registered.name}Backward")
    y.sum().backward()
    assert torch.equal(xg.grad, 2 * x)
    x2 = torch.rand(3, 5, dtype=torch.float64)
    assert torch.equal(torch.vmap(f.op)(x2), x2 * x2)  # functorch's loop over slices
    python = make_op("off")
    errors = []
    for op in (f.op, python.op):  # functorch's grad refuses both paths alike
        with pytest.raises(NotImplementedError) as error:
            torch.func.grad(lambda t, op=op: op(t).sum())(x)
        errors.append(str(error.value))
    assert errors[0] == errors[1]


def test_compile_fullgraph_matches_eager_with_the_cpp_kernels() -> None:
    f, x = warmed()
    compiled = torch.compile(lambda t: f.op(t) * 2, fullgraph=True, backend="aot_eager")
    xg = x.clone().requires_grad_()
    out = compiled(xg)
    out.sum().backward()
    assert torch.equal(out.detach(), 2 * x * x) and torch.equal(xg.grad, 4 * x)


def test_binding_the_op_anew_deregisters_its_cpp_kernels() -> None:
    f, x = warmed()
    qualname = f.registered.qualname
    k = KernelSet("square", "fake", "cpu", {"mul": Target("mul"), "scale": Target("scale")})
    binding = Binding(forward, backward, k, check, OpDefinitionError)
    register(qualname, LAYOUT, ["mul", "scale"], binding)
    assert qualname not in _NATIVE and "native.cpp" not in torch._C._dispatch_dump(qualname)
    calls = dict(CALLS)
    op = getattr(torch.ops.pkreplaygrad, qualname.split("::")[1])
    assert torch.equal(op(x), x * x)
    assert CALLS["forward"] == calls["forward"] + 1  # the new binding's launcher ran


def test_redefining_the_op_deregisters_its_cpp_kernels() -> None:
    f, x = warmed()
    qualname = f.registered.qualname
    layout = OpLayout(("Tensor", "float"), 1, (("input", 0),), (True, False), True)

    def scaled(k, t, factor):
        return t * factor, (t,)

    k = FakeKernels("mul", "cpu", ["mul"])
    register(qualname, layout, ["mul"], Binding(scaled, None, k, check, OpDefinitionError))
    assert qualname not in _NATIVE and "native.cpp" not in torch._C._dispatch_dump(qualname)
    op = getattr(torch.ops.pkreplaygrad, qualname.split("::")[1])
    assert torch.equal(op(x, 3.0), x * 3.0)  # the new schema and launcher


def test_replays_on_threads_while_new_signatures_record_do_not_deadlock() -> None:
    """The backend kernel replays without the GIL under a shared lock while this CPU
    build's launch function (Python, through ctypes) takes the GIL; recording a new
    signature meanwhile takes the lock exclusively while holding the GIL."""
    import threading

    f, x = warmed()
    results: list[bool] = []

    def replay() -> None:
        results.append(all(torch.equal(f.op(x), x * x) for _ in range(200)))

    threads = [threading.Thread(target=replay, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    for n in range(6, 16):  # new signatures: recorded (each added under the lock)
        x_n = torch.rand(n, dtype=torch.float64)
        for _ in range(2):
            assert torch.equal(f.op(x_n), x_n * x_n)
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads) and results == [True, True]
    assert counts(f)["replayed"] >= 400
