"""Time each example twin against the torch call a user would otherwise write, apart from
`portkit bench`: a second opinion with its own timing loop.

For every op, shape and dtype of the torch-comparison table, forward and (where the op has one)
backward, per repetition and in an order that alternates: the L2 is flushed (a buffer of
twice its size is written), a spin kernel gives the host time to queue the call, then
CUDA events bracket one call of torch, of the twin (`portkit.load(op, "twin")`, its
autograd for the backward) and of a torch clone that moves the same bytes (the copy
bandwidth, measured in the same run). Medians of --reps (30). Printed per row: torch's
and the twin's median, speed = torch time / twin time (above 1: the twin is faster), and
each one's % of copy bandwidth (the clone's time over its time: 100% is the copy
roofline); the largest difference between the twin's forward outputs and torch's is
recorded too, so a fast but wrong twin shows. With --compile, torch.compile of the same
torch call is timed too (`dynamic=False`: compiled for each shape, as a user compiling for
it would get it) and "best" is the twin against the faster of torch and torch.compile.
Nothing here uses portkit.bench.

Run on a GPU machine from the repository root (portkit.load reads prototypes/ and
cuda_src/ there):

    PYTHONPATH=$PWD python scripts/time_vs_torch.py [--json out.json] [--op softmax ...]
        [--compile]

On a machine without a CUDA GPU it says so and exits 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

N = 1 << 26
SOFTMAX_SHAPES = ((4096, 4096), (16384, 1024), (1024, 32768), (8192, 8192), (32768, 256))
NORM_SHAPE = (16384, 4096)
LAYERNORM_EPS = 1e-5  # prototypes/layernorm.py's EPS (F.layer_norm's default)
RMSNORM_EPS = 1e-6  # prototypes/rmsnorm.py's EPS
SPIN_US = 1000.0  # the spin before each timed call (--spin-us): longer than a call's issue


@dataclass(frozen=True)
class Row:
    """The times of one op, shape, dtype and direction; speed = torch_us / twin_us."""

    op: str
    shapes: list
    dtype: str
    direction: str
    torch_us: float
    twin_us: float
    copy_us: float
    bytes: int
    speed: float
    torch_copy_pct: float
    twin_copy_pct: float
    max_abs_diff: float | None  # forward outputs, twin against torch; None for a backward
    uncovered: int  # timed calls whose host issue outlasted the spin (their times hold host)
    compile_us: float | None = None  # torch.compile of the torch call (--compile)
    best_speed: float | None = None  # min(torch_us, compile_us) / twin_us (--compile)


@dataclass(frozen=True)
class Spec:
    """One line of the torch-comparison table: the op, its torch call, its input shapes and dtype,
    and whether it has a backward."""

    op: str
    torch_call: Callable[..., Any]
    shapes: tuple[tuple[int, ...], ...]
    dtype: str
    backward: bool = True


def specs() -> list[Spec]:
    import torch
    import torch.nn.functional as F

    def softmax(x):
        return torch.softmax(x, dim=-1)

    def layer_norm(x, w, b):
        return F.layer_norm(x, (x.shape[-1],), w, b, LAYERNORM_EPS)

    def rms_norm(x, w):
        return F.rms_norm(x, (x.shape[-1],), w, RMSNORM_EPS)

    rows, cols = NORM_SHAPE
    out = [
        Spec("sigmoid", torch.sigmoid, ((N,),), "float32"),
        Spec("vector_add", torch.add, ((N,), (N,)), "float32", backward=False),
        Spec("elementwise_mul", torch.mul, ((N,), (N,)), "float32"),
    ]
    for name in ("softmax", "softmax_warp"):
        out += [Spec(name, softmax, (shape,), "float32") for shape in SOFTMAX_SHAPES]
    for dtype in ("float32", "bfloat16"):
        out.append(Spec("layernorm", layer_norm, ((rows, cols), (cols,), (cols,)), dtype))
    for dtype in ("float32", "bfloat16"):
        out.append(Spec("rmsnorm", rms_norm, ((rows, cols), (cols,)), dtype))
    return out


class Timer:
    """CUDA events around one call, after an L2 flush and a spin that covers the host."""

    def __init__(self, spin_us: float = SPIN_US) -> None:
        import torch

        self.spin_us = spin_us
        props = torch.cuda.get_device_properties(0)
        self.flush = torch.empty(2 * props.L2_cache_size // 4, dtype=torch.float32, device="cuda")
        self.cycles_per_us = self._calibrate()

    def _calibrate(self) -> float:
        import torch

        cycles = 10_000_000
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(cycles)  # warm
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        torch.cuda.synchronize()
        return cycles / (start.elapsed_time(end) * 1000)

    def time(self, call: Callable[[], Any]) -> tuple[Any, Any, bool]:
        """Queue one timed call; returns (start event, end event, whether the spin covered
        the host's time to issue it)."""
        import torch

        self.flush.fill_(1.0)
        torch.cuda._sleep(int(self.spin_us * self.cycles_per_us))
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        began = time.perf_counter()
        start.record()
        call()
        end.record()
        covered = (time.perf_counter() - began) * 1e6 < self.spin_us
        return start, end, covered


def compiled(spec: Spec) -> Callable[..., Any]:
    """torch.compile of the line's torch call for its one shape (``dynamic=False``: by
    default dynamo recompiles a function's second shape with symbolic sizes, slower
    kernels than a user compiling for that shape gets; past dynamo's 8 entries a
    function, compiled still, never eager timed as compiled)."""
    from portkit.bench.tasks import compile_for_each_shape

    return compile_for_each_shape(spec.torch_call)


def best_speed(torch_us: float, compile_us: float | None, twin_us: float) -> float:
    """The twin against the faster torch: eager, or torch.compile where it was timed."""
    fastest = torch_us if compile_us is None else min(torch_us, compile_us)
    return fastest / twin_us


def make_inputs(spec: Spec, requires_grad: bool) -> list:
    import torch

    dtype = getattr(torch, spec.dtype)
    generator = torch.Generator(device="cuda").manual_seed(0)
    tensors = [torch.randn(s, generator=generator, device="cuda", dtype=dtype) for s in spec.shapes]
    return [t.requires_grad_(requires_grad) for t in tensors]


def as_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def nbytes(tensors: Sequence[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def calls(
    spec: Spec, twin: Callable, direction: str, with_compile: bool = False
) -> tuple[dict[str, Callable], int, Any]:
    """({"torch": call, "twin": call, and "compile" with_compile}, bytes one call moves, the
    forward's max abs diff)."""
    import torch

    backward = direction == "backward"
    functions = {"torch": spec.torch_call, "twin": twin}
    if with_compile:
        functions["compile"] = compiled(spec)
    inputs = make_inputs(spec, backward)
    with torch.no_grad():
        want = as_tuple(spec.torch_call(*inputs))
        got = as_tuple(twin(*inputs))
    diff = max(float((g.float() - w.float()).abs().max()) for g, w in zip(got, want))
    if not backward:

        def forward(function: Callable) -> Callable:
            def call() -> Any:
                with torch.no_grad():
                    return function(*inputs)

            return call

        moved = nbytes(inputs) + nbytes(want)
        return {name: forward(f) for name, f in functions.items()}, moved, diff
    graphs = {name: as_tuple(f(*inputs)) for name, f in functions.items()}
    grad_out = [torch.randn_like(o) for o in graphs["torch"]]

    def grad(outputs: tuple) -> Callable:
        return lambda: torch.autograd.grad(outputs, inputs, grad_out, retain_graph=True)

    # the inputs read again (or what was saved of them), the upstream gradients read,
    # the input gradients written (each an input's size)
    moved = 2 * nbytes(inputs) + nbytes(grad_out)
    return {name: grad(outputs) for name, outputs in graphs.items()}, moved, None


def measure(
    spec: Spec, twin: Callable, direction: str, timer: Timer, reps: int, with_compile: bool
) -> Row:
    import torch

    timed, moved, diff = calls(spec, twin, direction, with_compile)
    # a clone of half the bytes reads and writes as many as the op moves
    source = torch.empty(max(moved // 2 // 4, 1), dtype=torch.float32, device="cuda")
    timed["copy"] = source.clone
    names = list(timed)
    for name in names:  # warm-up: compilation, allocator, caches
        timed[name]()
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {name: [] for name in names}
    uncovered = 0
    for rep in range(reps):
        order = names[rep % len(names) :] + names[: rep % len(names)]
        events = [(name, *timer.time(timed[name])) for name in order]
        torch.cuda.synchronize()
        for name, start, end, covered in events:
            samples[name].append(start.elapsed_time(end) * 1000)
            uncovered += not covered
    median = {name: statistics.median(values) for name, values in samples.items()}
    return Row(
        op=spec.op,
        shapes=[list(s) for s in spec.shapes],
        dtype=spec.dtype,
        direction=direction,
        torch_us=median["torch"],
        twin_us=median["twin"],
        copy_us=median["copy"],
        bytes=moved,
        speed=median["torch"] / median["twin"],
        torch_copy_pct=100 * median["copy"] / median["torch"],
        twin_copy_pct=100 * median["copy"] / median["twin"],
        max_abs_diff=diff,
        uncovered=uncovered,
        compile_us=median.get("compile"),
        best_speed=best_speed(median["torch"], median.get("compile"), median["twin"]),
    )


def machine() -> dict[str, str]:
    import torch

    return {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def print_row(row: Row) -> None:
    shape = ",".join("x".join(map(str, s)) for s in row.shapes)
    diff = "-" if row.max_abs_diff is None else f"{row.max_abs_diff:.2g}"
    print(
        f"{row.op:<16} {shape:<28} {row.dtype:<9} {row.direction[:3]:<4} "
        f"{row.torch_us:>9.1f} {row.twin_us:>9.1f} {row.speed:>6.2f} "
        f"{row.torch_copy_pct:>6.0f}% {row.twin_copy_pct:>6.0f}% {diff:>8}"
        + (
            f" {row.compile_us:>10.1f} {row.best_speed:>5.2f}"
            if row.compile_us is not None and row.best_speed is not None
            else ""
        )
        + (f"  ({row.uncovered} calls outlasted the spin)" if row.uncovered else ""),
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", metavar="OUT", help="also write the rows and machine as JSON")
    parser.add_argument("--reps", type=int, default=30, help="timed calls each (median)")
    parser.add_argument("--op", action="append", help="only this op (repeatable)")
    parser.add_argument(
        "--spin-us", type=float, default=SPIN_US, help="GPU spin before each timed call (us)"
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="also time torch.compile of each torch call, compiled for its shape (adds a "
        "compile per line and direction); 'best' is the twin against the faster torch",
    )
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    known = {s.op for s in specs()}
    unknown = sorted(set(args.op or ()) - known)
    if unknown:
        parser.error(
            f"{unknown[0]!r} is not in the torch-comparison table; choose from {sorted(known)}"
        )

    import torch

    if not torch.cuda.is_available():
        print("time_vs_torch.py needs a GPU: no CUDA GPU visible to PyTorch", file=sys.stderr)
        return 2
    import portkit

    chosen = [s for s in specs() if not args.op or s.op in args.op]
    timer = Timer(args.spin_us)
    twins: dict[str, Callable] = {}
    rows = []
    print(f"{machine()['gpu']}; speed = torch time / twin time; % of a clone of the same bytes")
    print(
        f"{'op':<16} {'shape':<28} {'dtype':<9} {'dir':<4} {'torch us':>9} {'twin us':>9} "
        f"{'speed':>6} {'torch':>7} {'twin':>7} {'max diff':>8}"
        + (f" {'compile us':>10} {'best':>5}" if args.compile else "")
    )
    for spec in chosen:
        if spec.op not in twins:
            twins[spec.op] = portkit.load(spec.op, "twin")
        for direction in ("forward", "backward") if spec.backward else ("forward",):
            row = measure(spec, twins[spec.op], direction, timer, args.reps, args.compile)
            rows.append(row)
            print_row(row)
    if args.json:
        from pathlib import Path

        from portkit.atomic_write import write_atomic

        document = {
            "machine": machine(),
            "reps": args.reps,
            "spin_us": args.spin_us,
            "rows": [asdict(r) for r in rows],
        }
        write_atomic(Path(args.json), json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
