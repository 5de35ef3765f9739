"""The twin as a registered op on a GPU: opcheck for every op and case, torch.compile
with ``fullgraph=True`` against eager, CUDA graph capture and replay against eager.

Marked ``gpu``; they skip, saying why, on a machine where PyTorch sees no GPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import portkit
from portkit.project.cases import make_grad_outputs, make_inputs
from portkit.project.config import load_config
from portkit.project.discovery import discover
from tests.torch_op.checks import makes_nan, opcheck

REPO = Path(__file__).resolve().parents[2]
NO_GPU = "no CUDA GPU visible to PyTorch: the twin runs on a GPU"

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_GPU),
]

CATALOG = discover(load_config(REPO))
OP_CASES = [
    pytest.param(name, case, id=f"{name}-{case.name}")
    for name, op in sorted(CATALOG.ops.items())
    if op.has_twin
    for case in op.definition.cases
]


@pytest.fixture
def repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


def case_inputs(op, case) -> list:
    inputs = make_inputs(case, "cuda")
    if op.definition.has_backward:
        inputs = [t.requires_grad_(t.dtype.is_floating_point) for t in inputs]
    return inputs + list(case.extra)


@pytest.mark.parametrize("name, case", OP_CASES)
def test_opcheck_twin(repo, name: str, case) -> None:
    op = CATALOG.get(name)
    f = portkit.load(name, "twin")
    opcheck(f.op, case_inputs(op, case), nan=makes_nan(case))


def _model():
    sigmoid = portkit.load("sigmoid", "twin")
    mul = portkit.load("elementwise_mul", "twin")
    softmax = portkit.load("softmax", "twin")

    def model(x, y):
        return softmax(sigmoid(mul(x, y)).reshape(8, -1) * 3)

    return model


def test_compile_fullgraph_matches_eager(repo) -> None:
    import torch._dynamo

    model = _model()
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(model, fullgraph=True)
    generator = torch.Generator().manual_seed(0)
    x, y = (torch.randn(8 * 300, generator=generator).cuda().requires_grad_() for _ in range(2))
    out = compiled(x, y)
    out.backward(torch.ones_like(out))
    grads = (x.grad.clone(), y.grad.clone())
    x.grad = y.grad = None
    expected = model(x, y)
    expected.backward(torch.ones_like(expected))
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(grads, (x.grad, y.grad))
    assert not torch._dynamo.utils.counters["graph_break"], torch._dynamo.utils.counters


@pytest.mark.parametrize("name", ["sigmoid", "elementwise_mul", "softmax", "softmax_warp"])
def test_cuda_graph_replay_matches_eager(repo, name: str) -> None:
    """Launches go on torch's current stream, so capture records them (a kernel launched
    on another stream would do nothing in the graph)."""
    op = CATALOG.get(name)
    f = portkit.load(name, "twin")
    case = next(c for c in op.definition.cases if c.numel > 100 and not c.gpu_only)
    static = [t.detach() for t in make_inputs(case, "cuda")]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        f(*static)  # warm up: plans and caches are built outside capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = f(*static)
    fresh = [t * 0.5 + 0.25 for t in static]
    for s, t in zip(static, fresh):
        s.copy_(t)
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(captured, f(*fresh))
    if op.definition.has_backward:
        registered = f.registered
        saved_and_grads = _backward_args(op, f, static, case)
        with torch.cuda.graph(graph := torch.cuda.CUDAGraph()):
            grads = registered.backward_op(*saved_and_grads)
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(grads, registered.backward_op(*saved_and_grads))


def _backward_args(op, f, inputs, case) -> list:
    """Saved tensors and upstream gradients as the registered backward op takes them."""
    result = as_list(f.registered.forward_op(*inputs))
    outputs = result[: f.outputs]
    extras = result[f.outputs :]
    saved = []
    for kind, index in f.registered.layout.saved:
        saved.append({"input": inputs, "output": outputs, "extra": extras}[kind][index])
    return saved + make_grad_outputs(case, outputs)


def as_list(value) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def test_eager_fast_path_equals_registered_op(repo) -> None:
    f = portkit.load("elementwise_mul", "twin")
    a, b = (torch.randn(1000, device="cuda", requires_grad=True) for _ in range(2))
    eager = f(a, b)
    eager.backward(torch.ones_like(eager))
    expected = (eager.detach(), a.grad.clone(), b.grad.clone())
    a.grad = b.grad = None
    out = torch.ops.portkit.elementwise_mul_twin(a, b)
    out.backward(torch.ones_like(out))
    torch.testing.assert_close((out.detach(), a.grad, b.grad), expected, rtol=0, atol=0)


def test_torch_ops_replays_through_the_cpp_cuda_kernels(repo) -> None:
    """portkit.load's compiled replayer registers C++ kernels at CUDA and AutogradCUDA:
    a recorded signature through torch.ops replays there (forward, with a gradient through
    the replayer's node, and inside a CUDA graph) with portkit.load's own values."""
    from portkit.runtime.registration import _NATIVE

    f = portkit.load("sigmoid", "twin")
    qualname = f.registered.qualname
    if qualname not in _NATIVE:
        pytest.skip("the compiled replayer is not used here (see portkit's stderr line)")
    dump = torch._C._dispatch_dump(qualname)
    assert "native.cpp" in dump.split("CUDA: registered")[1].splitlines()[0]
    x = torch.randn(1024, device="cuda")
    for _ in range(3):  # the twin's first launch builds its plan; then it records
        f.op(x), f.op(x.clone().requires_grad_()).sum().backward()
    before = _NATIVE[qualname].counts()
    torch.testing.assert_close(f.op(x), f(x), rtol=0, atol=0)
    xg = x.clone().requires_grad_()
    y = f.op(xg)
    y.sum().backward()
    after = _NATIVE[qualname].counts()
    assert after["replayed"] == before["replayed"] + 1 and after["nodes"] == before["nodes"] + 1
    xp = x.clone().requires_grad_()
    f(xp).sum().backward()
    torch.testing.assert_close(xg.grad, xp.grad, rtol=0, atol=0)
    graph = torch.cuda.CUDAGraph()
    f.op(x)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        captured = f.op(x)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.testing.assert_close(captured, f(x), rtol=0, atol=0)
    assert _NATIVE[qualname].counts()["replayed"] >= after["replayed"] + 2
