"""Run the third-party kernel files under one simulator and describe each outcome.

    python -m tests.simt.third_party.runner --table      # both simulators, a Markdown table
    python -m tests.simt.third_party.runner --gpu        # on a GPU: numba there vs portkit
    NUMBA_ENABLE_CUDASIM=1 python -m tests.simt.third_party.runner --numba OUT.pickle

An outcome is a dict: ``status`` "ok" (``values``: the arrays ``run()`` returned) or
"raised" (``error``: the exception's type name, ``types``: the names of its classes,
``message``: its first line); ``warnings``: the kinds of portkit's simulator warnings
(none under numba's simulator); ``seconds``: the wall time of ``run()``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pickle
import subprocess
import sys
import time
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from tests.simt.third_party import FOLDER, kernel_files

# Kept red: portkit reports what numba's simulator lets pass (docs/numba-world.md).
PORTKIT_RED = {
    "stumpy_gpu_stump": (
        "x[i - 1] at i == 0: a computed negative index (QT_in[-1], T_A[-1]); numba on a GPU "
        "wraps it and the kernel overwrites the value it stored, so stumpy's result is right "
        "on a GPU, but a C port reads before the array; portkit reports every computed "
        "negative index (a boundary bug, almost always)"
    ),
}
# Where numba on a GPU and portkit's simulator differ by design (docs/numba-world.md,
# measured on an H200, 2026-11-27): the kind of difference ("values": both ran, results
# differ in the last bits; "portkit raises") and why. Anything else is a new difference.
GPU_DIFFERS = {
    "nc_cudapy_matmul": ("values", "the GPU contracts a*b+c into an FMA; 1 ULP of float32"),
    "nc_cudapy_blackscholes": ("values", "libdevice's exp/log/sqrt: float64, about 1e-15"),
    "nc_doc_ufunc": ("values", "the GPU's sin: 1 ULP of float32"),
    "stumpy_gpu_stump": ("portkit raises", "kept red on purpose (PORTKIT_RED)"),
}


def gpu_difference_kind(gpu: dict[str, Any], mine: dict[str, Any]) -> str:
    """How a GPU outcome and portkit's differ, in GPU_DIFFERS's words."""
    if gpu["status"] == "ok" and mine["status"] == "ok":
        want, got = gpu["values"], mine["values"]
        alike = want.keys() == got.keys() and all(
            want[k].shape == got[k].shape and want[k].dtype == got[k].dtype for k in want
        )
        return "values" if alike else "outputs"
    if gpu["status"] == "ok":
        return "portkit raises"
    return "the GPU raises"


def expected_on_gpu(stem: str, gpu: dict[str, Any], mine: dict[str, Any]) -> str | None:
    """Why a difference is expected, or None for a new one."""
    kind, why = GPU_DIFFERS.get(stem, ("", ""))
    return why if kind and kind == gpu_difference_kind(gpu, mine) else None


ROOT = FOLDER.parents[2]


def load(path: Path, tag: str) -> ModuleType:
    """A fresh import of ``path`` (its ``@cuda.jit`` runs again under the switch now on)."""
    spec = importlib.util.spec_from_file_location(f"_third_party_{tag}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import would (a kernel may refer to its module)
    spec.loader.exec_module(module)
    return module


def _outcome(path: Path, tag: str) -> dict[str, Any]:
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            module = load(path, tag)
            values = module.run()
        except Exception as exc:  # the outcome compared: the exception's type
            return {
                "status": "raised",
                "error": type(exc).__name__,
                "types": [c.__name__ for c in type(exc).__mro__],
                "message": (str(exc).splitlines() or [""])[0][:300],
                "warnings": _kinds(caught),
                "seconds": time.perf_counter() - start,
            }
    outcome = {
        "status": "ok",
        "values": {k: np.asarray(v) for k, v in values.items()},
        "warnings": _kinds(caught),
        "seconds": time.perf_counter() - start,
    }
    if tag == "portkit" and hasattr(module, "expected"):  # what a GPU gives (the source's)
        outcome["expected"] = {k: np.asarray(v) for k, v in module.expected().items()}
    return outcome


def _kinds(caught: list[warnings.WarningMessage]) -> list[str]:
    from portkit.simt.warning_log import SimulatorWarning

    kinds = set()
    for w in caught:  # "[kind] kernel K: detail ..."
        if issubclass(w.category, SimulatorWarning):
            kinds.add(str(w.message).split("]", 1)[0].lstrip("["))
    return sorted(kinds)


def portkit_outcome(path: Path) -> dict[str, Any]:
    """``path``'s driver under portkit's simulator (in this process)."""
    from portkit.simt import simulated_cuda

    with simulated_cuda():
        return _outcome(path, "portkit")


def numba_outcomes(paths: list[Path], timeout: float = 600) -> dict[str, dict[str, Any]]:
    """Every file's driver under numba's simulator, in one child process."""
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"third_party_numba_{os.getpid()}.pickle"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "tests.simt.third_party.runner", "--numba", str(out)]
    command += [p.stem for p in paths]
    try:
        subprocess.run(
            command, cwd=ROOT, env=env, check=True, timeout=timeout, capture_output=True, text=True
        )
        return pickle.loads(out.read_bytes())
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"numba's simulator run failed:\n{exc.stderr[-3000:]}") from None
    finally:
        out.unlink(missing_ok=True)


def same(numba: dict[str, Any], portkit: dict[str, Any]) -> str:
    """ "" when the two outcomes agree, else how they differ (one line)."""
    if numba["status"] == "raised":
        if portkit["status"] == "raised" and numba["error"] in portkit["types"]:
            return ""
        return f"numba's simulator raised {numba['error']}; portkit's: {describe(portkit)}"
    if portkit["status"] == "raised":
        return f"numba's simulator ran; portkit's raised {portkit['error']}: {portkit['message']}"
    if numba["values"].keys() != portkit["values"].keys():
        return "different outputs"
    for name, want in numba["values"].items():
        got = portkit["values"][name]
        if want.shape != got.shape or want.dtype != got.dtype:
            return f"{name}: {got.dtype}{got.shape} against numba's {want.dtype}{want.shape}"
        if not np.array_equal(want, got, equal_nan=want.dtype.kind in "fc"):
            bad = np.flatnonzero(
                ~np.isclose(want, got, rtol=0, atol=0, equal_nan=True).ravel()
                if want.dtype.kind in "fc"
                else (want != got).ravel()
            )
            first = int(bad[0]) if bad.size else 0
            return (
                f"{name} differs in {bad.size} element(s), first at flat index {first}: "
                f"{got.ravel()[first]!r} against numba's {want.ravel()[first]!r}"
            )
    return ""


def describe(outcome: dict[str, Any]) -> str:
    if outcome["status"] == "raised":
        return f"raises {outcome['error']}"
    return "ran" + (f" (warning: {', '.join(outcome['warnings'])})" if outcome["warnings"] else "")


def _child(out: Path, stems: list[str]) -> int:
    from numba.cuda.core import config

    assert config.ENABLE_CUDASIM, "run with NUMBA_ENABLE_CUDASIM=1"
    results = {stem: _outcome(FOLDER / f"{stem}.py", "numba") for stem in stems}
    out.write_bytes(pickle.dumps(results))
    return 0


def _table() -> int:
    paths = kernel_files()
    numba = numba_outcomes(paths)
    print("| kernel file | numba's simulator | portkit's | agree |\n|---|---|---|---|")
    for path in paths:
        mine = portkit_outcome(path)
        differs = same(numba[path.stem], mine)
        print(
            f"| {path.stem} | {describe(numba[path.stem])} | {describe(mine)} "
            f"({mine['seconds']:.1f} s) | {differs or 'yes'} |",
            flush=True,
        )
    return 0


def _gpu_table(stems: list[str]) -> int:
    """Each driver on a real GPU with numba (no simulator) beside portkit's simulator:
    the same values (or exception type), or how they differ. Exits 1 on a difference that
    GPU_DIFFERS does not expect."""
    from numba import cuda

    if not cuda.is_available():
        print("no CUDA GPU: --gpu runs the drivers on a GPU with numba")
        return 3
    paths = [FOLDER / f"{s}.py" for s in stems] if stems else kernel_files()
    gpu = {p.stem: _outcome(p, "gpu") for p in paths}  # before the switch is ever on
    print("| kernel file | GPU (numba) | portkit's simulator | agree |\n|---|---|---|---|")
    new = 0
    for path in paths:
        mine = portkit_outcome(path)
        differs = same(gpu[path.stem], mine)
        if differs:
            why = expected_on_gpu(path.stem, gpu[path.stem], mine)
            new += why is None
            differs = f"expected ({why}): {differs}" if why else f"NEW: {differs}"
        print(
            f"| {path.stem} | {describe(gpu[path.stem])} | {describe(mine)} | {differs or 'yes'} |",
            flush=True,
        )
    print(f"{new} new difference(s); expected ones: docs/numba-world.md")
    return 1 if new else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--numba", type=Path, help="child mode: write the outcomes here")
    parser.add_argument("--table", action="store_true")
    parser.add_argument("--gpu", action="store_true", help="on a GPU: numba there vs portkit")
    parser.add_argument("stems", nargs="*")
    args = parser.parse_args()
    if args.numba:
        return _child(args.numba, args.stems or [p.stem for p in kernel_files()])
    if args.gpu:
        return _gpu_table(args.stems)
    return _table()


if __name__ == "__main__":
    raise SystemExit(main())
