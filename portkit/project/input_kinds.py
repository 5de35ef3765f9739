"""Built-in kinds of structured inputs: what a case says its inputs must look like.

Standard normal floats and uniform integers are the default; many ops need more: CSR
offsets must be sorted, indices valid, a scale positive. A case names a kind per input
(``kinds=(None, offsets(total=(0, 0)))``: input 1 holds the offsets of input 0's rows)
and ``make_inputs`` draws it from the case's CPU generator, so the launcher and the
reference see valid inputs without sorting or clamping them themselves.

A size is an int or ``(input, dim)``: the size of dimension ``dim`` of input ``input``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

Size = int | tuple[int, int]


def resolve(size: Size, shapes: tuple[tuple[int, ...], ...], where: str) -> int:
    """The int a ``Size`` names, or a ValueError saying why it names none."""
    if isinstance(size, bool):
        raise ValueError(f"{where}: a size is an int or (input, dim), got {size!r}")
    if isinstance(size, int):
        if size < 0:
            raise ValueError(f"{where}: size {size} is negative")
        return size
    if (
        isinstance(size, tuple)
        and len(size) == 2
        and all(isinstance(i, int) and not isinstance(i, bool) for i in size)
    ):
        index, dim = size
        if not 0 <= index < len(shapes) or not 0 <= dim < len(shapes[index]):
            raise ValueError(f"{where}: ({index}, {dim}) names no input dimension of {shapes}")
        return shapes[index][dim]
    raise ValueError(f"{where}: a size is an int or (input, dim), got {size!r}")


@dataclass(frozen=True)
class InputKind:
    """A kind of input; ``integer`` kinds fill integer inputs, the others float ones."""

    integer: bool = True

    def validate(self, shapes: tuple[tuple[int, ...], ...], index: int, where: str) -> None:
        """Raise ValueError where the kind cannot fill input ``index`` of ``shapes``."""

    def draw(
        self,
        generator: torch.Generator,
        shape: tuple[int, ...],
        dtype: torch.dtype,
        shapes: tuple[tuple[int, ...], ...],
    ) -> torch.Tensor:
        raise NotImplementedError


@dataclass(frozen=True)
class Offsets(InputKind):
    """CSR offsets: 1-D, nondecreasing, first 0, last ``total`` (empty segments occur)."""

    total: Size = 0

    def validate(self, shapes: tuple[tuple[int, ...], ...], index: int, where: str) -> None:
        resolve(self.total, shapes, where)
        if len(shapes[index]) != 1 or shapes[index][0] < 1:
            raise ValueError(f"{where}: offsets are 1-D with at least one entry (the 0)")

    def draw(self, generator, shape, dtype, shapes):  # type: ignore[no-untyped-def]
        import torch

        total = resolve(self.total, shapes, "offsets")
        cuts = torch.randint(0, total + 1, (max(shape[0] - 2, 0),), generator=generator)
        inner = torch.sort(cuts).values
        ends = [torch.zeros(1, dtype=torch.int64)]
        if shape[0] > 1:
            ends = [ends[0], inner, torch.full((1,), total, dtype=torch.int64)]
        return torch.cat(ends).to(dtype)


@dataclass(frozen=True)
class Permutation(InputKind):
    """A permutation of 0 .. numel-1, in the input's shape."""

    def draw(self, generator, shape, dtype, shapes):  # type: ignore[no-untyped-def]
        import torch

        n = 1
        for d in shape:
            n *= d
        return torch.randperm(n, generator=generator).reshape(shape).to(dtype)


@dataclass(frozen=True)
class Indices(InputKind):
    """Valid indices into a dimension of size ``into`` (0 .. into-1). ``duplicates``:
    drawn from a quarter as many distinct values as there are indices, so that several
    land on one row (a scatter's atomics, an embedding's gradient)."""

    into: Size = 0
    duplicates: bool = False

    def validate(self, shapes: tuple[tuple[int, ...], ...], index: int, where: str) -> None:
        size = resolve(self.into, shapes, where)
        n = 1
        for d in shapes[index]:
            n *= d
        if size == 0 and n:
            raise ValueError(f"{where}: indices into a dimension of size 0")

    def draw(self, generator, shape, dtype, shapes):  # type: ignore[no-untyped-def]
        import torch

        size = resolve(self.into, shapes, "indices")
        n = 1
        for d in shape:
            n *= d
        if not n:
            return torch.zeros(shape, dtype=dtype)
        if not self.duplicates:
            return torch.randint(0, size, shape, generator=generator).to(dtype)
        distinct = max(1, min(size, n // 4))
        pool = torch.randperm(size, generator=generator)[:distinct]
        picks = torch.randint(0, distinct, (n,), generator=generator)
        picks[: min(n, 2)] = 0  # at least one value twice
        return pool[picks].reshape(shape).to(dtype)


@dataclass(frozen=True)
class Positive(InputKind):
    """Floats > 0: log-normal, exp(N(0, 1/2)), most between 0.4 and 2.7."""

    integer: bool = False

    def draw(self, generator, shape, dtype, shapes):  # type: ignore[no-untyped-def]
        import torch

        return torch.exp(0.5 * torch.randn(shape, generator=generator, dtype=torch.float64)).to(
            dtype
        )


@dataclass(frozen=True)
class Bounded(InputKind):
    """Floats uniform in [low, high)."""

    integer: bool = False
    low: float = 0.0
    high: float = 1.0

    def validate(self, shapes: tuple[tuple[int, ...], ...], index: int, where: str) -> None:
        if not self.low < self.high:
            raise ValueError(f"{where}: bounded needs low < high, got {self.low}, {self.high}")

    def draw(self, generator, shape, dtype, shapes):  # type: ignore[no-untyped-def]
        import torch

        u = torch.rand(shape, generator=generator, dtype=torch.float64)
        drawn = (self.low + (self.high - self.low) * u).to(dtype)
        return torch.where(drawn < self.high, drawn, torch.full_like(drawn, self.low))


def offsets(total: Size) -> Offsets:
    """Sorted CSR offsets ending at ``total`` (an int or ``(input, dim)``)."""
    return Offsets(total=total)


def permutation() -> Permutation:
    return Permutation()


def indices(into: Size, duplicates: bool = False) -> Indices:
    """Valid indices into a dimension of size ``into`` (an int or ``(input, dim)``)."""
    return Indices(into=into, duplicates=duplicates)


def duplicates(into: Size) -> Indices:
    """Valid indices with repeats: ``indices(into, duplicates=True)``."""
    return Indices(into=into, duplicates=True)


def positive() -> Positive:
    return Positive()


def bounded(low: float, high: float) -> Bounded:
    return Bounded(low=low, high=high)
