"""``import portkit`` and ``portkit --help`` stay instant: no torch, numba or CUDA library
is imported until a command runs an op."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("torch", "numba", "cupy", "cuda.core", "cuda.bindings")
REPO = Path(__file__).resolve().parents[2]

CHILD = """
import json, sys

import portkit
import portkit.cli
import portkit.pytest_plugin
from portkit.cli import main

codes = []
for args in (["--help"], ["--version"], ["sim", "--help"], ["check", "--help"],
             ["list", "--help"], ["compile", "--help"]):
    try:
        main(args, prog_name="portkit")
    except SystemExit as exc:
        codes.append(exc.code)
print("MODULES=" + json.dumps(sorted(sys.modules)))
print("CODES=" + json.dumps(codes))
"""


def heavy(modules) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_import_and_help_load_nothing_heavy():
    proc = subprocess.run(
        [sys.executable, "-c", CHILD],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line[:8])
    modules = json.loads(lines["MODULES"])
    assert "portkit.cli" in modules and "click" in modules
    assert heavy(modules) == []
    assert json.loads(lines["CODES"]) == [0, 0, 0, 0, 0, 0]
    assert "portkit: one op, three implementations, one check." in proc.stdout
    assert "Run OP's prototype in the CUDA simulator" in proc.stdout


def test_python_m_portkit_cli_help_imports_nothing_heavy():
    """The real entry point, traced by the interpreter itself (-X importtime)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "portkit.cli", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage:")
    assert "portkit sim sigmoid" in proc.stdout
    imported = [
        line.split("|")[-1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    ]
    assert "click" in imported  # the trace did record the imports
    assert heavy(imported) == []
