"""The repository's workflows and docs/ci.md's example parse as YAML, and every flag they
give portkit or pytest is one that command's ``--help`` lists."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml
from click.testing import CliRunner

from portkit.cli import main
from tests.test_plugin import plugin_args

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def documents() -> dict[str, dict]:
    """Every workflow file, and every YAML block of docs/ci.md, parsed."""
    found = {path.name: yaml.safe_load(path.read_text()) for path in WORKFLOWS}
    text = (ROOT / "docs" / "ci.md").read_text()
    for k, block in enumerate(re.findall(r"```yaml\n(.*?)```", text, re.S)):
        found[f"docs/ci.md yaml block {k + 1}"] = yaml.safe_load(block)
    return found


def run_scripts(document: dict) -> list[str]:
    return [
        step["run"]
        for job in document["jobs"].values()
        for step in job["steps"]
        if isinstance(step, dict) and "run" in step
    ]


def commands(script: str) -> list[tuple[str, list[str]]]:
    """(command, its flags) for every portkit and pytest call of a `run:` script; the
    command is "pytest" or the portkit subcommand ("check")."""
    found = []
    for line in script.replace("\\\n", " ").splitlines():
        for segment in re.split(r"&&|\|\||;|\|", line):
            words = shlex.split(segment)
            redirect = next((k for k, w in enumerate(words) if w.startswith(">")), len(words))
            words = words[:redirect]
            if "pytest" in words:
                rest = words[words.index("pytest") + 1 :]
                found.append(("pytest", [w for w in rest if w.startswith("-")]))
            for name in ("portkit", "portkit.cli"):
                if name in words and words.index(name) + 1 < len(words):
                    at = words.index(name)
                    flags = [w for w in words[at + 2 :] if w.startswith("-")]
                    found.append((words[at + 1], flags))
    return found


def test_the_workflows_and_the_docs_example_parse():
    docs = documents()
    assert {"cpu.yml", "gpu.yml"} <= set(docs)
    assert any(name.startswith("docs/ci.md") for name in docs)
    for name, document in docs.items():
        assert document["jobs"], name
        for job in document["jobs"].values():
            assert "runs-on" in job and job["steps"], name


def test_the_workflows_shard_the_suite_and_carry_the_verdicts():
    for name in ("cpu.yml", "docs/ci.md yaml block 1"):
        document = documents()[name]
        scripts = " ".join(run_scripts(document))
        assert "--phase cpu --verdicts verdicts.json" in scripts
        (sharded,) = [j for j in document["jobs"].values() if "strategy" in j]
        shards = sharded["strategy"]["matrix"]["shard"]
        assert "--portkit-shard ${{ matrix.shard }}/" + str(len(shards)) in scripts
    gpu = documents()["gpu.yml"]["jobs"]["gpu-phase"]
    assert gpu["needs"] == "cpu-phase" and "gpu" in gpu["runs-on"]
    assert "--phase gpu --verdicts verdicts.json" in " ".join(run_scripts({"jobs": {"g": gpu}}))


def helps() -> dict[str, str]:
    texts = {}
    for sub in ("check", "sim", "bench", "lint"):
        texts[sub] = CliRunner().invoke(main, [sub, "--help"], terminal_width=200).output
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *plugin_args(), "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    texts["pytest"] = done.stdout
    return texts


def test_every_flag_the_workflows_use_exists():
    text = helps()
    used = {
        (command, flag.split("=", 1)[0])
        for document in documents().values()
        for script in run_scripts(document)
        for command, flags in commands(script)
        for flag in flags
    }
    for expected in [("check", "--all"), ("check", "--sanitize"), ("pytest", "-n")]:
        assert expected in used  # the scripts were read, not skipped
    assert ("pytest", "--portkit-shard") in used and ("pytest", "--portkit-durations") in used
    missing = sorted(
        (command, flag)
        for command, flag in used
        if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text[command])
    )
    assert not missing, missing


def test_the_gpu_phase_keeps_the_compiled_kernels_between_runs():
    """numba compiling the prototypes is most of a fresh GPU phase (docs/verdict-cache.md):
    the cache folder is restored before the phase and saved after it."""
    for name in ("gpu.yml", "docs/ci.md yaml block 1"):
        jobs = documents()[name]["jobs"]
        steps = jobs["gpu-phase"]["steps"]
        uses = [s.get("uses", "") for s in steps]
        restore, save = uses.index("actions/cache/restore@v4"), uses.index("actions/cache/save@v4")
        phase = next(k for k, s in enumerate(steps) if "--phase gpu" in s.get("run", ""))
        assert restore < phase < save, name
        assert steps[restore]["with"]["path"] == steps[save]["with"]["path"] == "~/.cache/portkit"
