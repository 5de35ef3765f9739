"""portkit/cache_files.py: entries that check what they serve, unusable cache folders
and the sweep of what killed runs left."""

from __future__ import annotations

import json
import os
import time

import pytest

from portkit import cache_files
from portkit.cache_files import load, manifest_path, store, sweep_stale, usable_folder


def test_store_then_load_round_trips(tmp_path):
    artifact = tmp_path / "sub" / "k.cubin"
    store(artifact, b"\x7fELF body", {"symbols": {"k<float>": "_Z1k"}})
    assert load(artifact) == (b"\x7fELF body", {"symbols": {"k<float>": "_Z1k"}})
    record = json.loads(manifest_path(artifact).read_text())
    assert record["size"] == 9 and len(record["sha256"]) == 64
    store(tmp_path / "t.json", '{"a": 1}')
    assert load(tmp_path / "t.json") == (b'{"a": 1}', {})


def test_store_moves_a_finished_file(tmp_path):
    built = tmp_path / "build.so"
    built.write_bytes(b"library")
    store(tmp_path / "lib.so", built)
    assert not built.exists()
    assert load(tmp_path / "lib.so")[0] == b"library"


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda a: a.write_bytes(a.read_bytes()[:3]), "digest mismatch (3 bytes, manifest says 9)"),
        (lambda a: a.write_bytes(b"123456789"), "digest mismatch (9 bytes, manifest says 9)"),
        (lambda a: a.unlink(), "unreadable (FileNotFoundError"),
        (lambda a: manifest_path(a).write_text("{not json"), "unreadable (JSONDecodeError"),
    ],
)
def test_a_damaged_entry_is_a_miss_said_in_one_line(tmp_path, capsys, damage, words):
    artifact = tmp_path / "k.ptx"
    store(artifact, b"ptx body!")
    damage(artifact)
    assert load(artifact) is None
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"portkit: cache entry {artifact} is damaged: {words}")
    assert line.endswith("; rebuilding it")
    assert not artifact.exists() and not manifest_path(artifact).exists()


def test_an_artifact_without_manifest_is_a_silent_miss(tmp_path, capsys):
    (tmp_path / "k.cubin").write_bytes(b"half-committed")
    assert load(tmp_path / "k.cubin") is None
    assert capsys.readouterr().err == ""


def test_stale_temporaries_are_swept_fresh_ones_kept(tmp_path):
    old = time.time() - 2 * cache_files.STALE_SECONDS
    stale_build = tmp_path / ".build-abc"
    stale_build.mkdir()
    (stale_build / "x.cpp").write_text("int x;")
    stale_file = tmp_path / ".k.cubin.123.tmp"
    stale_file.write_bytes(b"half")
    fresh_build = tmp_path / ".build-new"
    fresh_build.mkdir()
    entry = tmp_path / "k.cubin"
    entry.write_bytes(b"kept")
    hidden_other = tmp_path / ".keep"
    hidden_other.write_text("not ours")
    for path in (stale_build, stale_file, entry, hidden_other):
        os.utime(path, (old, old))
    sweep_stale(tmp_path)
    assert not stale_build.exists() and not stale_file.exists()
    assert fresh_build.exists() and entry.exists() and hidden_other.exists()


def test_an_unusable_folder_is_said_once_and_replaced(tmp_path, capsys):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file")
    first = usable_folder(blocked / "portkit", "set by XDG_CACHE_HOME")
    again = usable_folder(blocked / "portkit", "set by XDG_CACHE_HOME")
    assert first == again and first.is_dir() and first != blocked / "portkit"
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"portkit: cache folder {blocked / 'portkit'} (set by XDG_CACHE_HOME)")
    assert "is not usable (NotADirectoryError" in line
    assert line.endswith("running without the cache")
    fine = tmp_path / "fine"
    assert usable_folder(fine, "x") == fine and fine.is_dir()


def test_threads_asking_at_once_say_an_unusable_subfolder_once(tmp_path, capsys, monkeypatch):
    """twin-cpu's two check builds compile side by side and both ask for ``twins-cpu/``:
    one line, one fallback, however the threads interleave (a CI run printed it twice)."""
    import tempfile
    import threading

    from portkit.cache_files import usable_subfolder

    folder = tmp_path / "twins-cpu"
    folder.write_text("not a folder")
    real_mkdtemp = tempfile.mkdtemp

    def slow_mkdtemp(*args, **kwargs):  # widens the window between probe and cache
        threading.Event().wait(0.05)
        return real_mkdtemp(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkdtemp", slow_mkdtemp)
    start = threading.Barrier(6)
    got: list = []

    def ask() -> None:
        start.wait()
        got.append(usable_subfolder(folder))

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = [x for x in capsys.readouterr().err.splitlines() if "is not usable" in x]
    assert len(lines) == 1 and "(a file, not a folder)" in lines[0]
    assert len(set(got)) == 1 and got[0] != folder


def _store_builds(artifact, writer: int, rounds: int) -> None:
    for k in range(rounds):  # each build's bytes differ, as a CPU twin's debug info does
        built = artifact.parent / f".build-{writer}-{k}"
        built.write_bytes(f"library built by {writer}, round {k}".encode() * 50)
        store(artifact, built)


def _load_until_stopped(artifact, rounds: int, damaged) -> None:
    for _ in range(rounds):
        if load(artifact) is None and manifest_path(artifact).exists():
            damaged.value += 1


def test_concurrent_builders_never_make_a_reader_discard_the_entry(tmp_path, capfd):
    """Two processes storing different builds of one entry while two others load it: a
    reader must never take a half-committed pair (one writer's artifact, the other's
    manifest) for damage and delete the file a builder is about to open."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    artifact = tmp_path / "op-check-key.so"
    store(artifact, b"first build")
    damaged = context.Value("i", 0)
    workers = [context.Process(target=_store_builds, args=(artifact, w, 400)) for w in (1, 2)]
    workers += [
        context.Process(target=_load_until_stopped, args=(artifact, 800, damaged)) for _ in (1, 2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    assert damaged.value == 0
    assert "damaged" not in capfd.readouterr().err
    assert load(artifact) is not None
