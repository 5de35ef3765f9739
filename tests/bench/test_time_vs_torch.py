"""scripts/time_vs_torch.py on a CPU: it imports, says it needs a GPU (exit 2), refuses an
op outside the torch-comparison table, covers that table, and its torch calls compute what the
ops' references compute (the same eps), so its speed figures compare like with like."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "time_vs_torch.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("time_vs_torch", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_without_a_gpu_it_says_so_and_exits_2(script, capsys):
    assert script.main(["--reps", "3"]) == 2
    assert "needs a GPU" in capsys.readouterr().err


def test_an_op_outside_the_table_is_a_usage_error(script, capsys):
    with pytest.raises(SystemExit) as stop:
        script.main(["--op", "matmul"])
    assert stop.value.code == 2
    assert "'matmul' is not in the torch-comparison table" in capsys.readouterr().err


def test_it_times_issue_36s_table(script):
    lines = {(s.op, tuple(s.shapes[0]), s.dtype, s.backward) for s in script.specs()}
    n = 1 << 26
    want = {("sigmoid", (n,), "float32", True), ("vector_add", (n,), "float32", False)}
    want |= {("elementwise_mul", (n,), "float32", True)}
    for op in ("softmax", "softmax_warp"):
        want |= {(op, shape, "float32", True) for shape in script.SOFTMAX_SHAPES}
    for op in ("layernorm", "rmsnorm"):
        want |= {(op, (16384, 4096), dtype, True) for dtype in ("float32", "bfloat16")}
    assert lines == want
    assert set(script.SOFTMAX_SHAPES) == {
        (4096, 4096), (16384, 1024), (1024, 32768), (8192, 8192), (32768, 256)
    }  # fmt: skip


def test_its_torch_calls_match_the_ops_references(script):
    """On small inputs of each line's ranks: the torch call against the op's reference
    (run as the op's reference runs: float32 for bfloat16), within the op's tolerance.
    The inputs are small (1e-3): a mean square near the ops' eps, so a wrong eps shows."""
    from portkit.checking.op_contract import tolerance
    from portkit.project.cases import Case
    from portkit.project.session import Session

    session = Session.from_environment(REPO)
    generator = torch.Generator().manual_seed(1)
    for spec in script.specs():
        op = session.op(spec.op)
        shapes = tuple(tuple(min(d, 64) for d in shape) for shape in spec.shapes)
        dtype = getattr(torch, spec.dtype)
        inputs = [(torch.randn(s, generator=generator) * 1e-3).to(dtype) for s in shapes]
        got = script.as_tuple(spec.torch_call(*inputs))
        wide = [t.float() for t in inputs]
        want = [w.to(dtype) for w in script.as_tuple(op.definition.reference(*wide))]
        case = Case("small", shapes, spec.dtype)
        for i, (g, w) in enumerate(zip(got, want)):
            t = tolerance(op, case, False, i, "reference", g.dtype)
            torch.testing.assert_close(g, w, rtol=t.rtol, atol=t.atol, msg=spec.op)


def test_torch_compile_is_compiled_for_one_shape(script, monkeypatch):
    """--compile's torch.compile specialises on the line's shape (dynamo's default would
    recompile a second shape with symbolic sizes: slower kernels)."""
    seen = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: seen.append((fn, kw)) or fn)
    spec = script.specs()[0]
    assert script.compiled(spec) is spec.torch_call
    assert seen == [(spec.torch_call, {"dynamic": False})]


def test_best_is_the_twin_against_the_faster_torch(script):
    assert script.best_speed(10.0, None, 5.0) == 2.0  # eager only
    assert script.best_speed(10.0, 4.0, 5.0) == 0.8  # torch.compile faster than eager
    assert script.best_speed(4.0, 10.0, 5.0) == 0.8  # eager faster than torch.compile


def test_torch_compile_keeps_the_saved_buffers_its_repeated_backward_needs(script, monkeypatch):
    """The script times a backward again and again on one graph; AOTAutograd's donated
    buffers refuse that ("compiled with non-empty donated buffers", an H200 run)."""
    import torch._functorch.config as functorch_config

    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)
    with functorch_config.patch(donated_buffer=True):
        script.compiled(script.specs()[0])
        assert functorch_config.donated_buffer is False
