"""An op implementation as a registered PyTorch op (``torch.library.custom_op``) with
autograd and a fake kernel derived from its launchers; the eager fast path around it.

Layer: above ``backends`` (it binds a backend's kernels), below ``lint`` and ``check``.
``registration`` and ``autograd_function`` (the one autograd path, used by check and
diff too) import only torch, because ``portkit export`` ships them verbatim."""
