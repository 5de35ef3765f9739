"""``portkit watch`` and the notebook API's engine: a resident process that keeps the
interpreter, torch, numba and compiled kernels loaded and re-runs what an edit touches.
The engine (engine.py) runs the modes (modes.py) and reports verdicts (model.py); the
loop (loop.py) wakes it on a save; the view (view.py) shows it."""
