"""tests/user_ops/project.py lays the ops written from the docs out as a project, so that
`portkit check --all --seeds 20` (on a GPU too) runs them like any project's ops."""

from __future__ import annotations

from tests.user_ops.project import main, user_ops, write_project


def test_every_op_here_is_laid_out_and_discovered(tmp_path, load_op):
    ops = user_ops()
    assert {"masked_softmax", "scatter_add", "bias_gelu", "segment_sum"} <= set(ops)
    root = write_project(tmp_path / "p")
    for op in ops:
        assert (root / "prototypes" / f"{op}.py").is_file()
        assert (root / "cuda_src" / f"{op}.cu").is_file()
    _, op = load_op(root, "scatter_add")
    assert op.name == "scatter_add" and op.definition.cases


def test_a_subset_and_mistakes(tmp_path, capsys):
    assert main([str(tmp_path / "q"), "bias_gelu"]) == 0
    assert [p.name for p in (tmp_path / "q" / "prototypes").iterdir()] == ["bias_gelu.py"]
    assert main([str(tmp_path / "r"), "nosuch"]) == 2
    assert "no user op nosuch" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    assert main([]) == 2
