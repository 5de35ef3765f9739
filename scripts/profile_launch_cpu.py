"""portkit's host-side launch path on a CPU, with a launch target that does nothing.

    python scripts/profile_launch_cpu.py [--profile]

Times (minimum of 7 runs of 3,000 calls) the repository's sigmoid through
``registered_callable`` with kernels whose launch is a no-op: what is left is portkit's
own per-call work (input checks, the launcher, launch configuration and argument checks)
plus torch's allocation and autograd. The "twin path" rows use the twin backend's own
launch target (plans, argument packing) on CPU tensors with ``cuLaunchKernel`` and the
stream query replaced by stubs: everything a GPU call does in Python except the driver
call itself. The "compiled replay" rows are ``portkit.load``'s callable with the compiled replayer
(built against this CPU torch) launching through a no-op C function: the whole
plain-eager call but the driver's launch; their forward + backward (through the
compiled replayer's autograd node, and through ``torch.ops``, whose C++ kernels it
asserts ran, and through ``torch.ops`` with those deregistered: the Python kernels) are
timed beside torch's own in interleaved rounds, medians and the median of the per-round
ratios, since this machine is shared and noisy. ``--profile`` adds a cProfile of the twin
path's forward. On a GPU, ``scripts/bench_launch.py`` measures the real thing.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
from pathlib import Path

from portkit.bench.timing import host_rounds
from portkit.launch.kernel_set import LaunchTarget


class NoLaunch(LaunchTarget):
    def launch(self, config, args) -> None:
        return None


def best_us(fn, calls: int = 3000, runs: int = 7) -> float:
    return min(host_rounds({"fn": fn}, rounds=runs, calls=calls)["fn"]) * 1e6


LAUNCHES = [0]


def twin_targets_with_stubbed_driver(op) -> dict:
    """The twin's launch targets for ``op`` on CPU tensors (device -1), launching nothing."""
    from cuda.bindings import driver

    from portkit.backends.twin.backend import TwinKernelTarget
    from portkit.backends.twin.instances import checked_twin_kernels
    from portkit.runtime import driver_launch

    def launch(*args):
        LAUNCHES[0] += 1  # a count: a list of every launch would make the GC slow
        return (driver.CUresult.CUDA_SUCCESS,)

    driver.cuLaunchKernel = launch
    driver_launch.current_stream = lambda device: 0
    handles = {("float",): 1, ("double",): 2}
    return {
        name: TwinKernelTarget(kernel, handles, device=-1)
        for name, kernel in checked_twin_kernels(op).items()
    }


@__import__("ctypes").CFUNCTYPE(
    __import__("ctypes").c_int,
    *[__import__("ctypes").c_void_p] * 1,
    *[__import__("ctypes").c_uint] * 7,
    *[__import__("ctypes").c_void_p] * 3,
)
def _no_launch(*args) -> int:  # cuLaunchKernel's signature, for the compiled replayer
    return 0


def compiled_replaying(op, k, namespace):
    """``portkit.load``'s callable over ``k`` with the compiled replayer (built against
    this CPU torch, as the CPU tests build it) launching nothing; None where it does not
    build here."""
    import ctypes

    from portkit.runtime import native_replayer
    from portkit.torch_op.load import registered_callable

    module = native_replayer.compiled_module()
    if module is None:
        return None
    address = ctypes.cast(_no_launch, ctypes.c_void_p).value
    make = native_replayer.compiled_replayer
    native_replayer.compiled_replayer = lambda who: native_replayer.NativeReplayer(
        module, address, 0, 256
    )
    try:
        return registered_callable(op, k, namespace, replay="auto")
    finally:
        native_replayer.compiled_replayer = make


def paired(timed: dict, base: dict, calls: int = 1000, rounds: int = 15) -> list[tuple]:
    """Interleaved rounds over ``timed``: per row, the median µs per call and the median
    of the per-round ratios to the row ``base[name]`` (so that the machine's load cancels)."""
    import statistics

    seconds = host_rounds(timed, rounds=rounds, calls=calls)
    samples = {name: [s * 1e6 for s in values] for name, values in seconds.items()}
    return [
        (
            name,
            statistics.median(values),
            statistics.median(v / b for v, b in zip(values, samples[base[name]])),
        )
        for name, values in samples.items()
    ]


def main() -> int:
    import torch

    from portkit.launch.kernel_set import KernelSet
    from portkit.project.config import load_config
    from portkit.project.discovery import discover
    from portkit.torch_op.load import registered_callable

    config = load_config(Path(__file__).resolve().parents[1])
    op = discover(config).get("sigmoid")
    k = KernelSet("sigmoid", "nolaunch", "cpu", {n: NoLaunch() for n in op.kernels})
    f = registered_callable(op, k, config.namespace)
    twin_k = KernelSet("sigmoid", "twinpath", "cpu", twin_targets_with_stubbed_driver(op))
    twin = registered_callable(op, twin_k, config.namespace)
    replayed_k = KernelSet("sigmoid", "replayed", "cpu", twin_targets_with_stubbed_driver(op))
    replayed = compiled_replaying(op, replayed_k, config.namespace)
    python_k = KernelSet("sigmoid", "pykernels", "cpu", twin_targets_with_stubbed_driver(op))
    python_kernels = compiled_replaying(op, python_k, config.namespace)
    if python_kernels is not None:  # the same op with torch.ops's Python kernels only
        from portkit.runtime.registration import _NATIVE

        _NATIVE.pop(python_kernels.registered.qualname)
        python_kernels.registered.native_kernels = None
    x = torch.randn(1024)
    xg = x.clone().requires_grad_()
    g = torch.randn(1024)

    def step(fn):
        def run():
            xg.grad = None
            fn(xg).backward(g)

        return run

    rows = [
        ("torch.sigmoid", best_us(lambda: torch.sigmoid(x))),
        ("torch.empty_like", best_us(lambda: torch.empty_like(x))),
        ("portkit fast path, forward", best_us(lambda: f(x))),
        ("registered op (torch.ops), forward", best_us(lambda: f.op(x))),
        ("torch forward + backward", best_us(step(torch.sigmoid), calls=1000)),
        ("portkit fast path, forward + backward", best_us(step(f), calls=1000)),
        ("twin path (driver stubbed), forward", best_us(lambda: twin(x))),
        ("twin path (driver stubbed), fwd + bwd", best_us(step(twin), calls=1000)),
    ]
    ratios: list[tuple] = []
    if replayed is not None:
        for _ in range(3):  # a signature records on its second call, replays from the third
            replayed(x), replayed.op(x), step(replayed)()
            python_kernels.op(x), step(python_kernels.op)()
        node = replayed(xg).grad_fn.name()
        assert node == f"{replayed.registered.name}Backward", node  # the C++ node, not a Function
        from portkit.runtime.registration import _NATIVE

        kernels = _NATIVE[replayed.registered.qualname]  # the op's C++ kernels (native.cpp)
        before = kernels.counts()
        replayed.op(x), replayed.op(xg)
        after = kernels.counts()
        assert after["replayed"] == before["replayed"] + 1, after  # torch.ops forward: C++ only
        assert after["nodes"] == before["nodes"] + 1, after  # with a gradient: the C++ node
        rows += [
            ("compiled replay (launch stubbed), forward", best_us(lambda: replayed(x))),
            ("the same through torch.ops, forward", best_us(lambda: replayed.op(x))),
        ]
        timed = {
            "torch forward + backward": step(torch.sigmoid),
            "compiled replay, forward + backward": step(replayed),
            "the same through torch.ops, fwd + bwd": step(replayed.op),
            "torch.ops, Python kernels, fwd + bwd": step(python_kernels.op),
            "twin path (Python Function), fwd + bwd": step(twin),
            "torch.sigmoid, forward": lambda: torch.sigmoid(x),
            "compiled replay, forward": lambda: replayed(x),
            "the same through torch.ops, forward": lambda: replayed.op(x),
            "torch.ops, Python kernels, forward": lambda: python_kernels.op(x),
        }
        bases = {
            n: "torch.sigmoid, forward" if n.endswith("forward") else "torch forward + backward"
            for n in timed
        }
        ratios = paired(timed, bases)
    before = LAUNCHES[0]
    twin(x)
    assert LAUNCHES[0] == before + 1, "the twin path's forward did not reach the driver"
    for name, us in rows:
        print(f"{name:40} {us:7.2f} µs")
    if ratios:
        print("interleaved rounds (median µs; median per-round ratio to torch's own):")
        for name, us, ratio in ratios:
            print(f"{name:40} {us:7.2f} µs  {ratio:5.2f}x")
        print("torch.ops's C++ kernels (calls):", kernels.counts())
    if "--profile" in sys.argv:
        profile = cProfile.Profile()
        profile.runcall(lambda: [twin(x) for _ in range(20000)])
        pstats.Stats(profile).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
