"""An exported package's host cost per call beside ``portkit.load``'s, on a CPU, launches stubbed.

    python scripts/export_replay_cpu.py [--calls 2000] [--rounds 15] [--json]

Exports the repository's sigmoid (``portkit export``, NVRTC only: no GPU needed) into a
temporary folder and imports it twice in this process with its driver stubbed (CPU
tensors pass for CUDA ones, buffers are CPU tensors, every launch does nothing): once as
a user with a C++ compiler gets it (the compiled replayer ``native.cpp``, the one build
portkit makes, launching through a no-op C function with ``cuLaunchKernel``'s signature;
its C++ autograd node) and once as without one (its prepared Python functions on
torch's launcher, a no-op). Beside them ``portkit.load``'s callable with the compiled
replayer (scripts/profile_launch_cpu.py) and torch's own sigmoid. Forward, and forward
+ backward (``y = f(x); y.backward(g)``), timed in interleaved rounds (the timing
helpers' ``host_rounds``); per row the median µs per call and the median of the
per-round ratios to its base row: ``portkit.load`` for the package's rows (the issue's
goal: forward within 1.1x), torch for portkit's. What is left is the host's own work:
Python, the dispatcher, autograd, torch's allocation. On a GPU, ``scripts/bench_launch.py``
measures the real thing ("exported package").
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import shutil
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "cpu_timed_exported"


def stubbed_package(folder: Path, package: str, compiled_launch: int | None) -> object:
    """The exported package ``package`` in ``folder``, imported afresh, launching nothing;
    ``compiled_launch``: the address of the compiled replayer's launch function, or None
    for the package's Python path (as where no compiler builds ``native.cpp``)."""
    from cuda.bindings import driver

    success = (driver.CUresult.CUDA_SUCCESS,)
    driver.cuLaunchKernel = lambda *args: success
    sys.path.insert(0, str(folder))
    parent = types.ModuleType(package)  # the runtime first, patched: __init__ registers
    parent.__path__ = [str(folder / package)]  # type: ignore[attr-defined]
    sys.modules[package] = parent
    try:
        launch = importlib.import_module(f"{package}._runtime.driver_launch")
        launch.static_launcher = lambda: "".format
        launch.current_stream = lambda device: 0
        contract = importlib.import_module(f"{package}._runtime.launch_contract")
        contract._get_device, contract._cuda_sm_count = (lambda: 0), (lambda device: 132)
        native = importlib.import_module(f"{package}._runtime.native_replayer")
        if compiled_launch is None:
            native.compiled_module = lambda who="": native._built.update(reason="timed") or None
        native.launch_entry_points = lambda: (compiled_launch or 0, 0)
        runtime = importlib.import_module(f"{package}._runtime.exported")
        runtime.Library.kernel = lambda self, lowered: 1  # a handle; nothing is loaded
        runtime.Kernels.empty = lambda self, shape, dtype: torch.empty(tuple(shape), dtype=dtype)
        del sys.modules[package]
        return importlib.import_module(package)
    finally:
        sys.path.remove(str(folder))


def export(out: Path) -> Path:
    """sigmoid exported into ``out`` as PACKAGE, and a copy under another name and op
    namespace (``PACKAGE``_py: a process registers an op name once)."""
    command = [sys.executable, "-m", "portkit.cli", "export", "sigmoid", "--out", str(out)]
    command += ["--arch", "sm_90", "--name", PACKAGE]
    subprocess.run(command, check=True, cwd=REPO, capture_output=True, text=True)
    shutil.copytree(out / PACKAGE, out / f"{PACKAGE}_py")
    manifest = json.loads((out / PACKAGE / "manifest.json").read_text())
    manifest["namespace"] += "_py"
    (out / f"{PACKAGE}_py" / "manifest.json").write_text(json.dumps(manifest))
    return out


def step(fn: Callable, x: torch.Tensor, g: torch.Tensor) -> Callable[[], None]:
    leaf = x.clone().requires_grad_()

    def run() -> None:
        leaf.grad = None
        fn(leaf).backward(g)

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args()

    sys.path.insert(0, str(REPO / "scripts"))
    from profile_launch_cpu import _no_launch, compiled_replaying, paired
    from profile_launch_cpu import twin_targets_with_stubbed_driver as stubbed_targets

    from portkit.launch.kernel_set import KernelSet
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    config = load_config(REPO)
    op = discover(config).get("sigmoid")
    load = compiled_replaying(
        op, KernelSet("sigmoid", "replayed", "cpu", stubbed_targets(op)), config.namespace
    )
    if load is None:
        print("the compiled replayer does not build here: nothing to compare", file=sys.stderr)
        return 1
    torch.Tensor.is_cuda = property(lambda self: True)  # type: ignore[assignment,misc]
    torch.cuda.current_device = lambda: -1  # CPU tensors are on device -1
    address = ctypes.cast(_no_launch, ctypes.c_void_p).value
    x, g = torch.randn(1024), torch.randn(1024)
    with tempfile.TemporaryDirectory() as tmp:
        folder = export(Path(tmp) / "out")
        compiled = stubbed_package(folder, PACKAGE, address).sigmoid  # type: ignore[attr-defined]
        python = stubbed_package(folder, f"{PACKAGE}_py", None).sigmoid  # type: ignore[attr-defined]
    assert type(compiled).__name__ == "ReplayedOpCallable", type(compiled)
    assert type(python).__name__ == "ReplayedOp", type(python)
    fwd = {
        "torch.sigmoid": lambda: torch.sigmoid(x),
        "portkit.load": lambda: load(x),
        "package, compiled replayer": lambda: compiled(x),
        "package, Python replay": lambda: python(x),
    }
    both = {
        f"{name}, fwd+bwd": step(f, x, g)
        for name, f in [
            ("torch.sigmoid", torch.sigmoid),
            ("portkit.load", load),
            ("package, compiled replayer", compiled),
            ("package, Python replay", python),
        ]
    }
    for fn in [*fwd.values(), *both.values()]:  # warm: plans, recordings, then replays
        for _ in range(200):
            fn()
    # Where the Python path's forward goes: its watch questions and key, then its
    # prepared function (allocation, data pointers, the launch); the compiled path does
    # both in one C++ call (run_eager).
    prepared = sys.modules[type(python).__module__]
    key = prepared.eager_key((x,))
    function = python._eager[key]
    parts = {
        "  Python path: eager_key": lambda: prepared.eager_key((x,)),
        "  Python path: prepared function": lambda: function((x,)),
        "  compiled path: run_eager": lambda: compiled._run_eager((x,)),
    }
    timed = {**fwd, **parts, **both}
    for name, fn in [("portkit.load", load._run_eager), ("the package", compiled._run_eager)]:
        assert fn((x,)) is not None, f"{name}'s plain-eager call does not replay in C++"
    node = compiled(x.clone().requires_grad_()).grad_fn.name()
    assert node == f"{compiled.registered.name}Backward", node  # the C++ node, no Function
    bases = {}
    for name in timed:
        suffix = ", fwd+bwd" if name.endswith("fwd+bwd") else ""
        bases[name] = (
            f"portkit.load{suffix}"
            if name.startswith(("package", "  "))
            else f"torch.sigmoid{suffix}"
        )
    rows = paired(timed, bases, args.calls, args.rounds)
    if args.json:
        print(
            json.dumps({name: {"us": us, "ratio": r, "base": bases[name]} for name, us, r in rows})
        )
        return 0
    print(f"torch {torch.__version__}, sigmoid of 1024 float32 on the CPU, launches stubbed")
    print(f"{'':38} {'median µs':>9}  median per-round ratio")
    for name, us, ratio in rows:
        print(f"{name:38} {us:9.2f}  {ratio:5.2f}x {bases[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
