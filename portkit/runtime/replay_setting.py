"""``PORTKIT_REPLAY``, parsed once for portkit and for an exported package.

portkit reads its environment in one table (project/environment.py), which parses this
variable with ``replay_mode``; an exported package has no portkit and reads the variable
itself (``replaying.package_replay_mode``) through the same function, so ``false`` turns replay
off in both. Standard library only: portkit's table imports it without torch.
"""

from __future__ import annotations

REPLAY_OFF = ("0", "false", "no", "off")


def replay_mode(value: str) -> str:
    """What a ``PORTKIT_REPLAY`` value asks for: "off" (0, false, no, off), "python" (the
    Python replayer) or "auto" (anything else: the compiled replayer where it builds)."""
    value = value.strip().lower()
    return "off" if value in REPLAY_OFF else "python" if value == "python" else "auto"
