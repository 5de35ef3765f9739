"""The README's "Add an op" tour, run as written: a newcomer's op works with no change
to portkit. The code blocks are read from README.md, so the README cannot drift."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_block(after: str, language: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(after)
    match = re.compile(rf"```{language}\n(.*?)```", re.S).search(text, start)
    assert match, f"no ```{language} block after {after!r} in README.md"
    return match.group(1)


def test_readme_tour_op_passes_check_without_touching_portkit(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "tour"\n\n[tool.portkit]\n')
    (tmp_path / "prototypes").mkdir()
    (tmp_path / "cuda_src").mkdir()
    (tmp_path / "prototypes" / "scale.py").write_text(readme_block("prototypes/scale.py", "python"))
    (tmp_path / "cuda_src" / "scale.cu").write_text(readme_block("cuda_src/scale.cu", "cuda"))
    env_cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    command = [
        sys.executable,
        "-m",
        "portkit.cli",
        "check",
        "scale",
        "--case",
        "float32-n129",
        "--case",
        "float64-gradcheck",
        "--case",
        "float64-n0",
    ]
    done = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, env={**_env(), **env_cache}
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 failed" in done.stdout
    # The compile checks ran for both sides, the simulator ran forward, backward, gradcheck.
    for expected in ("compile sm_90", "forward", "backward", "gradcheck"):
        assert expected in done.stdout


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)
