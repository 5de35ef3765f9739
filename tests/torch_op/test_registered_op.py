"""Each implementation ``portkit.load`` returns is a registered PyTorch op: it is
defined under the project's namespace, ``torch.library.opcheck`` passes, torch.compile
traces it with ``fullgraph=True`` through the fake kernel derived from the launcher, and
the eager fast path and the registered op agree. On the CPU the ``sim`` backend (the
prototype in portkit's simulator) is the implementation; tests/torch_op/test_gpu.py runs
the same on the twin."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import portkit
from portkit.errors import InputError, OpDefinitionError
from tests.torch_op.checks import opcheck

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


def small(shape, dtype=torch.float64, requires_grad=True, seed=0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, dtype=dtype, generator=generator).requires_grad_(requires_grad)


def test_registered_under_project_namespace(make_project, sources, monkeypatch) -> None:
    py = sources.unary_op("ns_double", backward="dx[i] = dy[i] * 2.0")
    root = make_project(
        {"ns_double": (py, None)},
        portkit_table='cache-dir = ".cache"\nnamespace = "mylib"\n',
    )
    monkeypatch.chdir(root)
    f = portkit.load("ns_double", "sim")
    x = small((33,))
    expected = x.detach() * 2
    torch.testing.assert_close(f(x), expected)  # eager fast path
    torch.testing.assert_close(torch.ops.mylib.ns_double_sim(x), expected)  # the op itself
    assert torch.ops.mylib.ns_double_sim.default._schema.name == "mylib::ns_double_sim"
    assert hasattr(torch.ops.mylib, "ns_double_sim_backward")


OPCHECK_INPUTS = {
    "sigmoid": lambda: (small((129,)),),
    "elementwise_mul": lambda: (small((129,)), small((129,), seed=1)),
    "vector_add": lambda: (small((129,), requires_grad=False), small((129,), seed=1)),
    "softmax": lambda: (small((3, 33)),),
}


@pytest.mark.parametrize("name", sorted(OPCHECK_INPUTS))
def test_opcheck_passes_on_the_simulated_prototype(repo, name: str) -> None:
    f = portkit.load(name, "sim")
    result = torch.library.opcheck(f.op, OPCHECK_INPUTS[name]())
    assert set(result.values()) == {"SUCCESS"}, result


@pytest.mark.parametrize(
    "name, case", [("sigmoid", "float64-special"), ("vector_add", "float32-special")]
)
def test_opcheck_on_cases_that_make_nan(repo, name: str, case: str) -> None:
    from portkit.project.cases import make_inputs

    f = portkit.load(name, "sim")
    op = f.registered
    inputs = make_inputs(repo_catalog().get(name).case(case), "cpu")
    if op.layout.has_backward:
        inputs = [t.requires_grad_() for t in inputs]
    assert torch.isnan(as_list(f(*inputs))[0]).any()  # the case this is about
    opcheck(f.op, inputs, nan=True)


def repo_catalog():
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    return discover(load_config(REPO))


def as_list(value) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def test_registered_op_and_eager_path_agree_with_gradients(repo) -> None:
    mul = portkit.load("elementwise_mul", "sim")
    a, b = small((40,)), small((40,), seed=3)
    out = mul(a, b)
    out.backward(torch.ones_like(out))
    eager = (out.detach(), a.grad.clone(), b.grad.clone())
    a.grad = b.grad = None
    out = torch.ops.portkit.elementwise_mul_sim(a, b)
    out.backward(torch.ones_like(out))
    torch.testing.assert_close((out.detach(), a.grad, b.grad), eager)
    torch.testing.assert_close(eager, (a.detach() * b.detach(), b.detach(), a.detach()))


def test_fake_kernel_comes_from_the_launcher(repo) -> None:
    """Under FakeTensorMode nothing launches (the simulator could not read a fake tensor),
    yet the output has the shape and dtype the launcher allocates."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    softmax = portkit.load("softmax", "sim")
    with FakeTensorMode():
        x = torch.empty(7, 300, dtype=torch.float32)
        y = softmax(x)
    assert (tuple(y.shape), y.dtype) == ((7, 300), torch.float32)


def test_compile_fullgraph_matches_eager_without_graph_break(repo) -> None:
    import torch._dynamo

    sigmoid = portkit.load("sigmoid", "sim")
    mul = portkit.load("elementwise_mul", "sim")
    add = portkit.load("vector_add", "sim")

    def model(x, y):
        return sigmoid(mul(x, y) * 2) + add(x.detach(), y.detach())

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    x, y = small((129,)), small((129,), seed=1)
    out = compiled(x, y)
    out.sum().backward()
    grads = (x.grad.clone(), y.grad.clone())
    x.grad = y.grad = None
    expected = model(x, y)
    expected.sum().backward()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(grads, (x.grad, y.grad))
    assert not torch._dynamo.utils.counters["graph_break"]


def test_user_errors_are_the_same_through_the_registered_op(repo) -> None:
    sigmoid = portkit.load("sigmoid", "sim")
    x = torch.ones(5, dtype=torch.int32)
    with pytest.raises(InputError, match="input 0 is int32, a dtype the op does not accept"):
        sigmoid(x)
    with pytest.raises(InputError, match="input 0 is int32, a dtype the op does not accept"):
        torch.ops.portkit.sigmoid_sim(x)
    # Under torch.compile the check runs in the fake kernel, at trace time; dynamo wraps
    # the error in its own, whose message quotes ours.
    softmax = portkit.load("softmax", "sim")
    with pytest.raises(Exception, match="softmax takes a 2-D tensor, got 1-D"):
        torch.compile(softmax, fullgraph=True, backend="aot_eager")(torch.ones(5))


def test_forward_saving_a_non_tensor_is_refused_at_registration(make_project, monkeypatch):
    py = (
        "import torch\nfrom numba import cuda\nimport portkit\n\n"
        "@cuda.jit\ndef keep_fwd(x, out, n):\n    i = cuda.grid(1)\n    if i < n:\n"
        "        out[i] = x[i]\n\n"
        "@portkit.op(reference=lambda x: x * 1, cases=[portkit.cases.custom('c', [(4,)])])\n"
        "class Keep:\n    def forward(k, x):\n        out = k.empty_like(x)\n"
        "        k.keep_fwd[1, 32](x, out, x.numel())\n        return out, (x.numel(),)\n\n"
        "    def backward(k, saved, dy):\n        return (dy,)\n"
    )
    root = make_project({"keep_save": (py, None)})
    monkeypatch.chdir(root)
    with pytest.raises(OpDefinitionError, match="forward saves a int .*saves tensors only"):
        portkit.load("keep_save", "sim")


def test_the_checker_defines_its_custom_ops_only_when_one_is_needed(
    make_project, sources, monkeypatch
) -> None:
    """``define_now=False`` (the checker): eager calls run without torch.library; the op
    is defined the first time it is asked for. ``portkit.load`` defines at once."""
    from portkit.backends import create
    from portkit.project.config import load_config
    from portkit.project.discovery import discover
    from portkit.torch_op.load import registered_callable

    py = sources.unary_op("lazy_double", backward="dx[i] = dy[i] * 2.0")
    root = make_project(
        {"lazy_double": (py, None)},
        portkit_table='cache-dir = ".cache"\nnamespace = "lazyns"\n',
    )
    monkeypatch.chdir(root)
    config = load_config(root)
    op = discover(config).get("lazy_double")
    kernels = create("sim", config).kernels(op)
    f = registered_callable(op, kernels, "lazyns", define_now=False)
    x = small((33,))
    torch.testing.assert_close(f(x), x.detach() * 2)
    assert not f.registered.defined and not hasattr(torch.ops.lazyns, "lazy_double_sim")
    assert f.op._schema.name == "lazyns::lazy_double_sim"  # asking defines it
    assert f.registered.defined
    torch.testing.assert_close(torch.ops.lazyns.lazy_double_sim(x), x.detach() * 2)
