"""Every repository path the docs name exists: backticked paths (`portkit/x/y.py`,
`scripts/z.py`, `docs/a.md`) in README.md, docs/*.md, results/*.md, scripts/README.md
and portkit's docstrings, and the relative targets of Markdown links in those pages. A
file that moved leaves a doc pointing nowhere; this test names the doc, the line and the
path."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("portkit/", "scripts/", "docs/", "tests/", "prototypes/", "cuda_src/", "results/",
         ".ci/", ".github/")
BACKTICKED = re.compile(r"`([A-Za-z0-9_./-]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`]*`")
PLACEHOLDER = re.compile(r"(?:^|/)[A-Z]+(?:\.|/|$)")

# Paths the docs name on purpose that are not in this repository: files a reader is told
# to create, and pages other branches add (drop each here once it has merged).
NOT_IN_THE_REPOSITORY = {
    "prototypes/scale.py",  # the tutorial's op, written by the reader
    "cuda_src/scale.cu",
    "cuda_src/my_op.cu",  # `portkit port --help`'s example
}


# Backticked paths relative to a folder the text names (`lockstep/engine.py` in a page
# about portkit/simt/): they must still end some file's path in the repository. Paths in
# other projects are named by their first folder here.
OTHER_PROJECTS = ("_inductor/", "doc_examples/")
RELATIVE = re.compile(r"^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+\.(?:py|cpp|h|cu|md|txt|sh)$")


def repository_files() -> list[str]:
    return [
        str(path.relative_to(REPO))
        for path in REPO.rglob("*")
        if path.is_file() and ".git" not in path.parts
    ]


def ends_no_file(token: str, files: list[str]) -> bool:
    if token.startswith(ROOTS) or token.startswith(OTHER_PROJECTS) or PLACEHOLDER.search(token):
        return False
    if not RELATIVE.match(token):
        return False
    return not any(f == token or f.endswith("/" + token) for f in files)


def doc_files() -> list[Path]:
    return [
        REPO / "README.md",
        REPO / "scripts" / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
        *sorted((REPO / "results").glob("*.md")),
    ]


def named_path(token: str) -> str | None:
    """The repository path a backticked token names, or None if it names none."""
    path = token.split(":", 1)[0].split("#", 1)[0].rstrip(".,")
    if not path.startswith(ROOTS) or "/" not in path.rstrip("/"):
        return None
    if PLACEHOLDER.search(path):  # `cuda_src/OP.cu`: any op's file, not one file
        return None
    return path


def missing_in(text: str, where: str, base: Path) -> list[str]:
    missing = []
    fenced = False  # inside a ``` block: code, whose brackets are no markdown links
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        for token in BACKTICKED.findall(line):
            path = named_path(token)
            if path and path not in NOT_IN_THE_REPOSITORY and not (REPO / path).exists():
                missing.append(f"{where}:{number}: `{token}`")
        for target in [] if fenced else LINK.findall(CODE_SPAN.sub("", line)):
            if target.startswith(("http://", "https://", "mailto:", "#")):
                continue
            path = target.split("#", 1)[0]
            resolved = (base / path).resolve()
            relative = resolved.relative_to(REPO) if resolved.is_relative_to(REPO) else None
            if str(relative) in NOT_IN_THE_REPOSITORY:
                continue
            if not resolved.exists():
                missing.append(f"{where}:{number}: link ({target})")
    return missing


def docstrings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc and node.body:
                found.append((node.body[0].lineno, doc))
    return found


def test_every_path_in_the_docs_exists():
    missing = []
    for doc in doc_files():
        where = str(doc.relative_to(REPO))
        missing += missing_in(doc.read_text(), where, doc.parent)
    assert not missing, "docs name paths that do not exist:\n" + "\n".join(missing)


def test_every_relative_path_in_the_docs_ends_a_file():
    files = repository_files()
    missing = [
        f"{doc.relative_to(REPO)}:{number}: `{token}`"
        for doc in doc_files()
        for number, line in enumerate(doc.read_text().splitlines(), 1)
        for token in BACKTICKED.findall(line)
        if ends_no_file(token, files)
    ]
    assert not missing, "docs name files that moved:\n" + "\n".join(missing)


def test_a_relative_path_that_moved_is_found():
    files = ["portkit/checking/compare.py", "portkit/simt/lockstep/engine.py"]
    assert ends_no_file("check/compare.py", files)
    assert not ends_no_file("lockstep/engine.py", files)
    assert not ends_no_file("checking/compare.py", files)
    assert not ends_no_file("_inductor/runtime/x.py", files)


PLAIN_PATH = re.compile(r"(?<![\w/.-])([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+)")


def test_every_path_in_portkit_docstrings_exists():
    """Backticked or not: a docstring's `portkit/x.py`, docs/y.md or checking/z.py."""
    files = repository_files()
    missing = []
    for module in sorted((REPO / "portkit").rglob("*.py")):
        where = str(module.relative_to(REPO))
        for line, doc in docstrings(module):
            for token in set(PLAIN_PATH.findall(doc.replace("`", " "))):
                token = token.rstrip(".,:;")
                path = named_path(token)
                if path and path not in NOT_IN_THE_REPOSITORY and not (REPO / path).exists():
                    missing.append(f"{where}:{line}: {token}")
                elif ends_no_file(token, files):
                    missing.append(f"{where}:{line}: {token}")
    assert not missing, "docstrings name paths that do not exist:\n" + "\n".join(missing)


def test_the_checker_finds_a_moved_file():
    text = (
        "see `scripts/no_such_script.py` and [the page](no-such-page.md), not `cuda_src/OP.cu`"
        " nor `f[a](*args)`\n"
    )
    missing = missing_in(text, "x.md", REPO / "docs")
    assert missing == [
        "x.md:1: `scripts/no_such_script.py`",
        "x.md:1: link (no-such-page.md)",
    ]
