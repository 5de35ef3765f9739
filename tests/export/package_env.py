"""What the export tests share: portkit's CLI in a project folder, and a fresh virtual
environment to install an exported package into."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "portkit.cli", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def venv_seeing_these_packages(venv: Path) -> Path:
    """A fresh virtual environment that installs into its own site-packages and sees the
    packages this interpreter sees (torch, cuda-bindings); returns its python.

    ``--system-site-packages`` alone reaches the *base* interpreter's packages, and when
    this interpreter is itself a virtual environment (a GPU image's, a developer's) torch
    is not there. So a .pth file in the new environment adds each site directory of this
    interpreter with ``site.addsitedir`` (their own .pth files included), after its own."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    own = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    ours = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    lines = [f"import site; site.addsitedir({p!r})" for p in ours if Path(p).is_dir()]
    (Path(own) / "parent_site_packages.pth").write_text("\n".join(lines) + "\n")
    return python


def project_with(root: Path, names: list[str], namespace: str) -> Path:
    """A project in ``root`` holding the repository's ops ``names`` (prototype and twin),
    registered under ``namespace``, with its cache inside."""
    (root / "prototypes").mkdir(parents=True)
    (root / "cuda_src").mkdir()
    for name in names:
        for folder, suffix in (("prototypes", ".py"), ("cuda_src", ".cu")):
            (root / folder / f"{name}{suffix}").write_text(
                (REPO / folder / f"{name}{suffix}").read_text()
            )
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "p"\nversion = "0"\n[tool.portkit]\nnamespace = "{namespace}"\n'
        'cache-dir = ".cache"\n'
    )
    return root


def install(wheel: str, venv: Path) -> Path:
    """``wheel`` installed offline into a fresh ``venv`` (venv_seeing_these_packages);
    returns its python."""
    python = venv_seeing_these_packages(venv)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps", wheel],
        check=True,
        timeout=300,
    )
    return python


# Source that keeps portkit and numba from importing in the process that runs it: an
# exported package must work without them.
BLOCK_PORTKIT_AND_NUMBA = """
import importlib.abc, sys

class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("portkit", "numba"):
            raise ImportError(f"blocked: {name}")

sys.meta_path.insert(0, _Block())
"""
