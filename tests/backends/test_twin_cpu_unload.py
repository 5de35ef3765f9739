"""The CPU twin in a resident process (``portkit watch --backend twin-cpu``, a notebook):
each edit of a twin loads a new build, and the build it replaces is closed, in this
process (the plain build, ``twin_cpu/loaded.py``) and in the check worker (the sanitized
builds, ``twin_cpu/worker.py``), so the libraries mapped stay bounded however many edits
come. What is mapped is read from ``/proc/<pid>/maps``, not from portkit's own tables."""

from __future__ import annotations

import gc
import struct
from collections import OrderedDict
from pathlib import Path

import pytest
import torch

from portkit.backends.twin_cpu import loaded, worker
from portkit.backends.twin_cpu.build import compile_twin_cpu, find_compiler

pytestmark = [
    pytest.mark.skipif(find_compiler() is None, reason="no C++ compiler"),
    pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux /proc"),
]

SCALE = """\
template <typename T>
__global__ void scale(const T* __restrict__ x, T* __restrict__ out, long long n) {{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * T({factor});
}}
"""


def mapped(folder: Path, pid: int | str = "self") -> set[Path]:
    """The shared libraries under ``folder`` that process ``pid`` has mapped now."""
    found = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        name = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        if name.endswith(".so") and Path(name).is_relative_to(folder):
            found.add(Path(name))
    return found


def edited(twin: Path, factor: int, cache: Path) -> Path:
    """The plain build of ``twin`` edited to scale by ``factor``."""
    twin.write_text(SCALE.format(factor=factor))
    return compile_twin_cpu(twin, ["scale<float>"], cache, "plain").path


def run_in_worker(twin: Path, library: Path, x: torch.Tensor) -> torch.Tensor:
    """One launch of ``scale<float>`` through the worker's own request handling."""
    request = {
        "source": str(twin),
        "build": "pattern",
        "library": str(library),
        "symbol": "portkit_launch_0",
        "grid": (1, 1, 1),
        "block": (32, 1, 1),
        "shared": 0,
        "args": [("buffer", 0), ("buffer", 1), ("value", struct.pack("<q", x.numel()))],
        "buffers": [x.numpy().tobytes(), bytes(4 * x.numel())],
    }
    rc, error, results, _ = worker.run_once(request, worker.STRICT)
    assert rc == 0, error
    return torch.frombuffer(bytearray(results[1]), dtype=torch.float32)


@pytest.fixture
def worker_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker, "_libraries", OrderedDict())
    monkeypatch.setattr(worker, "_builds", {})
    monkeypatch.setattr(worker, "MAX_LIBRARIES", 3)


def test_the_worker_closes_a_replaced_build_and_the_least_recently_used(
    tmp_path: Path, worker_tables: None
) -> None:
    cache = tmp_path / "cache"
    twin = tmp_path / "a" / "scale.cu"
    twin.parent.mkdir()
    x = torch.arange(20.0)
    for factor in range(2, 8):  # six edits of one twin: one build mapped at a time
        library = edited(twin, factor, cache)
        assert torch.equal(run_in_worker(twin, library, x), x * factor)  # the new code
        assert mapped(cache) == {library}
    # Other twins: past MAX_LIBRARIES (3) the twin used least recently is closed.
    others = []
    for name in "bcde":
        other = tmp_path / name / "scale.cu"
        other.parent.mkdir()
        others.append((other, edited(other, ord(name), cache)))
        run_in_worker(*others[-1], x)
    assert mapped(cache) == {path for _, path in others[-3:]}
    assert list(worker._libraries) == [str(path) for _, path in others[-3:]]
    assert torch.equal(run_in_worker(*others[0], x), x * ord("b"))  # closed, opened again
    assert len(mapped(cache)) == 3


def test_the_plain_build_closes_once_no_launch_holds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from portkit.backends.twin.source import parse_twin
    from portkit.backends.twin_cpu.backend import PlainLaunch
    from portkit.backends.twin_cpu.build import CpuLibrary
    from portkit.launch.kernel_set import LaunchConfig

    monkeypatch.setattr(loaded, "_LIBRARIES", OrderedDict())
    cache, twin = tmp_path / "cache", tmp_path / "scale.cu"
    x, config = torch.arange(20.0), LaunchConfig((1, 1, 1), (32, 1, 1))
    launches = []
    for factor in range(2, 6):
        symbols = {"scale<float>": "portkit_launch_0"}
        library = CpuLibrary(edited(twin, factor, cache), symbols, True)
        launch = PlainLaunch(parse_twin(twin)["scale"], library, twin)
        again = PlainLaunch(parse_twin(twin)["scale"], library, twin)
        assert again._library is launch._library  # one build, opened once
        out = torch.empty_like(x)
        launch.launch(config, [x, out, x.numel()])
        assert torch.equal(out, x * factor)  # the new build's code
        launches.append(launch)
        del again
    # Each replaced build is still held by its PlainLaunch: it may launch, so it is open.
    gc.collect()
    assert len(mapped(cache)) == 4
    out = torch.empty_like(x)
    launches[0].launch(config, [x, out, x.numel()])
    assert torch.equal(out, x * 2)
    newest = launches[-1]._library.path
    del launches[:-1], launch
    gc.collect()
    ours = [path for path in loaded.loaded_libraries() if path.is_relative_to(cache)]
    assert mapped(cache) == {newest} and ours == [newest]


def test_the_check_worker_of_a_resident_backend_stays_bounded(
    make_project, load_op, sources
) -> None:
    """End to end: the sanitized check builds of three versions of a twin, launched by
    one backend (one worker process), leave only the newest version's builds mapped."""
    from portkit.backends import create
    from portkit.launch.compose import compose_kernels

    root = make_project(
        {"grow": (sources.unary_op("grow", cases=sources.ONE_CASE), sources.unary_twin("grow"))}
    )
    config, op = load_op(root, "grow")
    backend = create("twin-cpu", config)
    cache = (root / ".portkit-cache").resolve()
    x, before = torch.arange(40.0), set[Path]()
    for factor in (2, 3, 4):
        (root / "cuda_src" / "grow.cu").write_text(
            sources.unary_twin("grow", f"out[i] = x[i] * T({factor});")
        )
        _, op = load_op(root, "grow")
        k = compose_kernels(backend, op, checked=True)
        out = k.empty_like(x)
        k.grow_fwd[2, 32](x, out, 40)
        assert torch.equal(out, x * factor)
        builds = mapped(cache, backend._worker._process.pid)
        assert 1 <= len(builds) <= 2, builds  # the pattern build and the zeroed one
        assert builds.isdisjoint(before), builds  # the last version's were closed
        before = builds
    assert len(list(cache.rglob("grow-check*.so"))) >= 3  # older builds stay cached on disk
