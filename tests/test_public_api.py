"""The public names import the way the README and docs/authoring.md write them."""

from __future__ import annotations

import subprocess
import sys


def test_cases_helpers_import_from_the_module():
    from portkit.cases import custom, elementwise, rows

    assert custom("one", [(3,)], "float32").name == "one"
    assert callable(elementwise) and callable(rows)


def test_simt_is_an_attribute_of_portkit_after_a_plain_import():
    code = "import portkit; print(portkit.simt.simulate.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "simulate"


def test_portkit_offers_every_error_the_launch_contract_promises_launchers():
    """A launcher's ``portkit.X`` names (the contract's LAUNCHER_NAMES) are portkit's own
    objects, OpDefinitionError included, so code written against portkit catches what
    an exported package raises."""
    import portkit
    import portkit.runtime
    from portkit.runtime import launch_contract

    for name in launch_contract.LAUNCHER_NAMES:
        assert getattr(portkit, name) is getattr(portkit.runtime, name), name
        if hasattr(launch_contract, name):  # knobs lives beside it (runtime/knob_choice.py)
            assert getattr(portkit, name) is getattr(launch_contract, name), name
        assert name in portkit.__all__, name
