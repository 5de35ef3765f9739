"""The backend registry imports a built-in backend's module only when it is created."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from portkit import backends
from portkit.backends.base import Backend

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", list(backends._BUILTINS))
def test_each_builtin_entry_names_its_class(name):
    cls = backends.backend_class(name)
    assert issubclass(cls, Backend) and cls.name == name
    assert cls.default == backends._BUILTINS[name][2]
    assert (name in backends.default_names()) == cls.default


def test_names_keep_their_order_and_unknown_names_are_one_error():
    assert backends.names()[:6] == ["torch", "sim", "numba", "twin", "twin-cpu", "numba-sim"]
    with pytest.raises(backends.PortkitError, match="unknown backend 'nope'; backends: torch"):
        backends.backend_class("nope")


def test_a_builtin_name_cannot_be_taken_before_the_builtin_loads():
    class Impostor(Backend):
        name, role, device, description = "twin", "twin", "cuda", "not the twin"

        def _probe(self):
            return None

        def launch_targets(self, op):
            raise NotImplementedError

    with pytest.raises(TypeError, match="already registered"):
        backends.register(Impostor)


def test_a_backend_of_the_old_interface_is_told_what_to_change():
    """``kernels(op, poison_outputs=...)`` was the interface before launch targets: the
    error names the method to write instead (docs/design.md: why not an adapter)."""

    class Old(Backend):
        name, role, device, description = "old-style", "twin", "cpu", "before launch targets"

        def _probe(self):
            return None

        def kernels(self, op, *, poison_outputs=False):
            raise NotImplementedError

    with pytest.raises(TypeError) as raised:
        backends.register(Old)
    message = str(raised.value)
    assert "\n" not in message and "old-style" in message
    assert "defines kernels(op, poison_outputs=...)" in message
    assert "rename it launch_targets(op)" in message and "docs/add-a-backend.md" in message
    assert "old-style" not in backends.names()

    class Empty(Backend):
        name, role, device, description = "empty", "twin", "cpu", "no targets at all"

        def _probe(self):
            return None

    with pytest.raises(TypeError, match=r"^backend empty must define launch_targets\(op\)"):
        backends.register(Empty)


def test_creating_the_simulator_imports_no_other_backend():
    child = (
        "import sys; from portkit.project.config import load_config;"
        "from portkit.backends import create; create('sim', load_config());"
        "print(sorted(m for m in sys.modules if m.startswith('portkit.backends.')))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", child], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stdout
    assert "portkit.backends.sim" in loaded
    for other in ("twin.backend", "twin_cpu", "numba_sim", "numba_gpu"):
        assert f"portkit.backends.{other}" not in loaded, loaded
