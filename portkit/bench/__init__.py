"""``portkit bench``: what a port bought, measured against torch and the copy roofline.

Layer: above ``check`` (it reuses the comparison tolerances to verify every timed call)
and below ``cli``. Modules: ``stats`` (medians and spreads), ``traffic`` (bytes and FLOPs
per call), ``model`` (results, derived figures, JSON), ``timing`` (CUDA events, L2
flush, the clock a fake replaces in tests), ``runner`` (implementations interleaved,
every timed output checked), ``regression`` (a saved baseline against a new run),
``table`` and ``plot`` (what people read).
"""
