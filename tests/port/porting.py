"""Port a kernel written in a test: its source as a module, launches described by the
tensors and scalars they pass, the draft compiled with NVRTC (sm_90, no GPU needed)
and with the CPU twin's compiler."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import numba
import torch

from portkit.launch.kernel_set import LaunchConfig
from portkit.launch.trace import Launch, TensorArg, numba_type
from portkit.port.draft import Draft, draft_kernels
from portkit.project.dtypes import dtype_name

HEADER = "import math\n\nimport numba\nfrom numba import cuda, float32, float64, int32, int64\n\n"


def launch(kernel: str, grid, block, *args) -> Launch:
    """A launch record like the one tracing makes."""
    dims = lambda v: (tuple(v) + (1, 1, 1))[:3] if isinstance(v, tuple) else (v, 1, 1)  # noqa: E731
    signature = tuple(
        numba_type(a) if isinstance(a, torch.Tensor) else numba.typeof(a) for a in args
    )
    described = tuple(
        TensorArg(dtype_name(a.dtype), tuple(a.shape)) if isinstance(a, torch.Tensor) else a
        for a in args
    )
    return Launch(kernel, LaunchConfig(dims(grid), dims(block)), signature, described)


def port(tmp_path: Path, source: str, *launches: Launch, name: str = "k") -> Draft:
    """The draft of every kernel of ``source`` (a module's body after HEADER)."""
    path = tmp_path / f"{name}_proto.py"
    path.write_text(HEADER + textwrap.dedent(source))
    module_name = f"portkit_port_test_{name}_{abs(hash(str(tmp_path)))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    kernels = {
        k: v
        for k, v in vars(module).items()
        if hasattr(v, "py_func") and not getattr(v, "targetoptions", {}).get("device")
    }
    by_kernel: dict[str, list[Launch]] = {}
    for record in launches:
        by_kernel.setdefault(record.kernel, []).append(record)
    return draft_kernels(name, path.name, kernels, by_kernel)


def function(draft: Draft, name: str) -> str:
    """The lines of one function of the draft, from its header to its closing brace,
    without the prototype-line comments."""
    lines = draft.text.splitlines()
    start = next(i for i, line in enumerate(lines) if f" {name}(" in line and "{" in line)
    if start and lines[start - 1].startswith("template"):
        start -= 1
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    return "\n".join(line.split("  //")[0].rstrip() for line in lines[start : end + 1])


def compile_both(tmp_path: Path, draft: Draft, expressions: list[str]) -> None:
    """Compile the draft with NVRTC for sm_90 and with the CPU twin's compiler; either
    raises TwinCompileError with its log."""
    from portkit.backends.twin.build import compile_twin
    from portkit.backends.twin_cpu.build import compile_twin_cpu, find_compiler

    src = tmp_path / "draft"
    src.mkdir(exist_ok=True)
    path = src / f"{draft.op}.cu"
    path.write_text(draft.text)
    compile_twin(path, expressions, tmp_path / "cache")
    if find_compiler() is not None:
        compile_twin_cpu(path, expressions, tmp_path / "cache", "plain")
