"""The strict unified-diff applier behind the wrong-twin bank, and the bank's stale-patch error."""

from __future__ import annotations

import difflib

import pytest

from tests.check.unified_patch import PatchDoesNotApply, apply
from tests.check.wrong_twin_bank import StalePatch, WrongTwin, bank

ORIGINAL = "".join(f"line {i}\n" for i in range(1, 21))


def diff(old: str, new: str) -> str:
    return "".join(
        difflib.unified_diff(old.splitlines(True), new.splitlines(True), "a/x", "b/x")
    )


def test_apply_inverts_difflib():
    lines = ORIGINAL.splitlines(True)
    new = "".join(["head\n", *lines[:4], "changed 5\n", *lines[6:15], *lines[16:], "end\n"])
    assert apply(ORIGINAL, diff(ORIGINAL, new), "x.patch") == new


def test_a_changed_context_line_names_patch_hunk_and_line():
    new = ORIGINAL.replace("line 10\n", "ten\n")
    patch = diff(ORIGINAL, new)
    drifted = ORIGINAL.replace("line 9\n", "line nine\n")
    with pytest.raises(PatchDoesNotApply) as caught:
        apply(drifted, patch, "bank/op/mistake.patch")
    message = str(caught.value)
    assert message.startswith("bank/op/mistake.patch: hunk 1 does not apply at line 9")
    assert "'line 9'" in message and "'line nine'" in message


def test_a_shifted_file_applies_where_its_lines_moved_but_never_fuzzes():
    """Lines added or removed above a hunk (a re-tune elsewhere in the twin) move it; a
    context line that changed does not apply anywhere."""
    new = ORIGINAL.replace("line 10\n", "ten\n").replace("line 18\n", "eighteen\n")
    patch = diff(ORIGINAL, new)
    assert apply("inserted\n" + ORIGINAL, patch, "p") == "inserted\n" + new
    shorter = ORIGINAL.replace("line 2\n", "")
    assert apply(shorter, patch, "p") == new.replace("line 2\n", "")
    with pytest.raises(PatchDoesNotApply, match="hunk 1 does not apply at line 7"):
        apply("inserted\n" + ORIGINAL.replace("line 9\n", "nine\n"), patch, "p")


def test_a_hunk_past_the_end_and_a_bad_header_are_refused():
    patch = diff(ORIGINAL, ORIGINAL.replace("line 20\n", "twenty\n"))
    with pytest.raises(PatchDoesNotApply, match="past the end"):
        apply("".join(ORIGINAL.splitlines(True)[:18]), patch, "p")
    with pytest.raises(PatchDoesNotApply, match="header says"):
        apply(ORIGINAL, patch.replace("@@ -17,4 +17,4 @@", "@@ -17,5 +17,4 @@"), "p")
    with pytest.raises(PatchDoesNotApply, match="no hunks"):
        apply(ORIGINAL, "--- a/x\n+++ b/x\n", "p")


def test_every_patch_of_the_bank_applies_and_changes_its_twin():
    twins = bank()
    assert len(twins) == 21
    for twin in twins:
        text = twin.text()
        assert text != twin.real_twin.read_text(), twin.id
        assert text.startswith(f"// WRONG TWIN {twin.id}: "), twin.id


def test_a_retuned_real_twin_fails_naming_the_patch(tmp_path, monkeypatch):
    """Re-tuning the lines a mistake sits in makes the bank fail with the patch's name."""
    twin = WrongTwin("vector_add", "drops_tail")
    retuned = tmp_path / "vector_add.cu"
    real = twin.real_twin.read_text()
    retuned.write_text(real.replace("out[i] = a[i] + b[i]", "out[i] = b[i] + a[i]"))
    monkeypatch.setattr(WrongTwin, "real_twin", property(lambda self: retuned))
    name = "wrong_twins/vector_add/drops_tail.patch"
    monkeypatch.setattr(WrongTwin, "patch_name", property(lambda self: name))
    with pytest.raises(StalePatch) as caught:
        twin.text()
    message = str(caught.value)
    assert message.startswith(f"wrong twin vector_add/drops_tail: {name}: hunk 2 ")
    assert f"rewrite {name}" in message
