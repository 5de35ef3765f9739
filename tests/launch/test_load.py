"""`portkit.load`: an op as a differentiable function a model can call."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import portkit
from portkit.errors import BackendUnavailable

REPO = Path(__file__).resolve().parents[2]


def test_load_sim_sigmoid_matches_torch_with_gradient(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    sigmoid = portkit.load("sigmoid", "sim")
    x = torch.linspace(-5, 5, 40, dtype=torch.float64, requires_grad=True)
    y = sigmoid(x)
    y.sum().backward()  # the upstream gradient is an expanded, non-contiguous tensor
    torch.testing.assert_close(y, torch.sigmoid(x.detach()))
    s = torch.sigmoid(x.detach())
    torch.testing.assert_close(x.grad, s * (1 - s))


def test_load_twin_without_gpu_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the twin is available")
    monkeypatch.chdir(REPO)
    with pytest.raises(BackendUnavailable, match="twin cannot run op sigmoid: no CUDA GPU"):
        portkit.load("sigmoid", "twin")
