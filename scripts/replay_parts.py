"""Where a replayed call's time goes, on a GPU: the compiled replayer's ``run`` with
recordings that do less and less (nothing; one allocation; one launch; both), beside
torch's own ``empty_like`` and torch's C++ launcher, in interleaved rounds; and the
same forward through ``torch.ops`` (the op's C++ kernels, whose counts it prints).

    python scripts/replay_parts.py [--n 1024] [--calls 5000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from types import SimpleNamespace

import torch

import portkit
from portkit.bench.timing import host_rounds
from portkit.runtime.native_replayer import native_replayer
from portkit.runtime.recorder import record
from portkit.runtime.replaying import RecordingKernels
from portkit.runtime.steps import RecordedLaunch, Recording


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()

    sigmoid = portkit.load("sigmoid", "twin")
    x = torch.randn(args.n, device="cuda")
    out = torch.empty_like(x)
    sigmoid(x)  # the twin's plan for float32, so the call below records
    kernels = sigmoid.binding.kernels
    launcher = sigmoid.binding.forward.__wrapped__  # the op's own forward launcher
    _, recording, reason, _ = record(RecordingKernels(kernels), launcher, (x,), (x,))
    assert recording is not None, reason
    (launch,) = recording.launches
    meta = recording.allocations
    device = recording.device

    def replayer(allocations, launches, result, leaves):
        r = native_replayer()
        assert r is not None
        assert r.add(leaves, Recording(device, allocations, launches, result))
        return lambda: r.run(leaves)

    # The launch writes into a second leaf instead of a buffer: refs 0 and 1.
    into_out = RecordedLaunch(launch.step, ((launch.refs[0][0], 0), (launch.refs[1][0], 1)))
    # The same launch with the CUfunction of the current context in place of the library's
    # CUkernel (which the driver resolves per context on each launch): is that cheaper?
    from cuda.bindings import driver

    err, function = driver.cuKernelGetFunction(driver.CUkernel(launch.step.function))
    assert err == driver.CUresult.CUDA_SUCCESS, err
    by_function = SimpleNamespace(handle=int(function), packed=launch.step.driver.packed)
    step_f = dataclasses.replace(launch.step, driver=by_function)
    into_out_f = RecordedLaunch(step_f, into_out.refs)
    static = torch._C._StaticCudaLauncher._launch_kernel
    step = launch.step
    values = (x.data_ptr(), out.data_ptr(), *[v for v in step.values if v is not None])
    timed = {
        "run: key and result only": replayer((), (), (0,), (x,)),
        "run: one allocation": replayer(meta, (), (-1,), (x,)),
        "run: one launch": replayer((), (into_out,), (1,), (x, out)),
        "run: one launch, CUfunction": replayer((), (into_out_f,), (1,), (x, out)),
        "run: allocation + launch (the replay)": replayer(meta, (launch,), (-1,), (x,)),
        "portkit.load forward (replayed)": lambda: sigmoid(x),
        "torch.ops forward (C++ kernels)": lambda: sigmoid.op(x),
        "torch.empty_like": lambda: torch.empty_like(x),
        "torch StaticCudaLauncher": lambda: static(
            step.function, *step.grid, step.warps, 0, step.driver._static_codes, values, 0
        ),
        "torch StaticCudaLauncher, CUfunction": lambda: static(
            int(function), *step.grid, step.warps, 0, step.driver._static_codes, values, 0
        ),
        "torch.sigmoid": lambda: torch.sigmoid(x),
    }
    for fn in timed.values():
        for _ in range(200):
            fn()
    torch.cuda.synchronize()
    seconds = host_rounds(
        timed, rounds=args.rounds, calls=args.calls, finish=torch.cuda.synchronize
    )
    samples = {name: [s * 1e6 for s in values] for name, values in seconds.items()}
    torch.testing.assert_close(sigmoid(x), torch.sigmoid(x))
    torch.testing.assert_close(sigmoid.op(x), torch.sigmoid(x))
    from portkit.runtime.registration import _NATIVE

    native = _NATIVE.get(sigmoid.registered.qualname)
    print("torch.ops's C++ kernels:", native.counts() if native else "not registered")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, n={args.n}")
    for name, values_us in samples.items():
        print(f"{name:40} {statistics.median(values_us):6.2f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
