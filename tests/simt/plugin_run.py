"""Run pytest with portkit's plugin in a child process, on a test file written for it."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path


def run_pytest(folder: Path, name: str, source: str, *options: str) -> subprocess.CompletedProcess:
    (folder / name).write_text(source)
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    # The plugin comes in through its entry point where portkit is installed; by name
    # elsewhere (a checkout on PYTHONPATH, as on the GPU machine).
    installed = any(e.name == "portkit" for e in entry_points(group="pytest11"))
    plugin = [] if installed else ["-p", "portkit.pytest_plugin"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, *options],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
