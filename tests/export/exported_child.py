"""Run one op of an installed exported package on a GPU, in a process where portkit and
numba cannot import (tests/export/test_export_gpu.py starts it after
``package_env.BLOCK_PORTKIT_AND_NUMBA``).

    ... PACKAGE OP INPUTS.pt OUTPUTS.pt REPO

For every dtype in INPUTS.pt: outputs and gradients of a replayed call (saved to
OUTPUTS.pt, for the test to compare with portkit's twin), ``torch.library.opcheck``,
``torch.compile`` with ``fullgraph=True`` against eager and CUDA graph replay against
eager. Prints one JSON line: the package's file, the portkit/numba modules loaded (none
expected), the op's replayer and per dtype its replayed call's ``grad_fn``, and per
dtype and check, "ok" or the error.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable
from typing import Any

import torch


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _leaves(inputs: list, grad: bool) -> list:
    return [x.clone().requires_grad_(grad and x.dtype.is_floating_point) for x in inputs]


def _equal(actual: Any, expected: Any) -> None:
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


def _forward_backward(f: Callable, item: dict) -> dict:
    """Outputs and gradients of the third call: the first builds the kernels' plans, the
    second records, the third replays (where the op's calls can be recorded)."""
    for _ in range(3):
        leaves = _leaves(item["inputs"], item["grad"])
        outputs = _as_list(f(*leaves, *item["extra"]))
        grads: list = []
        if item["grad"]:
            pairs = [
                (o, g.cuda()) for o, g in zip(outputs, item["grad_outputs"]) if o.requires_grad
            ]
            torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
            grads = [x.grad.cpu() if x.grad is not None else None for x in leaves]
    node = outputs[0].grad_fn.name() if outputs[0].grad_fn is not None else None
    return {"outputs": [o.detach().cpu() for o in outputs], "grads": grads, "node": node}


def _compiled(f: Callable, item: dict) -> None:
    import torch._dynamo

    torch._dynamo.reset()
    compiled = torch.compile(lambda *a: f(*a), fullgraph=True)
    args = [*item["inputs"], *item["extra"]]
    _equal(_as_list(compiled(*args)), _as_list(f(*args)))


def _graph_replay(f: Callable, item: dict) -> None:
    static = [x.clone() for x in item["inputs"]]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        f(*static, *item["extra"])  # plans and images are built outside capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = _as_list(f(*static, *item["extra"]))
    fresh = [x * 0.5 if x.dtype.is_floating_point else x for x in item["inputs"]]
    for s, x in zip(static, fresh):
        s.copy_(x)
    graph.replay()
    torch.cuda.synchronize()
    _equal(captured, _as_list(f(*fresh, *item["extra"])))


def _outcome(check: Callable[[], Any]) -> str:
    try:
        check()
    except Exception as exc:  # the report names it; the test fails on anything but "ok"
        return f"{type(exc).__name__}: {exc}"[:2000]
    return "ok"


def main(package: str, op: str, inputs_path: str, outputs_path: str, repo: str) -> int:
    # tests.torch_op.checks: opcheck as portkit's own tests run it (first: no other `tests`)
    sys.path.insert(0, repo)
    from tests.torch_op.checks import opcheck

    module = importlib.import_module(package)
    f = getattr(module, op)
    results, report = {}, {}
    for dtype, item in torch.load(inputs_path).items():
        item = {**item, "inputs": [x.cuda() for x in item["inputs"]]}
        results[dtype] = _forward_backward(f, item)
        report[dtype] = {
            "opcheck": _outcome(
                lambda item=item: opcheck(
                    f.op, _leaves(item["inputs"], item["grad"]) + list(item["extra"]), item["nan"]
                )
            ),
            "compile": _outcome(lambda item=item: _compiled(f, item)),
            "cudagraph": _outcome(lambda item=item: _graph_replay(f, item)),
        }
    nodes = {dtype: result.pop("node") for dtype, result in results.items()}
    torch.save(results, outputs_path)
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("portkit", "numba"))
    replayer = type(getattr(f.binding.forward, "replayer", None)).__name__
    print(
        json.dumps(
            {
                "file": module.__file__,
                "loaded": loaded,
                "report": report,
                "replayer": replayer,  # NativeReplayer where native.cpp builds
                "nodes": nodes,  # per dtype, the replayed call's grad_fn
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[-5:]))  # after the script's path, run directly or by runpy
