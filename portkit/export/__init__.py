"""``portkit export``: an op's twin compiled ahead of time, its launchers and its torch op
registration, as an installable package that needs torch and cuda-bindings only.

Layer: beside ``lint``, above ``build`` (its cubins per arch: ``build/archs.py``) and
``backends`` (whose twin build it reuses). ``portkit/runtime/`` is shipped verbatim and
imports no portkit."""
