"""Launch the softmax twins at 1024x32768 (and 4096x4096) for ncu (`scripts/gpu.sh bench`).

    ncu --kernel-name regex:softmax python scripts/ncu_softmax.py
"""

from __future__ import annotations


def main() -> None:
    import torch

    import portkit

    for name in ("softmax", "softmax_warp"):
        f = portkit.load(name, "twin")
        for shape in ((1024, 32768), (4096, 4096)):
            x = torch.randn(shape, device="cuda", requires_grad=True)
            for _ in range(2):
                y = f(x)
                y.backward(torch.randn_like(y))
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
