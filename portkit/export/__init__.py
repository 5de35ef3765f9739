"""``portkit export``: an op's twin compiled ahead of time, its launchers and its torch op
registration, as an installable package that needs torch and cuda-bindings only.

Layer: beside ``torch_op`` (above ``backends``, whose twin build and driver launch it
reuses; below ``lint``). ``runtime.py`` is shipped verbatim and imports no portkit."""
