"""``portkit mutate`` end to end: mutants run against an op's cases in a temporary copy,
killed / survived / stillborn, exit codes, bad input, and the user's files untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portkit.mutate.model import KILLED, KINDS, STILLBORN, SURVIVED, Mutant

REPO = Path(__file__).resolve().parents[2]
# Sizes 1 and 129 (not multiples of the 32-thread block): guards matter.
EDGE_CASES = (
    "portkit.cases.elementwise(sizes=(1, 129), large=None, gradcheck=False, "
    'dtypes=("float32",))'
)
# Only multiples of the block: a removed guard is never seen.
ROUND_CASES = '[portkit.cases.custom("float32-n64", [(64,)])]'


def twin_cpu_missing() -> str | None:
    from portkit.backends.twin_cpu.build import compiler_unavailable_reason

    return compiler_unavailable_reason()


needs_cxx = pytest.mark.skipif(twin_cpu_missing() is not None, reason="no C++ compiler")


def document(result) -> dict:
    return json.loads(result.stdout)


def test_kind_names_of_the_cli_are_the_model_kinds():
    from portkit.cli.mutate import KIND_NAMES

    assert KIND_NAMES == tuple(KINDS)


@needs_cxx
def test_guards_removed_are_killed_by_cases_past_the_block(make_project, sources, cli):
    # a print() at import (run again for every prototype mutant) must not corrupt --json
    noisy = 'print("hello from mg1")\n' + sources.unary_op("mg1", cases=EDGE_CASES)
    root = make_project({"mg1": (noisy, sources.unary_twin("mg1"))})
    before = {p: p.read_text() for p in root.rglob("*.py")} | {
        p: p.read_text() for p in root.rglob("*.cu")
    }
    result = cli(root, "mutate", "mg1", "--kinds", "guard", "--json")
    assert result.exit_code == 0, result.output
    (op,) = document(result)["ops"]
    assert (op["killed"], op["survived"], op["stillborn"]) == (2, 0, 0)
    by = {m["side"]: m["by"] for m in op["mutants"]}
    assert by["prototype"].startswith("sim forward float32-n1")
    # the first backend to run the twin kills it: the GPU twin where there is a GPU
    assert by["twin"].startswith(("twin-cpu forward", "twin forward"))
    assert any("out-of-bounds" in m["detail"] for m in op["mutants"])
    assert "hello from mg1" in result.stderr
    after = {p: p.read_text() for p in before}
    assert after == before  # the user's files were never written
    # and the mutants' twin builds went to a cache folder of the run's own
    assert not (root / ".portkit-cache" / "twins-cpu").exists()


@needs_cxx
def test_a_survivor_fails_the_run_and_says_what_would_kill_it(make_project, sources, cli):
    root = make_project(
        {"mg2": (sources.unary_op("mg2", cases=ROUND_CASES), sources.unary_twin("mg2"))}
    )
    result = cli(root, "mutate", "mg2", "--kinds", "guard", "--json")
    assert result.exit_code == 1
    (op,) = document(result)["ops"]
    assert op["survived"] == 2 and op["survival"] == 1.0
    assert all("n % 256 != 0" in m["detail"] for m in op["mutants"])
    relaxed = cli(root, "mutate", "mg2", "--kinds", "guard", "--max-survivors", "1")
    assert relaxed.exit_code == 0
    assert "survived" in relaxed.output and "more than" not in relaxed.output


def test_no_mutant_of_the_kinds_asked_for_exits_3(make_project, sources, cli):
    root = make_project({"mg3": (sources.unary_op("mg3", cases=ROUND_CASES), None)})
    result = cli(root, "mutate", "mg3", "--kinds", "atomic")
    assert result.exit_code == 3
    assert "nothing ran" in result.output


def test_an_op_that_fails_its_own_checks_is_not_mutated(make_project, sources, cli):
    wrong = sources.unary_op("mg4", reference="lambda x: x * 3", cases=EDGE_CASES)
    root = make_project({"mg4": (wrong, None)})
    result = cli(root, "mutate", "mg4", "--kinds", "guard")
    assert result.exit_code == 1
    assert "mg4 fails its own check before any mutation (sim forward" in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["mutate", "nosuch"], "nosuch"),
        (["mutate", "mg5", "--kinds", "barrier,nosuch"], "unknown mutation kind(s) nosuch"),
        (["mutate"], "name one or more OPs"),
    ],
    ids=["unknown-op", "unknown-kind", "no-op"],
)
def test_mistakes_are_one_line_and_exit_2(make_project, sources, cli, args, message):
    root = make_project({"mg5": (sources.unary_op("mg5"), None)})
    result = cli(root, *args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


@needs_cxx
def test_a_twin_mutant_that_does_not_compile_is_stillborn(make_project, sources, load_op):
    from portkit.backends import create_all
    from portkit.mutate.runner import MutationRun, run_mutants

    prototype = sources.unary_op("mg6", cases=ROUND_CASES)
    root = make_project({"mg6": (prototype, sources.unary_twin("mg6"))})
    config, op = load_op(root, "mg6")
    run = MutationRun(op, config, create_all(config, ["sim", "twin-cpu"]), quick=True)
    twin = sources.unary_twin("mg6").replace("long long i =", "no_such_type i =")
    broken = Mutant("int32", "twin", "cuda_src/mg6.cu", 3, "no such type", twin)
    (result,) = run_mutants(run, [broken])
    assert (result.status, result.by) == (STILLBORN, "twin-cpu compile"), result.detail


@needs_cxx
def test_repository_vector_add_tail_mutants_are_killed(cli):
    """The repository's own op, two mutants (the twin's and the prototype's tail loop)."""
    result = cli(REPO, "mutate", "vector_add", "--quick", "--kinds", "tail", "--json")
    assert result.exit_code == 0, result.output
    (op,) = document(result)["ops"]
    assert op["killed"] == 2 and op["survived"] == 0
    assert {m["file"] for m in op["mutants"]} == {
        "cuda_src/vector_add.cu",
        "prototypes/vector_add.py",
    }


def test_mutate_help_imports_nothing_heavy():
    import subprocess
    import sys

    child = (
        "import json, sys\n"
        "from portkit.cli import main\n"
        "try:\n    main(['mutate', '--help'], prog_name='portkit')\n"
        "except SystemExit as exc:\n    code = exc.code\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('torch', 'numba', 'cupy')]\n"
        "print('RESULT=' + json.dumps([code, heavy]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", child], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT="))
    assert json.loads(line.removeprefix("RESULT=")) == [0, []]
    assert "--max-survivors" in proc.stdout


def second_row_sum_barrier(op_name: str) -> int:
    """The line of row_sum's second ``cuda.syncthreads()`` in the op's prototype."""
    lines = (REPO / "prototypes" / f"{op_name}.py").read_text().splitlines()
    start = next(i for i, text in enumerate(lines) if text.startswith("def row_sum"))
    barriers = [i + 1 for i in range(start, len(lines)) if "cuda.syncthreads()" in lines[i]]
    return barriers[1]


@pytest.mark.parametrize(
    "op_name, older",
    [
        ("rmsnorm", ("float32-37x64", "float32-4x1000")),
        ("add_rmsnorm", ("float32-37x64", "float16-150x41", "float32-4x1000")),
    ],
)
def test_the_case_added_kills_the_dropped_row_sum_barrier(op_name, older):
    """docs/mutate.md: row_sum's second barrier dropped survived every case until
    float32-20x1000 (4-warp backward blocks looping over rows)."""
    from portkit.backends import create_all
    from portkit.mutate.runner import MutationRun, mutants_of, run_mutants
    from portkit.project.session import Session

    line = second_row_sum_barrier(op_name)

    session = Session.from_environment(REPO)
    op = session.op(op_name)
    sim = create_all(session.config, ["sim"])
    (barrier,) = [
        m
        for m in mutants_of(op, session.config, {"barrier"})
        if m.file == f"prototypes/{op_name}.py" and m.line == line
    ]

    def judged(*cases: str):
        run = MutationRun(op, session.config, sim, case_names=frozenset(cases))
        (result,) = run_mutants(run, [barrier])
        return result

    assert judged(*older).status == SURVIVED
    found = judged("float32-20x1000")
    assert (found.status, found.by) == (KILLED, "sim backward float32-20x1000")
    assert "data race" in found.detail


def test_case_that_the_op_lacks_is_one_line(make_project, sources, cli):
    root = make_project({"mg7": (sources.unary_op("mg7"), None)})
    result = cli(root, "mutate", "mg7", "--case", "nosuch")
    assert result.exit_code == 2 and "has no case 'nosuch'" in result.output
