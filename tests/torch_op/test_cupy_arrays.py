"""``portkit.load(...)`` callables take CuPy arrays and return CuPy arrays (DLPack views,
CuPy's current stream); CuPy beside tensors is one-line ``InputError``. On a CPU, CuPy is
``tests/fake_cupy.py`` (a stand-in over host memory with CuPy's documented calls) and the
op runs in the simulator; with real CuPy and a GPU the twin runs on a CuPy stream."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import portkit
from portkit.errors import InputError
from portkit.runtime.registration import OpCallable
from portkit.torch_op import cupy_arrays
from tests import fake_cupy

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


def test_cupy_in_cupy_out(in_repo, monkeypatch: pytest.MonkeyPatch) -> None:
    cupy = fake_cupy.install(monkeypatch)
    x = np.linspace(-4, 4, 50, dtype=np.float32)
    y = portkit.load("sigmoid", "sim")(cupy.asarray(x))
    assert isinstance(y, cupy.ndarray)
    expected = torch.sigmoid(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(cupy.asnumpy(y), expected, rtol=1e-6, atol=1e-7)


def test_cupy_inputs_are_viewed_not_copied(in_repo, monkeypatch: pytest.MonkeyPatch) -> None:
    cupy = fake_cupy.install(monkeypatch)
    seen = []
    add = portkit.load("vector_add", "sim")
    real = add.binding.forward

    def spy(k, *tensors):  # what the op's launcher receives
        seen.extend(tensors)
        return real(k, *tensors)

    add.binding.forward = spy
    a = cupy.asarray(np.arange(33, dtype=np.float32))
    b = cupy.asarray(np.ones(33, np.float32))
    out = add(a, b)
    assert all(isinstance(t, torch.Tensor) for t in seen)
    assert seen[0].data_ptr() == a.__cuda_array_interface__["data"][0]
    assert cupy.asnumpy(out).tolist() == [i + 1.0 for i in range(33)]


def test_cupy_beside_a_tensor_is_one_line(in_repo, monkeypatch: pytest.MonkeyPatch) -> None:
    cupy = fake_cupy.install(monkeypatch)
    add = portkit.load("vector_add", "sim")
    with pytest.raises(InputError) as info:
        add(cupy.asarray(np.ones(4, np.float32)), torch.ones(4))
    assert str(info.value) == (
        "op vector_add_sim: inputs mix CuPy arrays with a torch.Tensor; pass CuPy arrays "
        "only (or tensors only)"
    )


def test_tensors_still_go_straight_through(in_repo, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cupy.install(monkeypatch)
    sigmoid = portkit.load("sigmoid", "sim")
    x = torch.linspace(-3, 3, 20, requires_grad=True)
    y = sigmoid(x)
    assert isinstance(y, torch.Tensor) and y.requires_grad
    # No wrapper: the callable is the op's own, and CuPy is asked about only on the slow
    # path (an input that is neither a tensor nor a scalar).
    assert isinstance(sigmoid, OpCallable)
    asked = []
    monkeypatch.setattr(cupy_arrays, "_is_cupy", lambda value: asked.append(value) or False)
    sigmoid(x)
    portkit.load("vector_add", "sim")(x.detach(), x.detach())
    assert asked == []


@pytest.mark.gpu
def test_real_cupy_on_a_cupy_stream_with_the_twin(in_repo) -> None:
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed (the GPU machine has it)")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to PyTorch")
    sigmoid = portkit.load("sigmoid", "twin")
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        x = cupy.linspace(-4, 4, 1 << 20, dtype=cupy.float32)
        y = sigmoid(x)
        expected = 1 / (1 + cupy.exp(-x))
    stream.synchronize()
    assert isinstance(y, cupy.ndarray) and y.dtype == cupy.float32
    cupy.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(InputError, match="inputs mix CuPy arrays with a torch.Tensor"):
        portkit.load("vector_add", "twin")(x, torch.ones(1 << 20, device="cuda"))
