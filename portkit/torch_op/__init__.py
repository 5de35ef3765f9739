"""An op implementation as a registered PyTorch op (``torch.library.custom_op``) with
autograd and a fake kernel derived from its launchers; the eager fast path around it.

Layer: above ``backends`` (it binds a backend's kernels), below ``lint`` and ``check``.
``registration`` imports only torch, because ``portkit export`` ships it verbatim."""
