"""Probe: torch.compile's kernels against the twins' for the rows under 1.0 (H200).
Run plain with TORCH_LOGS=output_code to see inductor's code; under ncu for counters."""
import importlib.util
import sys

import torch

import portkit

CASES = {
    "softmax": ((1024, 32768), torch.float32),
    "softmax_warp": ((1024, 32768), torch.float32),
    "rmsnorm": ((16384, 4096), torch.bfloat16),
    "layernorm": ((16384, 4096), torch.bfloat16),
    "layernorm32": ((16384, 4096), torch.float32),
}


def reference(name):
    path = f"prototypes/{name}.py"
    spec = importlib.util.spec_from_file_location(f"probe_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reference


def inputs(name, shape, dtype):
    torch.manual_seed(0)
    x = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
    rest = []
    if name.startswith(("rmsnorm", "layernorm")):
        rest.append(torch.randn(shape[-1], device="cuda", dtype=dtype, requires_grad=True))
    if name.startswith("layernorm"):
        rest.append(torch.randn(shape[-1], device="cuda", dtype=dtype, requires_grad=True))
    return [x, *rest]


def main():
    names = sys.argv[1:] or list(CASES)
    for name in names:
        shape, dtype = CASES[name]
        op = name.rstrip("32")
        args = inputs(name, shape, dtype)
        dy = torch.randn(shape, device="cuda", dtype=dtype)
        impls = {"compile": torch.compile(reference(op), dynamic=False), "twin": portkit.load(op, "twin")}
        for impl, f in impls.items():
            for _ in range(3):
                y = f(*args)
                y = y[0] if isinstance(y, tuple) else y
                torch.autograd.grad(y, args, dy)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push(f"prof_{name}_{impl}")
            y = f(*args)
            y = y[0] if isinstance(y, tuple) else y
            torch.autograd.grad(y, args, dy)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
        print(name, "done", flush=True)


main()
