"""Lay the ops written from the docs out as a portkit project, to run any portkit command
on them (the ops here are kept as `<op>_prototype.py` + `<op>_twin.cu`, so that pytest
does not collect them as one project's prototypes):

    python -m tests.user_ops.project /tmp/user-ops          # every op here
    python -m tests.user_ops.project /tmp/user-ops embedding masked_softmax
    cd /tmp/user-ops && portkit check --all --seeds 20

The folder gets pyproject.toml ([tool.portkit] prototypes, cuda-src, a cache inside it),
prototypes/OP.py and cuda_src/OP.cu; files already there are replaced.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.user_ops.op_files import HERE, sources

PYPROJECT = """[project]
name = "user-ops"
version = "0"

[tool.portkit]
prototypes = "prototypes"
cuda-src = "cuda_src"
cache-dir = ".portkit-cache"
"""


def user_ops() -> list[str]:
    """Every op kept here, by name."""
    return sorted(p.name.removesuffix("_prototype.py") for p in HERE.glob("*_prototype.py"))


def write_project(root: Path, ops: list[str] | None = None) -> Path:
    """``root`` as a project of ``ops`` (default: all of them)."""
    (root / "prototypes").mkdir(parents=True, exist_ok=True)
    (root / "cuda_src").mkdir(exist_ok=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    for op in ops or user_ops():
        prototype, twin = sources(op)
        (root / "prototypes" / f"{op}.py").write_text(prototype)
        (root / "cuda_src" / f"{op}.cu").write_text(twin)
    return root


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    unknown = sorted(set(argv[1:]) - set(user_ops()))
    if unknown:
        print(
            f"error: no user op {', '.join(unknown)}; ops: {', '.join(user_ops())}", file=sys.stderr
        )
        return 2
    root = write_project(Path(argv[0]), argv[1:] or None)
    print(f"wrote {root}: {', '.join(argv[1:] or user_ops())}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
