"""Verdicts cached by content (docs/verdict-cache.md): a passing unit of checks is stored
under a digest of everything it depends on (key.py) in one JSON file (store.py), and
``portkit check`` and the pytest plugin serve it while that digest is unchanged
(serve.py); the CPU and GPU phases of a check (phases.py)."""
