"""Shared fixtures: throwaway portkit projects in ``tmp_path`` and tiny op sources.

Every op written here is small (at most 129 elements, 32-thread blocks) because the
simulator runs a few thousand threads per second. Op names are unique per test
(discovery registers prototypes as ``portkit_ops.<name>``), and each test's
catalogs and modules are dropped afterwards, so projects never leak into each other.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest_plugins = ["pytester"]

# On a GPU machine the driver's JIT cache (~/.nv/ComputeCache) answers a compile it has
# seen with no ptxas -v report, which lint's resource figures read (tests/lint/
# test_resources.py, H100 2026-11-24); `portkit lint` turns the cache off the same way.
# Set before any test initialises CUDA: the driver reads it once.
os.environ.setdefault("CUDA_CACHE_DISABLE", "1")
# Tests of the checks themselves must run them: a pass stored by an earlier run of the
# same throwaway project (then monkeypatched) would be served instead. The verdict
# store's own tests turn it on (tests/check/test_verdicts*.py); users have it on.
os.environ.setdefault("PORTKIT_VERDICT_CACHE", "0")

# One or two cases, small enough for the simulator.
SMALL_CASES = (
    'portkit.cases.elementwise(sizes=(1, 129), large=None, special=(), dtypes=("float32",))'
)
ONE_CASE = '[portkit.cases.custom("float32-n129", [(129,)])]'

_PROTOTYPE = """\
import math

import torch
from numba import cuda

import portkit

THREADS = {threads}


@cuda.jit
def {name}_fwd(x, out, n):
    i = cuda.grid(1)
    if {bound}:
{body}

{extra_kernels}

@portkit.op(reference={reference}, cases={cases}{op_options})
class Op{classname}:
    def forward(k, x):
        out = k.empty_like(x)
        n = x.numel()
        if n:
            k.{name}_fwd[{grid}, {block}](x, out, n)
        return out, (x,)
{backward}"""

_BACKWARD = """
    def backward(k, saved, dy):
        (x,) = saved
        dx = k.empty_like(x)
        n = x.numel()
        if n:
            k.{name}_bwd[portkit.cdiv(n, THREADS), THREADS](x, dy, dx, n)
        return (dx,)
"""

_BACKWARD_KERNEL = """
@cuda.jit
def {name}_bwd(x, dy, dx, n):
    i = cuda.grid(1)
    if i < n:
{body}
"""

_TWIN = """\
template <typename T>
__global__ void {name}_fwd(const T* __restrict__ x, T* __restrict__ out, long long n) {{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{
        {body}
    }}
}}
{extra}"""

_TWIN_BACKWARD = """
template <typename T>
__global__ void {name}_bwd(const T* __restrict__ x, const T* __restrict__ dy, T* __restrict__ dx,
                           long long n) {{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{
        {body}
    }}
}}
"""


def unary_op(
    name: str,
    body: str = "out[i] = x[i] * 2.0",
    *,
    reference: str = "lambda x: x * 2",
    bound: str = "i < n",
    cases: str = SMALL_CASES,
    backward: str | None = None,
    op_options: str = "",
    threads: int = 32,
    grid: str = "portkit.cdiv(n, THREADS)",
    block: str = "THREADS",
    extra_kernels: str = "",
) -> str:
    """A prototype file for a one-input elementwise op: kernel ``<name>_fwd(x, out, n)``
    (and ``<name>_bwd(x, dy, dx, n)`` when ``backward`` gives its body)."""
    indent = " " * 8
    fwd_body = textwrap.indent(textwrap.dedent(body).strip(), indent)
    extra = extra_kernels
    backward_method = ""
    if backward is not None:
        extra += _BACKWARD_KERNEL.format(
            name=name, body=textwrap.indent(textwrap.dedent(backward).strip(), indent)
        )
        backward_method = _BACKWARD.format(name=name)
    return _PROTOTYPE.format(
        name=name,
        classname=name.title().replace("_", ""),
        body=fwd_body,
        bound=bound,
        reference=reference,
        cases=cases,
        op_options=f", {op_options}" if op_options else "",
        threads=threads,
        grid=grid,
        block=block,
        extra_kernels=extra,
        backward=backward_method,
    )


def unary_twin(
    name: str, body: str = "out[i] = x[i] * T(2);", *, backward: str | None = None
) -> str:
    """The C CUDA twin of ``unary_op(name, ...)``."""
    extra = _TWIN_BACKWARD.format(name=name, body=backward) if backward else ""
    return _TWIN.format(name=name, body=body, extra=extra)


def make_project_at(
    root: Path,
    ops: dict[str, tuple[str | None, str | None]],
    *,
    portkit_table: str | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    """Write a project: pyproject.toml, prototypes/<op>.py and cuda_src/<op>.cu.

    ``ops`` maps an op name to (prototype source, twin source); None leaves a file out.
    The twin cache lives inside the project so tests never touch the user's cache.
    """
    root.mkdir(parents=True, exist_ok=True)
    if portkit_table is None:
        portkit_table = (
            'prototypes = "prototypes"\ncuda-src = "cuda_src"\ncache-dir = ".portkit-cache"\n'
        )
    (root / "pyproject.toml").write_text(
        '[project]\nname = "throwaway"\nversion = "0"\n\n[tool.portkit]\n' + portkit_table
    )
    (root / "prototypes").mkdir(exist_ok=True)
    (root / "cuda_src").mkdir(exist_ok=True)
    for name, (py, cu) in ops.items():
        if py is not None:
            (root / "prototypes" / f"{name}.py").write_text(py)
        if cu is not None:
            (root / "cuda_src" / f"{name}.cu").write_text(cu)
    for relative, text in (files or {}).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def make_project(tmp_path: Path) -> Callable[..., Path]:
    """``make_project({"op": (py, cu)}, ...)`` -> the project root (under ``tmp_path``
    unless ``at`` names the folder)."""
    counter = iter(range(1000))

    def make(ops, *, at: Path | None = None, **options) -> Path:
        return make_project_at(at or tmp_path / f"project{next(counter)}", ops, **options)

    return make


@pytest.fixture
def sources() -> SimpleNamespace:
    """Source builders and constants for tiny ops."""
    return SimpleNamespace(
        unary_op=unary_op,
        unary_twin=unary_twin,
        SMALL_CASES=SMALL_CASES,
        ONE_CASE=ONE_CASE,
    )


@pytest.fixture
def randn_seeds(monkeypatch) -> list:
    """The generator seed of every ``torch.randn`` call from here on (None: no generator),
    for tests that count the random draws a check makes."""
    import torch

    seeds: list = []
    real_randn = torch.randn

    def randn(*args, generator=None, **kwargs):
        seeds.append(generator.initial_seed() if generator is not None else None)
        return real_randn(*args, generator=generator, **kwargs)

    monkeypatch.setattr(torch, "randn", randn)
    return seeds


@pytest.fixture
def ptx_compiles(monkeypatch) -> list[str]:
    """The name of every kernel numba's ``compile_ptx`` compiles from here on, for tests
    that count the compiles a type check makes."""
    from numba.cuda import compiler

    compiled: list[str] = []
    real = compiler.compile_ptx

    def counting(py_func, *args, **kwargs):
        compiled.append(py_func.__name__)
        return real(py_func, *args, **kwargs)

    monkeypatch.setattr(compiler, "compile_ptx", counting)
    return compiled


@pytest.fixture
def load_op():
    """``load_op(root, name)`` -> (config, Op) of a project, discovered from ``root`` by a
    fresh session (with the environment's settings, as a command would have)."""
    from portkit.project.session import Session

    def load(root: Path, name: str):
        session = Session.from_environment(root, require=False)
        return session.config, session.op(name)

    return load


@pytest.fixture
def cli(monkeypatch):
    """``cli(root, *args)`` runs the portkit command in-process from ``root``."""
    from click.testing import CliRunner

    from portkit.cli import main

    def invoke(root: Path, *args: str, input: str | None = None):
        monkeypatch.chdir(root)
        result = CliRunner().invoke(
            main, list(args), input=input, catch_exceptions=True, prog_name="portkit"
        )
        # portkit turns every user error into a message and an exit code; any other
        # exception escaping a command would have printed a traceback.
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            import traceback

            raise AssertionError(
                "the CLI raised instead of reporting:\n"
                + "".join(traceback.format_exception(result.exception))
            )
        return result

    return invoke


def run_portkit(cwd: Path, *args: str, input: str | None = None, timeout: float = 120):
    """The portkit CLI in a fresh process (for stdin/pdb and import checks)."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "portkit.cli", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.fixture
def portkit_process() -> Callable[..., subprocess.CompletedProcess]:
    return run_portkit
