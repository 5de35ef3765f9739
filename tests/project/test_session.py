"""A Session: the project, the environment's settings read once, and a catalog that a
resident process refreshes after an edit (portkit/project/session.py)."""

from __future__ import annotations

import sys

import pytest
import torch

from portkit.errors import OpNotFound
from portkit.project.environment import Settings
from portkit.project.session import Session


def simulated(session: Session, name: str, x: torch.Tensor) -> torch.Tensor:
    """The op's forward, as the session has it now, run in the simulator."""
    from portkit.backends import create

    op = session.op(name)
    outputs, _ = op.definition.forward(create("sim", session.config).kernels(op), x)
    return outputs


def edit(path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))  # same length: mtime and size may not tell


def test_a_resident_session_sees_an_edited_kernel_after_refresh(make_project, sources):
    root = make_project({"res_edit": (sources.unary_op("res_edit", cases=sources.ONE_CASE), None)})
    session = Session.from_environment(root)
    x = torch.arange(5.0)
    assert torch.equal(simulated(session, "res_edit", x), x * 2)
    first = session.op("res_edit")
    edit(root / "prototypes" / "res_edit.py", "x[i] * 2.0", "x[i] * 7.0")
    assert session.op("res_edit") is first  # nothing changes behind the session's back
    assert session.refresh() == ["res_edit"]
    assert torch.equal(simulated(session, "res_edit", x), x * 7)
    assert session.op("res_edit").kernels["res_edit_fwd"] is not first.kernels["res_edit_fwd"]
    assert session.refresh() == []  # nothing changed since


def test_refresh_forgets_only_what_changed_and_sees_files_come_and_go(make_project, sources):
    ops = {
        name: (sources.unary_op(name, cases=sources.ONE_CASE), sources.unary_twin(name))
        for name in ("res_a", "res_b")
    }
    root = make_project(ops)
    session = Session.from_environment(root)
    kept, twin_edited = session.op("res_a"), session.op("res_b")
    (root / "cuda_src" / "res_b.cu").write_text(sources.unary_twin("res_b") + "\n// edited\n")
    (root / "prototypes" / "res_c.py").write_text(sources.unary_op("res_c"))
    assert session.refresh() == ["res_b"]
    assert session.op("res_a") is kept and session.op("res_b") is not twin_edited
    assert session.catalog.names == ["res_a", "res_b", "res_c"]
    (root / "prototypes" / "res_a.py").unlink()
    (root / "cuda_src" / "res_a.cu").unlink()
    assert session.refresh() == ["res_a"]
    with pytest.raises(OpNotFound):
        session.op("res_a")


def test_refresh_imports_an_edited_helper_module_again(make_project, sources, monkeypatch):
    helper = (
        "from numba import cuda\n\n\n@cuda.jit(device=True)\ndef scale(v):\n    return v * 3.0\n"
    )
    py = sources.unary_op(
        "res_helped", "out[i] = res_helpers.scale(x[i])", cases=sources.ONE_CASE
    ).replace("import portkit\n", "import portkit\nimport res_helpers\n")
    root = make_project({"res_helped": (py, None)}, files={"res_helpers.py": helper})
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delitem(sys.modules, "res_helpers", raising=False)
    session = Session.from_environment(root)
    x = torch.arange(4.0)
    assert torch.equal(simulated(session, "res_helped", x), x * 3)
    edit(root / "res_helpers.py", "v * 3.0", "v * 4.0")
    assert session.refresh() == ["res_helped"]
    assert torch.equal(simulated(session, "res_helped", x), x * 4)
    sys.modules.pop("res_helpers", None)


def test_settings_come_from_the_environment_given_and_travel_to_a_child():
    assert Settings.from_environment({}) == Settings()
    environ = {
        "PORTKIT_PROTOTYPE_CACHE": "off",
        "PORTKIT_SIMT_ENGINE": "per-thread",
        "PORTKIT_SIM_MATH": "numpy",
        "PORTKIT_REPLAY": "0",
        "PORTKIT_PIN_GPUS": "0",
    }
    settings = Settings.from_environment(environ)
    assert settings == Settings(False, "per-thread", "numpy", "off", False)
    assert Settings.from_environment(settings.as_environment()) == settings
    assert Settings().as_environment() == {}
    assert Settings.from_environment({"PORTKIT_REPLAY": "python"}).replay == "python"


def test_a_session_passes_its_settings_down_with_the_config(make_project, sources):
    root = make_project({"res_set": (sources.unary_op("res_set"), None)})
    session = Session.from_environment(root, environ={"PORTKIT_SIMT_ENGINE": "per-thread"})
    assert session.config.settings.simt_engine == "per-thread"
    session.configure(prototype_cache=False)
    assert session.settings == Settings(prototype_cache=False, simt_engine="per-thread")
    assert session.catalog.config is session.config


def test_an_unknown_engine_is_one_line_at_the_start(cli, make_project, sources, monkeypatch):
    root = make_project({"res_eng": (sources.unary_op("res_eng"), None)})
    monkeypatch.setenv("PORTKIT_SIMT_ENGINE", "fast")
    result = cli(root, "sim", "res_eng")
    assert result.exit_code == 2
    assert result.output.strip() == (
        "error: PORTKIT_SIMT_ENGINE='fast' is not one of auto, lockstep, per-thread"
    )


def test_portkit_load_runs_the_refreshed_op_of_a_session(make_project, sources):
    import portkit

    root = make_project({"res_load": (sources.unary_op("res_load", cases=sources.ONE_CASE), None)})
    session = Session.from_environment(root)
    x = torch.arange(4.0)
    assert torch.equal(portkit.load("res_load", "sim", session=session)(x), x * 2)
    edit(root / "prototypes" / "res_load.py", "x[i] * 2.0", "x[i] * 9.0")
    session.refresh()
    assert torch.equal(portkit.load("res_load", "sim", session=session)(x), x * 9)


def test_what_a_prototype_defines_pickles_by_name(make_project, sources):
    """pickle imports a function's module by name; torch.compile's cache pickles what a
    reference refers to. Without an importable ``portkit_ops`` parent, every prototype
    function was 'import of module portkit_ops.<op> failed'."""
    import pickle

    prototype = sources.unary_op("pickled", cases=sources.ONE_CASE)
    root = make_project({"pickled": (prototype + "\n\ndef helper():\n    return 1\n", None)})
    Session.from_environment(root).op("pickled")
    helper = sys.modules["portkit_ops.pickled"].helper
    assert pickle.loads(pickle.dumps(helper)) is helper
