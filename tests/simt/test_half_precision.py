"""float16 and bfloat16 in portkit's simulator: numba's typing and rounding.

float16 arrays are NumPy float16 (numba types f16 * f16 as f16, f16 + f32 as f32, as
NumPy does); bfloat16 arrays hold their bits and read as ``BFloat16`` scalars, which
round to nearest even after each operation and on a store."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from numba import cuda, float32
from numba.cuda import bf16

from portkit.backends.sim import host_array
from portkit.launch.kernel_set import LaunchConfig
from portkit.simt.machine import Machine
from portkit.simt.scalars import BFloat16, bfloat16_store


def run(kernel, *args, threads: int = 64) -> None:
    host = [host_array(a) if isinstance(a, torch.Tensor) else a for a in args]
    Machine(None, None).launch(
        kernel.__name__, kernel, LaunchConfig((1, 1, 1), (threads, 1, 1)), host
    )


@cuda.jit
def scale_in_float32(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = float32(x[i]) * float32(3.0)


@cuda.jit
def square_in_storage_type(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] * x[i]


@cuda.jit
def explicit_bf16(x, out, n):
    i = cuda.grid(1)
    if i < n:
        b = bf16.float32_to_bfloat16_rn(float32(x[i]) + float32(1.0))
        out[i] = bf16.hmul(b, x[i])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_float32_arithmetic_rounds_once_at_the_store(dtype):
    x = torch.randn(50, generator=torch.Generator().manual_seed(1)).to(dtype)
    out = torch.zeros_like(x)
    run(scale_in_float32, x, out, 50)
    assert torch.equal(out, (x.float() * 3).to(dtype))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_storage_type_arithmetic_rounds_each_operation(dtype):
    # f16 * f16 is f16 in numba (and bf16 * bf16 is bf16): the product is rounded to the
    # storage type, which is the float32 product rounded once (it is exact in float32).
    x = torch.randn(50, generator=torch.Generator().manual_seed(2)).to(dtype)
    out = torch.zeros_like(x)
    run(square_in_storage_type, x, out, 50)
    assert torch.equal(out, (x.float() * x.float()).to(dtype))


def test_numba_cuda_bf16_functions_are_simulated():
    x = torch.randn(40, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    out = torch.zeros_like(x)
    run(explicit_bf16, x, out, 40)
    expected = ((x.float() + 1).to(torch.bfloat16).float() * x.float()).to(torch.bfloat16)
    assert torch.equal(out, expected)


@pytest.mark.parametrize(
    "value", [0.0, -0.0, 1.0, 1.00390625, 1.005859375, 3.4e38, -1e-40, math.inf, -math.inf]
)
def test_bfloat16_rounding_matches_torch(value):
    expected = torch.tensor([value], dtype=torch.float32).to(torch.bfloat16)
    assert bfloat16_store(np.float32(value)) == int(expected.view(torch.int16)) & 0xFFFF


def test_bfloat16_nan_stays_nan():
    assert math.isnan(float(BFloat16(np.float32("nan"))))


def test_half_precision_typing_is_numbas():
    # numba: f16 * f16 -> f16, f16 + f32 -> f32, f16 * 2.0 (a float64 literal) -> f64.
    h = np.float16(1.5)
    assert type(h * h) is np.float16
    assert type(h + np.float32(1)) is np.float32
    assert type(h * np.float64(2.0)) is np.float64
    b = BFloat16(1.5)
    assert isinstance(b * b, BFloat16)
    assert type(b + np.float32(1)) is np.float32


def test_unsimulated_bf16_function_is_named():
    from portkit.simt.scalars import SIMULATED_BF16

    with pytest.raises(AttributeError, match="numba.cuda.bf16.hcos is not simulated"):
        SIMULATED_BF16.hcos  # noqa: B018
