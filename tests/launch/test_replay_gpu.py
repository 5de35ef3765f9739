"""Replay (runtime/replaying.py) on a GPU, for every op with a twin and every case that
is not `large`:
calls replayed by the compiled replayer and by the Python one give what the launcher
itself gives, forward and backward, call after call; the launchers that do other
PyTorch work are the ones left to run every call, and say why.

Marked ``gpu``; they skip, saying why, where PyTorch sees no GPU.
"""

from __future__ import annotations

import inspect
from functools import cache
from pathlib import Path

import pytest
import torch

from portkit.backends import create
from portkit.project.cases import make_grad_outputs, make_inputs
from portkit.project.config import load_config
from portkit.project.discovery import discover
from portkit.project.environment import Settings
from portkit.torch_op.load import registered_callable

REPO = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to PyTorch"),
]

CATALOG = discover(load_config(REPO))
OP_CASES = [
    pytest.param(name, case, id=f"{name}-{case.name}")
    for name, op in sorted(CATALOG.ops.items())
    if op.has_twin
    for case in op.definition.cases
    if not case.large
]
# (op, launcher[, case]) -> what its launcher does that a replay would not repeat.
NOT_REPLAYED = {
    ("matmul", "forward", "float32-2x0x3"): "aten.zero_",  # an empty K: zeros, no launch
    ("cumsum", "backward"): "aten.flip",
    ("histogram", "forward"): "aten.zeros",
    ("matmul", "backward"): "aten.t",
}
SWITCH = "PORTKIT_REPLAY"  # read by the Session that portkit.load builds
REPLAYERS = {"": "NativeReplayer", "python": "PreparedReplayer"}


@cache
def twin_kernels(name: str):
    config = load_config(REPO)
    return create("twin", config).kernels(CATALOG.get(name))


def same(actual, expected) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor)
        torch.testing.assert_close(actual, expected, equal_nan=True)
    elif expected is None:
        assert actual is None
    else:
        assert type(actual) is type(expected) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            same(a, e)


def check_replayed(launcher, op: str, which: str, mode: str, case: str) -> None:
    reason = NOT_REPLAYED.get((op, which, case), NOT_REPLAYED.get((op, which)))
    if reason is None:
        assert not launcher.unreplayable, launcher.unreplayable
        assert type(launcher.replayer).__name__ == REPLAYERS[mode]
        assert len(launcher.replayer) == 1
        assert launcher.recorded == 1  # the later calls were replayed
    else:
        (why,) = launcher.unreplayable.values()
        assert reason in why


@pytest.mark.parametrize("mode", sorted(REPLAYERS))
@pytest.mark.parametrize("name, case", OP_CASES)
def test_replayed_calls_match_the_launcher(
    name: str, case, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay = Settings.from_environment({SWITCH: mode}).replay
    op = CATALOG.get(name)
    kernels = twin_kernels(name)
    inputs = make_inputs(case, "cuda") + list(case.extra)
    f = registered_callable(op, kernels, f"replaytest{mode}", define_now=False, replay=replay)
    expected_outputs, expected_saved = op.definition.forward(kernels, *inputs)
    for _ in range(3):
        outputs, saved = f.binding.forward(kernels, *inputs)
        same(outputs, expected_outputs)
        same(saved, expected_saved)
    check_replayed(f.binding.forward, name, "forward", mode, case.name)
    if op.definition.backward is None:
        return
    outputs = expected_outputs if isinstance(expected_outputs, tuple) else (expected_outputs,)
    grads = make_grad_outputs(case, outputs)
    saved = tuple(expected_saved)
    expected = op.definition.backward(kernels, saved, *grads)
    for _ in range(3):
        same(f.binding.backward(kernels, saved, *grads), expected)
    check_replayed(f.binding.backward, name, "backward", mode, case.name)


def test_a_replayed_op_trains_like_the_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through portkit.load's callable: autograd, replayed forward and backward."""
    monkeypatch.chdir(REPO)
    import portkit

    results = {}
    for mode in ("0", "", "python"):
        monkeypatch.setenv(SWITCH, mode)
        softmax = portkit.load("softmax", "twin")
        torch.manual_seed(0)
        x = torch.randn(64, 300, device="cuda").requires_grad_()
        for _ in range(3):
            x.grad = None
            y = softmax(x)
            y.backward(torch.ones_like(y) * torch.arange(300, device="cuda"))
        results[mode] = (y.detach(), x.grad)
    for mode in ("", "python"):
        same(results[mode], results["0"])


def test_wrong_inputs_after_replayed_calls_get_the_same_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)
    import portkit

    x = torch.randn(1000, device="cuda")
    wrong = {
        "int32": (x.int(),),
        "not contiguous": (torch.randn(1000, 2, device="cuda")[:, 0],),
        "on the CPU": (x.cpu(),),
        "two inputs": (x, x),
    }
    messages = {}
    for mode in ("0", "", "python"):
        monkeypatch.setenv(SWITCH, mode)
        sigmoid = portkit.load("sigmoid", "twin")
        for _ in range(3):
            sigmoid(x)
        for name, args in wrong.items():
            with pytest.raises(Exception) as caught:
                sigmoid(*args)
            messages[mode, name] = (type(caught.value), str(caught.value))
    for name in wrong:
        assert messages["", name] == messages["0", name] == messages["python", name]


def test_portkit_load_replays_plain_eager_calls_in_one_compiled_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)
    from torch.utils.flop_counter import FlopCounterMode

    import portkit

    kinds = {}
    for mode in ("", "python", "0"):
        monkeypatch.setenv(SWITCH, mode)
        # portkit.load wraps the op so it also takes CuPy arrays; inside is the replayer
        kinds[mode] = type(inspect.unwrap(portkit.load("sigmoid", "twin"))).__name__
    assert kinds == {"": "ReplayedOpCallable", "python": "ReplayedOp", "0": "OpCallable"}
    monkeypatch.setenv(SWITCH, "")
    sigmoid = portkit.load("sigmoid", "twin")
    x = torch.randn(1000, device="cuda")
    expected = torch.sigmoid(x)
    for _ in range(3):
        torch.testing.assert_close(sigmoid(x), expected)
    # The first call builds the twin's plan on the checked path; the second is recorded.
    assert sigmoid.binding.forward.recorded == 2
    with FlopCounterMode(display=False):  # a dispatch mode: through the registered op
        torch.testing.assert_close(sigmoid(x), expected)
    with torch.no_grad():
        torch.testing.assert_close(sigmoid(x.clone().requires_grad_()), expected)
    assert sigmoid.binding.forward.recorded == 2
