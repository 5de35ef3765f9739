"""Replayers declare what they can do (runtime/replayer_protocol.py): ``carries_backward``
decides whether a forward's recordings name its saved tensors and whether the op's
plain-eager replays get the compiled autograd node; ``op_kernels`` whether ``torch.ops``
gets C++ kernels. Nobody tells the replayers apart by the methods they happen to have:
a replayer with a ``set_backward`` method that does not declare ``carries_backward`` is
treated as the Python one, and one that declares it is trusted."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from portkit.runtime.eager_replay import differentiate, replayer_of
from portkit.runtime.native_replayer import NativeReplayer
from portkit.runtime.prepared import PreparedReplayer
from portkit.runtime.registration import Binding, OpLayout
from portkit.runtime.replayer_protocol import carries_backward
from portkit.runtime.replaying import ReplayingLauncher

from .test_replay import Counted, kernels

LAYOUT = OpLayout(("Tensor", "float"), 1, (("input", 0), ("output", 0)), (True, False), True)


class UndeclaredBackward(PreparedReplayer):
    """Has the compiled replayer's methods, declares nothing: the Python replayer."""

    def __init__(self) -> None:
        super().__init__()
        self.added: list[tuple] = []
        self.backwards: list[tuple] = []

    def add(self, leaves, recording, *saved) -> bool:
        self.added.append(saved)
        return super().add(leaves, recording)

    def set_backward(self, backward, name, grads, structure, fallback) -> None:
        self.backwards.append((backward, name, tuple(grads), structure))


class DeclaredBackward(UndeclaredBackward):
    carries_backward = True


def test_each_replayer_declares_whether_it_carries_backward() -> None:
    assert NativeReplayer.carries_backward is True
    assert PreparedReplayer.carries_backward is False
    assert PreparedReplayer.op_kernels is None
    assert carries_backward(None) is False  # no replayer (replay off, or given up)


def _op(replayer_class: type[UndeclaredBackward]):
    k = kernels()
    forward = ReplayingLauncher(Counted(), k, replayer_class(), True, None, 1, LAYOUT.saved)
    backward = ReplayingLauncher(Counted(), k, replayer_class(), False)
    registered = SimpleNamespace(name="scale", layout=LAYOUT)
    binding = Binding(forward, backward, k, lambda inputs: None, RuntimeError)
    return k, forward, backward, registered, binding


def test_a_replayer_that_does_not_declare_it_gets_no_saved_refs_and_no_backward() -> None:
    k, forward, backward, registered, binding = _op(UndeclaredBackward)
    forward(k, torch.ones(4), 2.0)
    assert forward.replayer.added == [()]  # recorded, without the saved references
    differentiate(forward, backward, registered, binding)
    assert forward.replayer.backwards == []


def test_a_replayer_that_declares_it_gets_both() -> None:
    k, forward, backward, registered, binding = _op(DeclaredBackward)
    forward(k, torch.ones(4), 2.0)
    # Counted returns (out, (x, out)): the saved input 0 is leaf 0, output 0 buffer -1
    assert forward.replayer.added == [((0, -1),)]
    differentiate(forward, backward, registered, binding)
    ((given, name, grads, _),) = forward.replayer.backwards
    assert given is backward.replayer and name == "scale" and grads == (True, False)


def test_a_plain_launcher_has_no_replayer() -> None:
    k, forward, *_ = _op(DeclaredBackward)
    assert replayer_of(forward) is forward.replayer
    assert replayer_of(Counted()) is None and replayer_of(None) is None
    # a plain launcher beside a declaring one: no node (the backward would not replay)
    _, _, backward, registered, binding = _op(DeclaredBackward)
    differentiate(forward, Counted(), registered, binding)
    assert forward.replayer.backwards == []
