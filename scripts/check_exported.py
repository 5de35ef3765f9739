"""Run an exported package's ops on a GPU and compare them with portkit's twin.

    python check_exported.py run PACKAGE OUT.pt     # in the package's venv: portkit and
                                                    # numba are blocked from importing
    python check_exported.py compare OUT.pt         # with portkit: the twin, same inputs

``run`` checks each op and dtype with ``torch.library.opcheck`` and CUDA graph replay
against eager, each op's float32 with torch.compile(fullgraph=True) against eager, and
saves outputs and gradients.
``compare`` runs ``portkit.load(op, "twin")`` on the same inputs and prints the largest
difference per op (the same NVRTC and options build both, so 0 is expected).
"""

from __future__ import annotations

import importlib
import importlib.abc
import json
import sys

SHAPES = {
    "sigmoid": [(4097,)],
    "elementwise_mul": [(4097,), (4097,)],
    "vector_add": [(4097,), (4097,)],
    "softmax": [(64, 1000)],
    "softmax_warp": [(64, 1000)],
    "rmsnorm": [(64, 1000), (1000,)],
    "layernorm": [(64, 1000), (1000,), (1000,)],
}
DTYPES = ("float32", "float64")
# Ops whose point is half precision: every dtype they take.
OP_DTYPES = {
    "rmsnorm": ("bfloat16", "float16", "float32"),
    "layernorm": ("float32", "float16", "bfloat16", "float64"),
}


class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("portkit", "numba"):
            raise ImportError(f"blocked in the exported package's process: {name}")


def inputs(name: str, dtype: str):
    import torch

    generator = torch.Generator().manual_seed(7)
    return [
        torch.randn(s, generator=generator, dtype=getattr(torch, dtype)).cuda()
        for s in SHAPES[name]
    ]


def forward_backward(f, xs):
    import torch

    xs = [x.clone().requires_grad_() for x in xs]
    out = f(*xs)
    grads = []
    if out.requires_grad:
        out.backward(torch.ones_like(out) * 0.5)
        grads = [x.grad for x in xs]
    return out.detach(), grads


def run(package: str, target: str) -> int:
    sys.meta_path.insert(0, _Block())
    import torch

    module = importlib.import_module(package)
    results, report = {}, {}
    for name in SHAPES:
        if not hasattr(module, name):
            continue
        f = getattr(module, name)
        for dtype in OP_DTYPES.get(name, DTYPES):
            xs = inputs(name, dtype)
            key = f"{name}/{dtype}"
            out, grads = forward_backward(f, xs)
            results[key] = {"out": out.cpu(), "grads": [g.cpu() for g in grads]}
            checks = torch.library.opcheck(f.op, [x.clone().requires_grad_() for x in xs])
            ok = set(checks.values()) == {"SUCCESS"}
            compile_ok = True
            if dtype == "float32":  # one inductor compile per op keeps the run short
                torch._dynamo.reset()
                compiled = torch.compile(lambda *a, f=f: f(*a) * 2, fullgraph=True)
                compile_ok = torch.equal(compiled(*xs), f(*xs) * 2)
            static = [x.clone() for x in xs]
            f(*static)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                captured = f(*static)
            for s in static:
                s.mul_(0.5)
            graph.replay()
            torch.cuda.synchronize()
            graph_ok = torch.equal(captured, f(*static))
            report[key] = {"opcheck": ok, "compile": compile_ok, "cudagraph": graph_ok}
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("portkit", "numba"))
    torch.save(results, target)
    print(json.dumps({"package": module.__file__, "loaded": loaded, "checks": report}))
    return 0 if all(all(v.values()) for v in report.values()) and not loaded else 1


def compare(target: str) -> int:
    import torch

    import portkit

    saved = torch.load(target)
    worst = 0.0
    for key, expected in saved.items():
        name, dtype = key.split("/")
        out, grads = forward_backward(portkit.load(name, "twin"), inputs(name, dtype))
        diffs = [(out.cpu() - expected["out"]).abs().max().item()]
        diffs += [(g.cpu() - e).abs().max().item() for g, e in zip(grads, expected["grads"])]
        worst = max(worst, *diffs)
        print(f"{key:24} max |exported - twin| = {max(diffs):.3g}")
    print(f"exported vs twin: largest difference {worst:.3g}")
    return 0 if worst == 0 else 1


if __name__ == "__main__":
    if sys.argv[1] == "run":
        sys.exit(run(sys.argv[2], sys.argv[3]))
    sys.exit(compare(sys.argv[2]))
