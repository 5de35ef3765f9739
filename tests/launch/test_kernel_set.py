"""``k.kernel[grid, block](...)``: the cached launch configurations and the production fast
path (a target's ``plain_launch``) must never let a mistake through that the checked
path would have named."""

from __future__ import annotations

import pytest
import torch

from portkit.errors import InputError, LaunchError
from portkit.launch.kernel_set import KernelSet, LaunchTarget


class Recorder(LaunchTarget):
    """A launch target that records checked launches."""

    def __init__(self) -> None:
        self.launches: list[tuple] = []

    def launch(self, config, args) -> None:
        self.launches.append((config, tuple(args)))


class PlainFirst(Recorder):
    """A target with a fast path that accepts only float32 tensors and ints."""

    has_plain_launch = True

    def __init__(self) -> None:
        super().__init__()
        self.fast: list[tuple] = []

    def plain_launch(self, config):
        def launch(args) -> bool:
            if all(
                (isinstance(a, torch.Tensor) and a.dtype == torch.float32) or type(a) is int
                for a in args
            ):
                self.fast.append((config, tuple(args)))
                return True
            return False

        return launch


def test_a_cached_configuration_does_not_hide_a_float_or_bool_dimension() -> None:
    target = Recorder()
    k = KernelSet("op", "impl", "cpu", {"kern": target})
    x = torch.ones(4)
    k.kern[4, 256](x)
    k.kern[4, 256](x)  # served from the cache
    for wrong in ((4.0, 256), (True, 256), (4, 256.0)):
        with pytest.raises(LaunchError, match="must be an int"):
            k.kern[wrong](x)
    assert len(target.launches) == 2
    assert target.launches[0][0].grid == (4, 1, 1) and target.launches[0][0].block == (256, 1, 1)


def test_the_fast_path_launches_plain_arguments_without_the_checked_pass() -> None:
    target = PlainFirst()
    k = KernelSet("op", "impl", "cpu", {"kern": target})
    x = torch.ones(4)
    k.kern[1, 32](x, 4)
    assert len(target.fast) == 1 and target.launches == []


def test_what_the_fast_path_doubts_gets_the_checked_path_and_its_errors() -> None:
    target = PlainFirst()
    k = KernelSet("op", "impl", "cpu", {"kern": target})
    k.kern[1, 32](torch.ones(4, dtype=torch.float64), 4)  # doubted, then launched checked
    assert len(target.launches) == 1 and target.fast == []
    with pytest.raises(InputError, match="not contiguous"):
        k.kern[1, 32](torch.ones(4, 4, dtype=torch.float64).t(), 4)
    with pytest.raises(InputError, match="neither a tensor nor a number"):
        k.kern[1, 32]([1, 2], 4)
    assert len(target.launches) == 1


def test_the_fast_path_is_off_while_guards_are_set() -> None:
    class Guards:
        def __init__(self) -> None:
            self.verified = 0

        def verify(self, *args) -> None:
            self.verified += 1

    target = PlainFirst()
    guards = Guards()
    k = KernelSet("op", "impl", "cpu", {"kern": target}, guards=guards)
    k.kern[1, 32](torch.ones(4), 4)
    assert target.fast == [] and len(target.launches) == 1 and guards.verified == 1
    k = KernelSet("op", "impl", "cpu", {"kern": target})
    k.kern[1, 32](torch.ones(4), 4)
    assert len(target.fast) == 1


def test_empty_like_is_plain_only_without_poison_and_guards() -> None:
    k = KernelSet("op", "impl", "cpu", {})
    strided = torch.ones(4, 6).t()
    out = k.empty_like(strided)
    assert out.shape == strided.shape and out.is_contiguous()
    assert k.empty_like(torch.ones(5, dtype=torch.int32)).dtype == torch.int32
    poisoned = KernelSet("op", "impl", "cpu", {}, poison_outputs=True)
    assert torch.isnan(poisoned.empty_like(torch.ones(5))).all()
    assert (poisoned.empty_like(torch.ones(5, dtype=torch.int32)) == -1).all()
