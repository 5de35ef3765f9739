"""rmsnorm's weight gradient at a GPU-sized shape, the twin's sums emulated on the CPU
against float64, beside the measured control's bound (checking/control.py).

    PYTHONPATH=$PWD python scripts/emulate_weight_gradient.py [--rows 16384] [--cols 4096]
        [--dtype float32|bfloat16]

The twin's backward (cuda_src/rmsnorm.cu) gives each block of a persistent grid the rows
b, b + grid, ...; each thread sums its columns' terms dy * (x * rstd), float32 products,
in float32 over those rows, and the partial rows are summed per column in float64. This
emulates that with torch for grids of 132, 264 and 528 blocks (512, 1024 and 2048
threads per SM on 132 SMs) on the case's inputs drawn as `portkit check` draws them
(seed 0, upstream gradients seed 10,007), and prints each grid's largest error against
float64 and its margin under the control: the error over 5x torch's largest float32
error + 2 ULP (1 is the bound). The case is GPU-sized, so no CPU row of `portkit check`
runs it; docs/seeds.md records the figures.
"""

from __future__ import annotations

import argparse

EPS = 1e-6  # prototypes/rmsnorm.py's


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    args = parser.parse_args()
    import torch

    rows, cols, dtype = args.rows, args.cols, getattr(torch, args.dtype)
    drawing = torch.Generator().manual_seed(0)
    x = torch.randn((rows, cols), dtype=dtype, generator=drawing)
    w = torch.randn((cols,), dtype=dtype, generator=drawing)
    upstream = torch.Generator().manual_seed(10_007)
    dy = torch.randn((rows, cols), dtype=dtype, generator=upstream)
    ulp = torch.finfo(dtype).eps  # the spacing at 1: an ULP relative to |exact|
    x, w, dy = x.float(), w.float(), dy.float()  # the kernels' arithmetic

    x64, dy64 = x.double(), dy.double()
    exact = (dy64 * x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + EPS)).sum(0)
    leaf, weight = x.clone().requires_grad_(), w.clone().requires_grad_()
    y = leaf * torch.rsqrt(leaf.pow(2).mean(-1, keepdim=True) + EPS) * weight
    (torch_dw,) = torch.autograd.grad(y, [weight], dy)  # torch's float32 reference
    torch_error = (torch_dw.to(dtype).double() - exact).abs().max()
    bound = 5 * torch_error + 2 * exact.abs() * ulp

    terms = dy * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))  # float32
    print(f"rmsnorm {args.dtype} {rows}x{cols}: torch's largest error {torch_error:.2e}")
    for grid in (132, 264, 528):
        sums = torch.zeros((grid, cols), dtype=torch.float32)
        for first in range(0, rows, grid):  # each block's next row, added in float32
            block_rows = terms[first : first + grid]
            sums[: block_rows.shape[0]] += block_rows
        dw = sums.double().sum(0).to(dtype)  # the partial rows in float64, one rounding
        error = (dw.double() - exact).abs()
        print(
            f"  grid {grid}: largest error {error.max():.2e}, "
            f"margin {(error / bound).max():.3f}"
        )


if __name__ == "__main__":
    main()
