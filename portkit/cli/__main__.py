"""``python -m portkit.cli``: the same as the ``portkit`` command."""

from portkit.cli.app import main

main()
