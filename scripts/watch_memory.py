"""Memory of a resident process over many edits: the loop ``portkit watch`` and a
notebook run, measured with tracemalloc (Python allocations) and the process's RSS.

    PYTHONPATH=$PWD python scripts/watch_memory.py [--edits 1000] [--portkit DIR] [--json OUT]
    PYTHONPATH=$PWD python scripts/watch_memory.py --twin --edits 200 --every 20   # GPU

One throwaway project with one op; each edit changes a constant of its kernel, then
``portkit.load(op, "sim")`` (the op as its files are now: the project's session is
refreshed, the prototype imported again, its layout found and the op registered) and
one call of the loaded op on 129 elements, checked against the expected values. Every
``--every`` edits the script collects garbage and prints the traced memory and the RSS.
``--portkit DIR`` runs another checkout's portkit (the commit before a fix) in a child
process, so before and after are measured the same way. docs/design.md records a run.

``--twin`` (a GPU): each edit changes a constant of the op's twin (``cuda_src/``) instead,
then ``portkit.load(op, "twin")`` and one call on the GPU; each row adds the twin
libraries loaded in the process (``driver_launch.loaded_libraries``; before that
existed, the twin backend's table of them) and the GPU memory in use (``cudaMemGetInfo``).

``--twin-cpu`` (no GPU): the same edits of the twin, loaded with ``portkit.load(op,
"twin-cpu")`` (its plain build, compiled and opened in this process); each row adds the
twin's builds mapped in the process now, read from ``/proc/self/maps`` (so a checkout
from before portkit closed replaced builds is measured the same way).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

PROTOTYPE = '''
import portkit
import torch
from numba import cuda

THREADS = 32


@cuda.jit
def mem_scale_fwd(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] * SCALE


@portkit.op(reference=lambda x: x * SCALE, cases=[portkit.cases.custom("float32-n129", [(129,)])])
class MemScale:
    def forward(k, x):
        out = torch.empty_like(x)
        n = x.numel()
        k.mem_scale_fwd[portkit.cdiv(n, THREADS), THREADS](x, out, n)
        return out, ()
'''


TWIN = """
template <typename T>
__global__ void mem_scale_fwd(const T* __restrict__ x, T* __restrict__ out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * T(SCALE);
}
"""


def twin_libraries() -> int:
    """The twin libraries loaded in this process (the backend's table before a portkit
    that counts them)."""
    try:
        from portkit.runtime.driver_launch import loaded_libraries
    except ImportError:
        from portkit.backends.twin import backend

        return len(backend._LIBRARIES)
    return loaded_libraries()


def mapped_builds(cache: Path) -> int:
    """The CPU twin's builds under ``cache`` that this process has mapped (Linux)."""
    names = {line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()}
    return sum(1 for name in names if name.endswith(".so") and name.startswith(str(cache)))


def gpu_used_mib() -> float:
    import torch

    free, total = torch.cuda.mem_get_info()
    return round((total - free) / 2**20, 1)


def rss_mib() -> float:
    """Resident set size of this process (Linux /proc), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(edits: int, every: int, twin: bool = False, backend: str = "twin") -> list[dict]:
    import torch

    import portkit

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pyproject.toml").write_text(
            '[project]\nname = "mem"\nversion = "0"\n\n[tool.portkit]\n'
            'prototypes = "prototypes"\ncuda-src = "cuda_src"\ncache-dir = ".cache"\n'
        )
        (root / "prototypes").mkdir()
        (root / "cuda_src").mkdir()
        os.chdir(root)
        gpu = twin and backend == "twin"
        x = torch.arange(129, dtype=torch.float32, device="cuda" if gpu else "cpu")
        if twin:  # the prototype stays; its launcher launches the twin's kernel
            (root / "prototypes" / "mem_scale.py").write_text(PROTOTYPE.replace("SCALE", "1.0"))
        tracemalloc.start()
        start = time.perf_counter()
        for edit in range(edits + 1):
            scale = 1.0 + edit % 997  # a new constant each edit: a new kernel
            if twin:
                source = TWIN.replace("SCALE", f"{scale!r}")
                (root / "cuda_src" / "mem_scale.cu").write_text(source)
                out = portkit.load("mem_scale", backend)(x)
            else:
                source = PROTOTYPE.replace("SCALE", f"{scale!r}")
                (root / "prototypes" / "mem_scale.py").write_text(source)
                out = portkit.load("mem_scale", "sim")(x)
            assert torch.equal(out, x * scale), edit
            if edit % every == 0:
                gc.collect()
                traced, _ = tracemalloc.get_traced_memory()
                row = {
                    "edits": edit,
                    "traced_mib": round(traced / 2**20, 2),
                    "rss_mib": round(rss_mib(), 1),
                    "seconds": round(time.perf_counter() - start, 1),
                }
                if gpu:
                    row.update(libraries=twin_libraries(), gpu_used_mib=gpu_used_mib())
                elif twin:
                    row.update(libraries=mapped_builds(root.resolve() / ".cache"))
                rows.append(row)
                print(json.dumps(row), flush=True)
        os.chdir("/")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=1000)
    parser.add_argument("--every", type=int, default=100, help="print every N edits")
    parser.add_argument("--portkit", type=Path, default=None, help="another checkout to run")
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    parser.add_argument("--twin", action="store_true", help="edit the twin; run it on a GPU")
    parser.add_argument("--twin-cpu", action="store_true", help="edit the twin; run it on the CPU")
    args = parser.parse_args()
    backend = "twin-cpu" if args.twin_cpu else "twin"
    args.twin = args.twin or args.twin_cpu
    if args.portkit is not None:
        child = [sys.executable, __file__, "--edits", str(args.edits), "--every", str(args.every)]
        child += [f"--{backend}"] if args.twin else []
        env = {**os.environ, "PYTHONPATH": str(args.portkit.resolve())}
        output = subprocess.run(child, env=env, check=True, capture_output=True, text=True)
        rows = [json.loads(line) for line in output.stdout.splitlines() if line.startswith("{")]
        for row in rows:
            print(json.dumps(row))
    else:
        rows = measure(args.edits, args.every, args.twin, backend)
    first, last = rows[0], rows[-1]
    grown = (last["traced_mib"] - rows[min(1, len(rows) - 1)]["traced_mib"]) * 1024
    per_edit = grown / max(1, last["edits"] - rows[min(1, len(rows) - 1)]["edits"])
    print(
        f"{last['edits']} edits: traced {first['traced_mib']} -> {last['traced_mib']} MiB, "
        f"RSS {first['rss_mib']} -> {last['rss_mib']} MiB; "
        f"{per_edit:.1f} KiB traced per edit after the first {args.every}"
        + (
            f"; twin libraries loaded {first['libraries']} -> {last['libraries']}"
            + (
                f", GPU memory in use {first['gpu_used_mib']} -> {last['gpu_used_mib']} MiB"
                if backend == "twin"
                else ""
            )
            if args.twin
            else ""
        )
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
