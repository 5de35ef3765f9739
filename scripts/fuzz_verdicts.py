"""Re-run the fuzz list of false greens and mistakes (docs/verdicts.md), as a user
would: a throwaway project per case, the portkit command as its console script runs it
(the project not on sys.path), and a table of each case's exit code and last line, for
one or two portkit source trees (before and after a change).

    python scripts/fuzz_verdicts.py                      # this tree
    python scripts/fuzz_verdicts.py --before /tmp/old    # and an older tree (git archive)

Each command runs with a 300 s timeout; the 4 GiB shared array with a 6 GiB address-space
limit too (it must not take the machine; the other cases run without one, since
AddressSanitizer's twin-cpu reserves far more address space than that). A device file is
made with mknod in the case's own folder, never /dev/null: an old tree may replace
whatever --out names.
"""

from __future__ import annotations

import argparse
import os
import resource
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cli.test_mistakes import HELPER, SHARED, mul_op  # noqa: E402
from tests.conftest import ONE_CASE, make_project_at, unary_op, unary_twin  # noqa: E402

HERE = Path(__file__).resolve().parents[1]
LIMIT = 6 << 30
TABLE = 'prototypes = "prototypes"\ncuda-src = "cuda_src"\ncache-dir = ".portkit-cache"\n'


def op(name: str, twin: bool = True, **options: str) -> dict:
    return {name: (unary_op(name, cases=ONE_CASE, **options), unary_twin(name) if twin else None)}


def project(root: Path, ops: dict, **options) -> Path:
    return make_project_at(root, ops, **options)


def mknod(path: Path) -> str:
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return str(path)


Case = tuple[str, Callable[[Path], tuple[Path, list[str]]], str]


def cases() -> list[Case]:
    """(what, setup(folder) -> (project, command), what a pass looks like)."""
    sig = unary_twin("fz_sig").replace("long long n)", "long long n, int extra)")
    helped = unary_op(
        "fz_help", "out[i] = _fz_h.scale(x[i])", cases=ONE_CASE, reference="lambda x: x * 3"
    ).replace("import portkit\n", "import portkit\nimport _fz_h\n")
    raw = 'import os\nos.write(1, b"raw\\n")\n' + unary_op("fz_raw", cases=ONE_CASE)

    def nan_tolerance(r: Path) -> tuple[Path, list[str]]:
        options = 'tolerances=[portkit.Tolerance(rtol=0, atol=float("nan"), reason="r")]'
        return project(r, op("fz_tol", False, op_options=options)), [
            "check", "fz_tol", "--backend", "sim", "--no-compile"
        ]

    def twins_cpu_file(r: Path) -> tuple[Path, list[str]]:
        root = project(r, op("fz_cache"))
        (root / ".portkit-cache").mkdir()
        (root / ".portkit-cache" / "twins-cpu").write_text("a file")
        return root, ["check", "fz_cache", "--backend", "twin-cpu", "--no-compile"]

    def port_to(target: Callable[[Path], str]) -> Callable[[Path], tuple[Path, list[str]]]:
        def setup(r: Path) -> tuple[Path, list[str]]:
            root = project(r, op("fz_port", False))
            return root, ["port", "fz_port", "--force", "--out", target(root)]

        return setup

    def fifo(root: Path) -> str:
        os.mkfifo(root / "fifo.cu")
        return str(root / "fifo.cu")

    def blocked(root: Path) -> str:
        (root / "a-file").write_text("")
        return str(root / "a-file" / "x.cu")

    return [
        ("backward returns None for a gradient the reference has",
         lambda r: (project(r, {"fz_drop": (mul_op("fz_drop"), None)}),
                    ["check", "fz_drop", "--backend", "sim", "--no-compile"]), "1"),
        ("400 KB static shared memory: sim",
         lambda r: (project(r, {"fz_sh": (SHARED.format(name="fz_sh", size=100000, threads=32),
                                          None)}), ["sim", "fz_sh"]), "1"),
        ("400 KB static shared memory: check",
         lambda r: (project(r, {"fz_sh": (SHARED.format(name="fz_sh", size=100000, threads=32),
                                          None)}),
                    ["check", "fz_sh", "--backend", "sim", "--no-compile"]), "1"),
        ("4 GiB shared array: sim",
         lambda r: (project(r, {"fz_gig": (SHARED.format(name="fz_gig", size="1 << 30",
                                                         threads=32), None)}),
                    ["sim", "fz_gig"]), "1"),
        ("2048 threads per block: sim",
         lambda r: (project(r, {"fz_thr": (SHARED.format(name="fz_thr", size=32, threads=2048),
                                           None)}), ["sim", "fz_thr"]), "1"),
        ("typo in [tool.portkit] cuda-src",
         lambda r: (project(r, op("fz_typo"), portkit_table=TABLE.replace(
             '"cuda_src"', '"cuda-src"')), ["check", "--all", "--no-compile"]), "2"),
        ("typo in [tool.portkit] prototypes",
         lambda r: (project(r, op("fz_typo2"), portkit_table=TABLE.replace(
             '"prototypes"', '"protos"')), ["check", "--all", "--no-compile"]), "2"),
        ("check --backend sim,twin without a GPU",
         lambda r: (project(r, op("fz_tw")),
                    ["check", "fz_tw", "--backend", "sim,twin", "--no-compile"]), "3"),
        ("watch --case nosuch",
         lambda r: (project(r, op("fz_w")), ["watch", "--case", "nosuch", "--runs", "1"]), "3"),
        ("watch OP --case nosuch",
         lambda r: (project(r, op("fz_w")), ["watch", "fz_w", "--case", "nosuch", "--runs", "1"]),
         "2"),
        ("watch --backend twin without a GPU",
         lambda r: (project(r, op("fz_w")), ["watch", "fz_w", "--backend", "twin", "--runs", "1"]),
         "3"),
        ("diff of an op without a twin file",
         lambda r: (project(r, op("fz_bare", False)), ["diff", "fz_bare"]), "3"),
        ("export of a twin whose parameters do not match",
         lambda r: (project(r, {"fz_sig": (unary_op("fz_sig", cases=ONE_CASE), sig)}),
                    ["export", "fz_sig", "--out", str(r / "out")]), "2"),
        ("port --force --out FIFO", port_to(fifo), "2"),
        ("port --force --out device file (mknod'd copy of /dev/null)",
         port_to(lambda root: mknod(root / "null.cu")), "2"),
        ("port --force --out the op's prototype",
         port_to(lambda root: str(root / "prototypes" / "fz_port.py")), "2"),
        ("port --out under a file (unwritable folder)", port_to(blocked), "2"),
        ("Tolerance(atol=nan)", nan_tolerance, "2"),
        ("--budget 0.000001",
         lambda r: (project(r, op("fz_bud", False)), ["sim", "fz_bud", "--budget", "0.000001"]),
         "1"),
        ("export --name of 300 characters",
         lambda r: (project(r, op("fz_n")),
                    ["export", "fz_n", "--out", str(r / "o"), "--name", "k" * 300]), "2"),
        *[
            (f"export --name {name}",
             (lambda name: lambda r: (project(r, op("fz_n")),
                                      ["export", "fz_n", "--out", str(r / "o"),
                                       "--name", name]))(  # noqa: B023 (bound by the outer lambda)
                 name), "2")
            for name in ("_x", "café", "__init__")
        ],
        ("twins-cpu cache folder unusable (a file)", twins_cpu_file, "0"),
        ("prototype importing a helper beside it (console script)",
         lambda r: (project(r, {"fz_help": (helped, None)},
                            files={"prototypes/_fz_h.py": HELPER}),
                    ["check", "fz_help", "--backend", "sim", "--no-compile"]), "0"),
        ("os.write(1, ...) at import with list --json",
         lambda r: (project(r, {"fz_raw": (raw, None)}), ["list", "--json"]), "0 json"),
    ]


KEY = ("raised", "still running", "returns None", "not run", "error:", "portkit:")


def run(tree: Path, root: Path, command: list[str], limited: bool) -> str:
    script = root.parent / "portkit-command.py"
    script.write_text(
        f"import sys\nsys.path.insert(1, {str(tree)!r})\n"
        "from portkit.cli import main\nsys.exit(main())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["COLUMNS"] = "200"
    limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))  # noqa: E731
    try:
        proc = subprocess.run(
            [sys.executable, str(script), *command], cwd=root, capture_output=True, text=True,
            env=env, timeout=300, preexec_fn=limit if limited else None,
        )
    except subprocess.TimeoutExpired:
        return "timeout (300 s)"
    code = str(proc.returncode)
    if command[-1] == "--json" and proc.returncode == 0:
        import json

        try:
            json.loads(proc.stdout)
            code += " json"
        except ValueError:
            code += " corrupt json"
    lines = [x for x in (proc.stderr + proc.stdout).splitlines() if x.strip()]
    traceback = any(x.startswith("Traceback") for x in lines)
    fallback = lines[-1] if lines else ""
    last = next((x for x in reversed(lines) if any(k in x for k in KEY)), fallback)
    return f"{code}{' TRACEBACK' if traceback else ''}: {last.strip()[:150]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="an older portkit tree to run first")
    args = parser.parse_args()
    trees = [("before", args.before)] if args.before else []
    trees.append(("after", HERE))
    print("| case | wanted | " + " | ".join(name for name, _ in trees) + " |")
    print("|---|---|" + "---|" * len(trees))
    for what, setup, wanted in cases():
        cells = []
        for _, tree in trees:
            with tempfile.TemporaryDirectory(prefix="portkit-fuzz-") as tmp:
                root, command = setup(Path(tmp) / "project")
                cells.append(run(tree, root, command, "GiB" in what).replace("|", "/"))
        print(f"| {what} | {wanted} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
