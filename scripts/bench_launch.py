"""Host cost per call of a small op: torch vs portkit.load twin vs numba prototype.

    python scripts/bench_launch.py [--n 1024] [--calls 2000] [--repeats 15] [--json out.json]

For each implementation of sigmoid on ``--n`` float32 elements (the twin three ways:
replaying recorded launcher calls with the compiled replayer, with the prepared Python
one (runtime/prepared.py, what a package without a compiler uses too), and running the
launcher every call): the forward alone, and
forward + backward through autograd. A sample times ``--calls`` back-to-back calls with
``time.perf_counter`` and one synchronize at the end (the kernels are tiny, so the queue
never fills and the figure is the host's work per call). ``--repeats`` rounds each take
one sample of every implementation in turn, so a slow spell of the shared machine hits
them alike; medians are reported, and "x torch" is the median of each round's ratio to
torch. Outputs and gradients are checked against torch before and after the timing
(benchmarks that time one call and check another have fooled people before). Also timed: the
registered op called directly (``torch.ops.portkit.sigmoid_twin``), which goes through
the dispatcher and custom_op's Python wrappers, and three floors that say what is left
to win: a bare ``torch.empty_like``, the twin's forward kernel launched through the
driver with its arguments packed once (``cuLaunchKernel`` and nothing else), and an
``autograd.Function`` whose forward and backward are torch's own sigmoid kernels (what
any op written in Python pays for autograd). "exported package" is sigmoid exported
(``portkit export``) for this GPU into a temporary folder and imported with portkit and
numba blocked, as tests/export does: its calls replay with portkit.load's compiled
replayer and C++ autograd node (native.cpp, shipped in the package, the one build
portkit made); "exported package, Python replay" is the same package as where no
compiler builds it (``PORTKIT_REPLAY=python``: one prepared Python function per
signature, runtime/prepared.py, launching with torch's launcher). Their rows add "x
twin": the median per-round ratio of the package's forward to ``portkit.load``'s (the
goal: within 1.1x). ``--profile FILE`` writes a cProfile of
the twin's forward and forward + backward.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from portkit.bench.timing import host_rounds

REPLAY_SWITCH = "PORTKIT_REPLAY"  # read by the Session portkit.load builds (docs/environment.md)


def per_call_us(fn: Callable[[], object], calls: int, repeats: int) -> float:
    """Median over ``repeats`` of the host time per call of ``calls`` back-to-back calls."""
    return statistics.median(samples_us({"one": (fn, calls)}, repeats)["one"])


def samples_us(
    timed: dict[str, tuple[Callable[[], object], int]], rounds: int
) -> dict[str, list[float]]:
    """Samples of µs per call for each entry, taken in rounds that visit every entry once:
    a slow spell of a shared machine hits all of them alike, and the ratios of one round
    are comparisons side by side."""
    import torch

    for fn, calls in timed.values():
        for _ in range(max(calls // 10, 20)):
            fn()
    torch.cuda.synchronize()
    seconds = host_rounds(
        {name: fn for name, (fn, _) in timed.items()},
        rounds=rounds,
        calls={name: calls for name, (_, calls) in timed.items()},
        finish=torch.cuda.synchronize,
    )
    return {name: [s * 1e6 for s in samples] for name, samples in seconds.items()}


def python_autograd_floor() -> Callable:
    """sigmoid as an autograd.Function over torch's kernels: the cost of autograd for an
    op whose forward and backward are Python."""
    import torch

    class Sigmoid(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = torch.sigmoid(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return torch.ops.aten.sigmoid_backward(g, y)

    return Sigmoid.apply


def driver_floor(twin: Callable, x, args) -> float:
    """The twin's forward kernel on ``x`` through cuLaunchKernel alone, arguments packed
    once: what portkit's Python adds is the twin's forward minus this and empty_like."""
    import torch

    from portkit.runtime import driver_launch

    out = torch.empty_like(x)
    target = twin.binding.kernels.targets["sigmoid_fwd"]
    plan = target._plans[(torch.float32,)]
    plan.driver.pack([x.data_ptr(), out.data_ptr(), x.numel()])
    stream = driver_launch.current_stream(x.get_device())
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    grid = (min(-(-x.numel() // 4 // 256), 8 * sms), 1, 1)
    return per_call_us(
        lambda: plan.driver.launch_packed(grid, (256, 1, 1), 0, stream), args.calls, args.repeats
    )


def static_launcher_floor(twin: Callable, x, args) -> float | None:
    """The same kernel through torch's C++ launcher for inductor's cubins
    (``torch._C._StaticCudaLauncher``: packs a tuple of ints and floats in C++), checked
    against torch.sigmoid: is it cheaper than cuda.bindings' cuLaunchKernel?"""
    import torch

    from portkit.runtime import driver_launch

    launcher = getattr(torch._C, "_StaticCudaLauncher", None)
    if launcher is None:
        return None
    out = torch.empty_like(x)
    target = twin.binding.kernels.targets["sigmoid_fwd"]
    handle = int(target._plans[(torch.float32,)].driver.handle)
    stream = driver_launch.current_stream(x.get_device())
    grid = -(-x.numel() // 4 // 256)
    values = (x.data_ptr(), out.data_ptr(), x.numel())
    launch = launcher._launch_kernel
    us = per_call_us(
        lambda: launch(handle, grid, 1, 1, 8, 0, "OOl", values, stream), args.calls, args.repeats
    )
    torch.testing.assert_close(out, torch.sigmoid(x))
    return us


def write_profile(twin: Callable, x, xg, g, path: str) -> None:
    import cProfile
    import io
    import pstats

    import torch

    def step():
        xg.grad = None
        twin(xg).backward(g)

    text = io.StringIO()
    for name, fn, calls in (("forward", lambda: twin(x), 5000), ("forward + backward", step, 2000)):
        profile = cProfile.Profile()
        profile.runcall(lambda fn=fn, calls=calls: [fn() for _ in range(calls)])
        torch.cuda.synchronize()
        text.write(f"== twin {name}, {calls} calls\n")
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(20)
    with open(path, "w") as handle:
        handle.write(text.getvalue())


# Keeps portkit and numba from being imported by the exported package (as tests/export
# does): modules already imported stay, any new import of theirs fails.
class _BlockPortkit(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.split(".")[0] in ("portkit", "numba"):
            raise ImportError(f"blocked: {name}")


def exported_sigmoid(folder: str) -> dict[str, Callable]:
    """sigmoid exported (``portkit export``) for this GPU into ``folder`` and imported
    from there with portkit and numba blocked, twice: as a user gets it (the compiled
    replayer) and with ``PORTKIT_REPLAY=python`` (its Python path), under another name
    and op namespace (a process registers an op once); {} (and why, on stderr) if the
    export fails."""
    import shutil

    import torch

    major, minor = torch.cuda.get_device_capability()
    out = Path(folder) / "out"
    command = [sys.executable, "-m", "portkit.cli", "export", "sigmoid", "--out", str(out)]
    command += ["--arch", f"sm_{major}{minor}", "--name", "bench_exported"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=Path(__file__).parents[1])
    if done.returncode != 0:
        print(f"exported package: unavailable: {done.stderr.strip()}", file=sys.stderr)
        return {}
    shutil.copytree(out / "bench_exported", out / "bench_exported_py")
    manifest = json.loads((out / "bench_exported_py" / "manifest.json").read_text())
    manifest["namespace"] += "_py"
    (out / "bench_exported_py" / "manifest.json").write_text(json.dumps(manifest))
    sys.path.insert(0, str(out))
    blocker = _BlockPortkit()
    sys.meta_path.insert(0, blocker)
    try:
        packages = {}
        for row, package, replay in (
            ("exported package", "bench_exported", ""),
            ("exported package, Python replay", "bench_exported_py", "python"),
        ):
            os.environ[REPLAY_SWITCH] = replay  # the package reads it as it registers
            packages[row] = importlib.import_module(package).sigmoid
        return packages
    finally:
        os.environ.pop(REPLAY_SWITCH)
        sys.meta_path.remove(blocker)
        sys.path.remove(str(out))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", default=None)
    parser.add_argument("--profile", default=None, help="write a cProfile of the twin here")
    args = parser.parse_args()

    import torch

    import portkit

    x = torch.randn(args.n, device="cuda")
    xg = x.clone().requires_grad_()
    g = torch.randn_like(x)
    expected = torch.sigmoid(x)
    expected_grad = g * expected * (1 - expected)
    impls: dict[str, Callable] = {"torch": torch.sigmoid}
    # The twin three ways: replaying recorded calls with the compiled replayer (the
    # default), with the prepared Python one, and without replay (every call runs the launcher).
    for name, implementation, replay in (
        ("twin", "twin", ""),
        ("twin, Python replayer", "twin", "python"),
        ("twin, no replay", "twin", "0"),
        ("numba", "numba", ""),
    ):
        os.environ[REPLAY_SWITCH] = replay
        try:
            impls[name] = portkit.load("sigmoid", implementation)
        except Exception as exc:  # report and go on: numba may not compile here
            print(f"{name}: unavailable: {exc}", file=sys.stderr)
    os.environ.pop(REPLAY_SWITCH)
    replayers = {
        name: type(getattr(f.binding.forward, "replayer", None)).__name__
        for name, f in impls.items()
        if name.startswith("twin")
    }
    if "twin" in impls:
        # torch.ops calls the op's latest binding: bind the default (compiled replayer)
        # again, or the row would time the "no replay" binding loaded last above
        portkit.load("sigmoid", "twin")
        impls["twin (torch.ops, dispatcher)"] = torch.ops.portkit.sigmoid_twin
    exported_folder = tempfile.TemporaryDirectory()
    exported = exported_sigmoid(exported_folder.name)
    impls.update(exported)
    replayers.update(
        {
            name: type(getattr(f.binding.forward, "replayer", None)).__name__
            for name, f in exported.items()
        }
    )
    impls["autograd.Function over torch"] = python_autograd_floor()

    timed: dict[str, tuple[Callable[[], object], int]] = {}
    for name, f in impls.items():
        torch.testing.assert_close(f(x), expected)

        def step(f=f):
            xg.grad = None
            f(xg).backward(g)

        step()
        torch.testing.assert_close(xg.grad, expected_grad)
        timed[f"{name}/forward"] = (lambda f=f: f(x), args.calls)
        timed[f"{name}/both"] = (step, max(args.calls // 4, 100))
    samples = samples_us(timed, args.repeats)
    torch_both = samples["torch/both"]
    rows = []
    for name, f in impls.items():
        both = samples[f"{name}/both"]
        rows.append(
            {
                "impl": name,
                "forward_us": statistics.median(samples[f"{name}/forward"]),
                "forward_backward_us": statistics.median(both),
                # the median of each round's ratio: paired, side by side
                "fwd_bwd_vs_torch": statistics.median(b / t for b, t in zip(both, torch_both)),
            }
        )
        if name in exported and "twin" in impls:  # the package against portkit.load
            forward, twin = samples[f"{name}/forward"], samples["twin/forward"]
            rows[-1]["fwd_vs_twin"] = statistics.median(a / b for a, b in zip(forward, twin))
        torch.testing.assert_close(f(x), expected)  # the timed calls' output, checked after
    replay_state = {
        name: {
            which: (len(launcher.replayer or ()), list(launcher.unreplayable.values()))
            for which in ("forward", "backward")
            if hasattr(launcher := getattr(f.binding, which), "unreplayable")
        }
        for name, f in impls.items()
        if name.startswith("twin") and hasattr(f, "binding")
    }
    replay_alone = None
    if "twin" in impls and hasattr(impls["twin"].binding.forward, "replayer"):
        run = impls["twin"].binding.forward.replayer.run
        leaves = (x,)
        torch.testing.assert_close(run(leaves)[0], expected)
        replay_alone = per_call_us(lambda: run(leaves), args.calls, args.repeats)
    empty = per_call_us(lambda: torch.empty_like(x), args.calls, args.repeats)
    driver = driver_floor(impls["twin"], x, args) if "twin" in impls else None
    static = static_launcher_floor(impls["twin"], x, args) if "twin" in impls else None
    if args.profile and "twin" in impls:
        write_profile(impls["twin"], x, xg, g, args.profile)

    print(f"sigmoid, {args.n} float32, {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"replayers: {replayers}")
    print(
        f"{'implementation':32} {'fwd µs':>8} {'fwd+bwd µs':>11} {'x torch':>8} {'fwd x twin':>10}"
    )
    for r in rows:
        ratio = r["fwd_bwd_vs_torch"]
        twin_ratio = f"{r['fwd_vs_twin']:10.2f}" if "fwd_vs_twin" in r else ""
        print(
            f"{r['impl']:32} {r['forward_us']:8.1f} {r['forward_backward_us']:11.1f} {ratio:8.2f}"
            f" {twin_ratio}"
        )
    print(f"replay state (signatures recorded, reasons not): {replay_state}")
    print(f"{'torch.empty_like':32} {empty:8.1f}")
    if replay_alone is not None:
        print(f"{'twin forward replayer.run alone':32} {replay_alone:8.1f}")
    if driver is not None:
        print(f"{'cuLaunchKernel, packed once':32} {driver:8.1f}")
    if static is not None:
        print(f"{'torch StaticCudaLauncher':32} {static:8.1f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {
                    "n": args.n,
                    "device": torch.cuda.get_device_name(),
                    "torch": torch.__version__,
                    "rows": rows,
                    "empty_like_us": empty,
                    "driver_launch_us": driver,
                    "static_launcher_us": static,
                    "replayers": replayers,
                    "replay_state": replay_state,
                    "replayer_run_us": replay_alone,
                },
                handle,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
