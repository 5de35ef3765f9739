"""The same twin on the GPU (``twin``, NVRTC) and on the CPU (``twin-cpu``): how far apart
are their outputs and gradients, case by case? For docs/twin-cpu.md (math ULPs).

Run on a GPU machine from the repository root:
``PYTHONPATH=$PWD python scripts/compare_twin_cpu_gpu.py [--json FILE]``.
Inputs are made once on the CPU and copied to the GPU, so both sides see the same bits.
"""

from __future__ import annotations

import argparse
import json

import torch

from portkit.backends import create
from portkit.checking.compare import TWIN_TOLERANCE, elementwise_errors
from portkit.launch.op_inputs import as_tuple
from portkit.project.cases import make_grad_outputs, make_inputs
from portkit.project.config import load_config
from portkit.project.discovery import discover
from portkit.torch_op.load import registered_callable


def run(op, case, backend, inputs):
    k = backend.kernels(op)  # plain builds: the CPU twin as portkit.load runs it
    xs = [t.detach().to(backend.device).requires_grad_(t.dtype.is_floating_point) for t in inputs]
    fn = registered_callable(op, k, backend.config.namespace, define_now=False)
    outputs = as_tuple(fn(*xs, *case.extra))
    grads: tuple = ()
    if op.definition.has_backward:
        grad_out = [g.to(backend.device) for g in make_grad_outputs(case, outputs)]
        wanted = [t for t in xs if t.requires_grad]
        grads = torch.autograd.grad(outputs, wanted, grad_out, allow_unused=True)
    if backend.device == "cuda":
        torch.cuda.synchronize()
    return [t.detach().cpu() for t in (*outputs, *grads) if t is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--largest", type=int, default=1 << 22, help="skip bigger cases")
    args = parser.parse_args()
    config = load_config()
    gpu, cpu = create("twin", config), create("twin-cpu", config)
    for backend in (gpu, cpu):
        if backend.unavailable_reason:
            raise SystemExit(f"{backend.name} cannot run here: {backend.unavailable_reason}")
    rows = []
    print(
        f"{'op':<14} {'case':<20} {'tensor':<8} {'differ':>8} {'of':>9} {'max ULP':>8} {'>tol':>5}"
    )
    for op in discover(config).ops.values():
        if not op.has_twin:
            continue
        for case in op.definition.cases:
            inputs = make_inputs(case, "cpu")
            if sum(t.numel() for t in inputs) > args.largest:
                continue
            on_gpu, on_cpu = run(op, case, gpu, inputs), run(op, case, cpu, inputs)
            for index, (g, c) in enumerate(zip(on_gpu, on_cpu)):
                errors = elementwise_errors(c, g, TWIN_TOLERANCE[case.dtype])
                if not c.numel():
                    continue  # an empty output: nothing to compare
                same_bits = (c.view(torch.uint8) == g.view(torch.uint8)).reshape(c.numel(), -1)
                row = {
                    "op": op.name,
                    "case": case.name,
                    "tensor": index,
                    "differ": int((~same_bits.all(dim=1)).sum()) if c.numel() else 0,
                    "elements": c.numel(),
                    "max_ulp": int(errors.ulps.max()) if c.numel() else 0,
                    "outside_twin_tolerance": int(errors.bad.sum()),
                }
                rows.append(row)
                print(
                    f"{op.name:<14} {case.name:<20} {index:<8} {row['differ']:>8} "
                    f"{row['elements']:>9} {row['max_ulp']:>8} {row['outside_twin_tolerance']:>5}"
                )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)
    worst = max((r["max_ulp"] for r in rows), default=0)
    outside = sum(r["outside_twin_tolerance"] for r in rows)
    print(f"summary: {len(rows)} tensors, max ULP {worst}, {outside} outside the twin tolerance")


if __name__ == "__main__":
    main()
