"""The wrong-twin bank: ``tests/check/wrong_twins/<op>/<mistake>.patch``.

Each wrong twin is kept as a unified diff against the real twin (``cuda_src/<op>.cu``, or
``_ops/<op>.cu`` for an op that exists only for the bank): the header lines that say
what the mistake is and what a diff should show, and the mistake itself. The patch is
applied when a test runs, so re-tuning a real twin carries its wrong twins along; when a
re-tune touches the lines a patch changes, ``wrong_twin_text`` fails naming the patch
(rewrite it with ``diff -u cuda_src/<op>.cu <wrong>.cu``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.check.unified_patch import PatchDoesNotApply, apply

REPO = Path(__file__).resolve().parents[2]
BANK = Path(__file__).resolve().parent / "wrong_twins"
OPS = BANK / "_ops"  # ops that exist only for the bank, with their real prototype and twin


class StalePatch(AssertionError):
    """A wrong twin's patch no longer applies to its real twin."""


@dataclass(frozen=True)
class WrongTwin:
    op: str
    name: str

    @property
    def id(self) -> str:
        return f"{self.op}/{self.name}"

    @property
    def patch(self) -> Path:
        return BANK / self.op / f"{self.name}.patch"

    @property
    def real_twin(self) -> Path:
        own = OPS / f"{self.op}.cu"
        return own if own.is_file() else REPO / "cuda_src" / f"{self.op}.cu"

    @property
    def prototype(self) -> Path:
        own = OPS / f"{self.op}.py"
        return own if own.is_file() else REPO / "prototypes" / f"{self.op}.py"

    def text(self) -> str:
        """The wrong twin's source: the real twin with the patch applied."""
        try:
            return apply(self.real_twin.read_text(), self.patch.read_text(), self.patch_name)
        except PatchDoesNotApply as exc:
            raise StalePatch(
                f"wrong twin {self.id}: {exc}. The real twin {self.real_twin.name} changed "
                f"where the mistake is; re-make the mistake in the new twin and rewrite "
                f"{self.patch_name} (diff -u)."
            ) from None

    @property
    def patch_name(self) -> str:
        return self.patch.relative_to(REPO).as_posix()


def bank() -> list[WrongTwin]:
    """Every wrong twin of the bank, by op and name."""
    return [
        WrongTwin(path.parent.name, path.stem)
        for path in sorted(BANK.glob("*/*.patch"))
        if path.parent != OPS
    ]


def wrong_twin_text(mistake: str) -> str:
    """The source of wrong twin ``op/name``."""
    op, name = mistake.split("/")
    return WrongTwin(op, name).text()
