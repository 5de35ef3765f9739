"""The ``portkit`` command line: ``app`` is the group, one module per command."""

from portkit.cli.app import main

__all__ = ["main"]
