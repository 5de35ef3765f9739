"""Replay of recorded launcher calls: the production path without the launcher's Python.

A launcher is a function of its inputs' shapes, strides, dtypes, device and scalar values:
given the same signature it allocates the same buffers and launches the same kernels
with the same grids and scalars, only the data pointers differ. So the first call of each
signature runs the launcher while recording what it did (``recording.py``); later calls
with that signature replay the recording (``executor.py``, or the compiled
``native.cpp`` through ``native_replayer.py``, both in portkit/runtime/), which
allocates and launches without running any of the launcher's Python. ``launcher.py``
puts the two together around one launcher.

A call is recorded only when everything it did can be replayed: every tensor a kernel
received is an input or a buffer from ``k.empty*``, no other PyTorch operation ran (a
``TorchDispatchMode`` watches), every launch took a target's production path, and the
result is made of inputs and those buffers. Anything else leaves that signature to the
launcher, every call.
"""
