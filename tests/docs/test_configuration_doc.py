"""docs/configuration.md documents every key `[tool.portkit]` accepts, and no other."""

from __future__ import annotations

import re
from pathlib import Path

from portkit.project import config

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_every_known_key_has_a_row_and_every_row_is_a_known_key():
    rows = set(re.findall(r"^\| `([a-z-]+)` \|", PAGE.read_text(), re.M))
    assert rows == set(config._KNOWN_KEYS), (
        f"undocumented: {sorted(set(config._KNOWN_KEYS) - rows)}; "
        f"not keys: {sorted(rows - set(config._KNOWN_KEYS))}"
    )
