"""An op implementation bound to its registered PyTorch op (``runtime/registration.py``:
autograd and a fake kernel derived from its launchers, the eager fast path around it).

Layer: above ``backends`` (it binds a backend's kernels), below ``lint`` and ``check``."""
