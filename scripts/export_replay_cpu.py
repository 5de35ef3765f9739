"""Where an exported package's replayed call goes, on a CPU, with the launch stubbed.

    python scripts/export_replay_cpu.py [--calls 3000] [--rounds 9] [--no-static]

Exports the repository's sigmoid (``portkit export``, NVRTC only: no GPU needed) into a
temporary folder and imports the package with its driver stubbed: torch's launcher
(``_StaticCudaLauncher._launch_kernel``) and cuda.bindings' ``cuLaunchKernel`` become
no-ops, CPU tensors pass for CUDA ones and buffers are CPU tensors. What is left is the
package's own Python per call, plus torch's allocation. Timed in interleaved rounds
(medians): the package's forward on torch's launcher (``--no-static``: as if this torch
had none, the ``cuLaunchKernel`` fallback), its replaying forward and replayer alone,
beside ``portkit.load``'s compiled replayer launching through a no-op C function (where
``native.cpp`` builds here), ``torch.empty_like`` and ``torch.sigmoid`` on the same CPU
tensor. On a GPU, ``scripts/bench_launch.py`` measures the real thing ("exported package").
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "cpu_timed_exported"


def _no_launch(*args: object) -> None:
    return None


def stubbed_package(folder: Path, static: bool) -> object:
    """The exported sigmoid package, imported afresh, launching nothing; ``static``:
    whether torch's launcher is there (else the cuLaunchKernel fallback)."""
    from cuda.bindings import driver

    success = (driver.CUresult.CUDA_SUCCESS,)
    driver.cuLaunchKernel = lambda *args: success
    sys.path.insert(0, str(folder))
    try:
        launch = importlib.import_module(f"{PACKAGE}._runtime.driver_launch")
        launch.static_launcher = (lambda: "".format) if static else (lambda: None)
        launch.current_stream = lambda device: 0
        contract = importlib.import_module(f"{PACKAGE}._runtime.launch_contract")
        contract._get_device, contract._cuda_sm_count = (lambda: 0), (lambda device: 132)
        runtime = importlib.import_module(f"{PACKAGE}._runtime.exported")
        runtime.Library.kernel = lambda self, lowered: 1  # a handle; nothing is loaded
        runtime.Kernels.empty = lambda self, shape, dtype: torch.empty(tuple(shape), dtype=dtype)
        return importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(folder))


def export(folder: Path) -> Path:
    command = [sys.executable, "-m", "portkit.cli", "export", "sigmoid", "--out", str(folder)]
    command += ["--arch", "sm_90", "--name", PACKAGE]
    subprocess.run(command, check=True, cwd=REPO, capture_output=True, text=True)
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--no-static", action="store_true", help="as if torch had no launcher")
    args = parser.parse_args()

    torch.Tensor.is_cuda = property(lambda self: True)  # type: ignore[assignment,misc]
    # CPU tensors are on device -1: the kernels take it for the GPU they were loaded on.
    torch.cuda.current_device = lambda: -1
    x = torch.randn(1024)
    timed: dict[str, Callable[[], object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = export(Path(tmp) / "out")
        package = stubbed_package(folder, not args.no_static)
        sigmoid = package.sigmoid  # type: ignore[attr-defined]
        for _ in range(3):  # recorded on the first calls, replayed after
            sigmoid(x)
        launcher = "cuLaunchKernel" if args.no_static else "torch's launcher"
        timed[f"package forward, {launcher}"] = lambda: sigmoid(x)
        forward = sigmoid.binding.forward
        if hasattr(forward, "replayer"):
            k = sigmoid.binding.kernels
            timed["  its replaying forward alone"] = lambda: forward(k, x)
            run, leaves = forward.replayer.run, (x,)
            timed["  its replayer's run alone"] = lambda: run(leaves)
    sys.path.insert(0, str(REPO / "scripts"))
    from profile_launch_cpu import compiled_replaying, paired, twin_targets_with_stubbed_driver

    from portkit.launch.kernel_set import KernelSet
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    config = load_config(REPO)
    op = discover(config).get("sigmoid")
    replayed_k = KernelSet("sigmoid", "replayed", "cpu", twin_targets_with_stubbed_driver(op))
    compiled = compiled_replaying(op, replayed_k, config.namespace)
    if compiled is not None:
        for _ in range(3):
            compiled(x)
        timed["portkit.load, compiled replayer"] = lambda: compiled(x)
    timed["torch.empty_like"] = lambda: torch.empty_like(x)
    timed["torch.sigmoid"] = lambda: torch.sigmoid(x)
    for fn in timed.values():  # warm
        for _ in range(200):
            fn()
    # profile_launch_cpu's interleaved rounds; the ratio column is left out here
    results = paired(timed, dict.fromkeys(timed, "torch.sigmoid"), args.calls, args.rounds)
    print(f"torch {torch.__version__}, 1024 float32 on the CPU, launches stubbed")
    for name, us, _ in results:
        print(f"{name:40} {us:7.2f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
