"""The ops written from the docs alone: each is `<op>_prototype.py` + `<op>_twin.cu` here."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent


def sources(op: str) -> tuple[str, str]:
    """The op's prototype and twin, as a user wrote them."""
    return (HERE / f"{op}_prototype.py").read_text(), (HERE / f"{op}_twin.cu").read_text()
