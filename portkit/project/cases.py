"""Test cases as data: shapes, dtype, seed and special values, next to each op.

A case says what inputs to make, never how to check them. ``make_inputs`` turns a
case into tensors the same way every time (a seeded CPU generator, then a copy to
the device), so a seed printed in a failure reproduces it anywhere.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

from typing import Any

from portkit.project.dtypes import DEFAULT_OP_DTYPES, DTYPES, is_float, torch_dtype
from portkit.project.input_kinds import (
    InputKind,
    bounded,
    duplicates,
    indices,
    offsets,
    permutation,
    positive,
)

__all__ = [
    "DTYPES",
    "Case",
    "bounded",
    "custom",
    "duplicates",
    "elementwise",
    "indices",
    "make_inputs",
    "offsets",
    "permutation",
    "positive",
    "rows",
    "torch_dtype",
]
# A case's own input maker: (CPU generator, the case's torch dtype, device) -> tensors.
InputMaker = Callable[..., Sequence["torch.Tensor"]]

# Sizes around a block of 128 and one that is not a multiple of any block size.
EDGE_SIZES = (0, 1, 127, 128, 129, 1000)
# 2**24 float32 elements is 64 MiB: big enough to fill an H100. The simulator's lockstep
# engine runs such a case in seconds, so it is a `large` case (run everywhere, marked so
# that `pytest -m "not large"` leaves it out), not a GPU-only one (docs/scale.md).
LARGE_SIZE = 1 << 24
TOO_LARGE = "case is too large for the simulator"
GRADCHECK_SIZE = 7


@dataclass(frozen=True)
class Case:
    """One set of inputs for an op. ``shapes`` holds one shape per input tensor."""

    name: str
    shapes: tuple[tuple[int, ...], ...]
    dtype: str = "float32"
    seed: int = 0
    special: tuple[float, ...] = ()
    # Never run in a simulator: True, or the reason as a sentence (shown as the skip).
    gpu_only: bool | str = False
    # GPU-sized (LARGE_SIZE elements): the `large` pytest marker; the simulator runs it.
    large: bool = False
    gradcheck: bool = False  # run torch.autograd.gradcheck on this case
    extra: tuple = field(default=())  # non-tensor arguments passed after the tensors
    # One dtype per input where they differ (a float tensor and an int64 index); empty
    # means every input has ``dtype``.
    input_dtypes: tuple[str, ...] = ()
    # Integer inputs are drawn uniformly from [low, high).
    int_range: tuple[int, int] = (-100, 100)
    # Structured inputs: a kind per input (None: the default draw), e.g.
    # ``(None, offsets(total=(0, 0)))`` (project/input_kinds.py) ...
    kinds: tuple[InputKind | None, ...] = ()
    # ... or a function making all of them: f(generator, dtype, device) -> tensors, the
    # generator a seeded CPU one (draw on the CPU: a seed means the same inputs anywhere).
    inputs: InputMaker | None = field(default=None, compare=False)
    # Which of ``--seeds N``'s rounds this is (0: the case's own seed); for the rerun line.
    seed_round: int = 0

    def __post_init__(self) -> None:
        for dtype in (self.dtype, *self.input_dtypes):
            if dtype not in DTYPES:
                raise ValueError(f"case {self.name!r}: dtype {dtype!r} is not one of {DTYPES}")
        if self.input_dtypes and len(self.input_dtypes) != len(self.shapes):
            raise ValueError(
                f"case {self.name!r}: {len(self.input_dtypes)} input dtypes for "
                f"{len(self.shapes)} input shapes"
            )
        if not self.shapes:
            raise ValueError(f"case {self.name!r}: needs at least one input shape")
        for shape in self.shapes:
            if not all(isinstance(d, int) and d >= 0 for d in shape):
                raise ValueError(f"case {self.name!r}: shape {shape} must be non-negative ints")
        if self.gradcheck and self.dtype != "float64":
            raise ValueError(f"case {self.name!r}: gradcheck needs float64, not {self.dtype}")
        self._check_kinds()

    def _check_kinds(self) -> None:
        where = f"case {self.name!r}"
        if self.inputs is not None and not callable(self.inputs):
            raise ValueError(f"{where}: inputs= takes f(generator, dtype, device) -> tensors")
        if self.inputs is not None and self.kinds:
            raise ValueError(f"{where}: give inputs= or kinds=, not both")
        if not self.kinds:
            return
        if len(self.kinds) != len(self.shapes):
            raise ValueError(
                f"{where}: {len(self.kinds)} kinds for {len(self.shapes)} inputs (None where "
                f"an input takes the default draw)"
            )
        for index, (kind, dtype) in enumerate(zip(self.kinds, self.dtypes)):
            if kind is None:
                continue
            if not isinstance(kind, InputKind):
                raise ValueError(f"{where}: kinds[{index}] is {kind!r}, not an input kind")
            name = type(kind).__name__.lower()
            if kind.integer == is_float(dtype) or dtype == "bool":
                wanted = "an integer" if kind.integer else "a float"
                raise ValueError(f"{where}: input {index} is {dtype}; {name} needs {wanted} dtype")
            kind.validate(self.shapes, index, f"{where}, input {index} ({name})")

    @property
    def gpu_only_reason(self) -> str:
        """Why the simulator skips this case ("" when it runs it)."""
        if not self.gpu_only:
            return ""
        return self.gpu_only if isinstance(self.gpu_only, str) else TOO_LARGE

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The dtype of each input."""
        return self.input_dtypes or (self.dtype,) * len(self.shapes)

    @property
    def numel(self) -> int:
        total = 1
        for d in self.shapes[0]:
            total *= d
        return total


def elementwise(
    *,
    inputs: int = 1,
    sizes: Sequence[int] = EDGE_SIZES,
    dtypes: Sequence[str] = DEFAULT_OP_DTYPES,
    special: Sequence[float] = (),
    large: int | None = LARGE_SIZE,
    seed: int = 0,
    gradcheck: bool = True,
) -> tuple[Case, ...]:
    """Cases for an op over ``inputs`` 1-D tensors of one shape; ``gradcheck=False`` for
    an op that does not accept float64 or has no backward."""

    def shapes(n: int) -> tuple[tuple[int, ...], ...]:
        return ((n,),) * inputs

    cases = [
        Case(f"{dt}-n{n}", shapes(n), dt, seed + i) for dt in dtypes for i, n in enumerate(sizes)
    ]
    if special:
        n = 4 * len(special)
        cases += [Case(f"{dt}-special", shapes(n), dt, seed, tuple(special)) for dt in dtypes]
    if large and "float32" in dtypes:
        cases.append(Case(f"float32-n{large}", shapes(large), "float32", seed, large=True))
    if gradcheck:  # in float64, whatever ``dtypes`` says: gradcheck needs it
        size = GRADCHECK_SIZE
        cases.append(Case("float64-gradcheck", shapes(size), "float64", seed, gradcheck=True))
    return tuple(cases)


def rows(
    *,
    shapes: Sequence[tuple[int, int]] = ((1, 1), (3, 127), (4, 128), (2, 129), (3, 1000)),
    dtypes: Sequence[str] = DEFAULT_OP_DTYPES,
    special: Sequence[float] = (),
    large: tuple[int, int] | None = (4096, 4096),
    gradcheck_shape: tuple[int, int] = (2, 3),
    seed: int = 0,
    gradcheck: bool = True,
) -> tuple[Case, ...]:
    """Cases for an op over one 2-D tensor processed row by row."""
    cases = [
        Case(f"{dt}-{r}x{c}", ((r, c),), dt, seed + i)
        for dt in dtypes
        for i, (r, c) in enumerate(shapes)
    ]
    if special:
        shape = ((2, 2 * len(special)),)
        cases += [Case(f"{dt}-special", shape, dt, seed, tuple(special)) for dt in dtypes]
    if large and "float32" in dtypes:
        r, c = large
        cases.append(Case(f"float32-{r}x{c}", ((r, c),), "float32", seed, large=True))
    if gradcheck:  # in float64, whatever ``dtypes`` says: gradcheck needs it
        r, c = gradcheck_shape
        cases.append(Case("float64-gradcheck", ((r, c),), "float64", seed, gradcheck=True))
    return tuple(cases)


def custom(
    name: str,
    shapes: Sequence[Sequence[int]],
    dtype: str = "float32",
    **options: Any,
) -> Case:
    """A single hand-written case: ``custom("wide", [(2, 4096)], "float64")``."""
    return Case(name, tuple(tuple(s) for s in shapes), dtype, **options)


def draw_device(case: Case) -> str:
    """Where ``case``'s random numbers are drawn: the CPU, so that a seed is the same
    inputs on every machine, except a GPU-only case on a machine with a GPU. That case
    never runs on a CPU, and a CPU draw of its tensors cost seconds each (1.3 s a 2^26
    -element tensor on the H200 host, one core; 9 of add_rmsnorm's 16 s items): it is
    drawn by torch's CUDA generator from the same seed, the same inputs on every run of
    one GPU model and torch version. A case's own ``inputs=`` maker and its input kinds
    keep their CPU generator."""
    if not case.gpu_only or case.inputs is not None:
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def make_inputs(case: Case, device: str) -> list[torch.Tensor]:
    """The case's input tensors: standard normal from ``case.seed`` (integers uniform in
    ``case.int_range``, bools fair coins), with the special
    values tiled over the start of each input (rolled by input index, so that
    e.g. inf meets -inf in a binary op). Drawn where ``draw_device`` says, whatever
    ``device`` is, so every device gets the same values."""
    import torch

    generator = torch.Generator().manual_seed(case.seed)
    if case.inputs is not None:
        return _made(case, generator, device)
    where = draw_device(case)
    drawing = generator if where == "cpu" else torch.Generator(where).manual_seed(case.seed)
    tensors = []
    for index, (shape, name) in enumerate(zip(case.shapes, case.dtypes)):
        dtype = torch_dtype(name)
        kind = case.kinds[index] if case.kinds else None
        if kind is not None:
            tensors.append(kind.draw(generator, shape, dtype, case.shapes).to(device))
            continue
        if not is_float(name):
            low, high = (0, 2) if name == "bool" else case.int_range
            if name == "uint8":
                low, high = max(low, 0), min(high, 256)
            t = torch.randint(low, high, shape, generator=drawing, device=where).to(dtype)
            tensors.append(t.to(device))
            continue
        t = torch.randn(shape, dtype=dtype, generator=drawing, device=where)
        if case.special and t.numel():
            values = torch.tensor(case.special, dtype=dtype, device=where).roll(index)
            flat = t.view(-1)
            count = min(flat.numel(), 3 * values.numel())
            flat[:count] = values.repeat(3)[:count]
        tensors.append(t.to(device))
    return tensors


def _made(case: Case, generator: torch.Generator, device: str) -> list[torch.Tensor]:
    """The tensors ``case.inputs`` makes, checked against the case's shapes and dtypes."""
    import torch

    assert case.inputs is not None
    made = list(case.inputs(generator, torch_dtype(case.dtype), device))
    where = f"case {case.name!r}: inputs="
    if len(made) != len(case.shapes):
        raise ValueError(f"{where} made {len(made)} tensors; the case has {len(case.shapes)}")
    for index, (t, shape, name) in enumerate(zip(made, case.shapes, case.dtypes)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{where} input {index} is {type(t).__name__}, not a tensor")
        if tuple(t.shape) != shape or t.dtype != torch_dtype(name):
            raise ValueError(
                f"{where} input {index} is {str(t.dtype)[6:]} {tuple(t.shape)}; the case "
                f"says {name} {shape}"
            )
    return [t.contiguous().to(device) for t in made]


# Upstream gradients drawn inside ``grad_outputs_kept()``: (seed, shapes, dtypes) -> draw.
_kept_grad_outputs: ContextVar[dict | None] = ContextVar("portkit_grad_outputs", default=None)


@contextlib.contextmanager
def grad_outputs_kept() -> Iterator[None]:
    """Within the block, ``make_grad_outputs`` draws each (seed, shapes, dtypes) once and
    hands out copies. One case's reference, controls and implementations all seed the
    same upstream gradients, and a GPU-sized case's CPU draw costs seconds: add_rmsnorm's
    bfloat16 16384x4096 case drew them 6 times, 20 s of a 40 s check on an H200. Scoped
    to a block (one case), so nothing stays alive after it."""
    token = _kept_grad_outputs.set({})
    try:
        yield
    finally:
        _kept_grad_outputs.reset(token)


def make_grad_outputs(case: Case, outputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Seeded upstream gradients, one per output, on the outputs' device (fresh tensors:
    a kernel that writes its upstream gradient spoils no other run's)."""
    import torch

    kept = _kept_grad_outputs.get()
    key = (case.seed, tuple((tuple(o.shape), o.dtype) for o in outputs))
    drawn = kept.get(key) if kept is not None else None
    if drawn is None:
        where = draw_device(case)
        generator = torch.Generator(where).manual_seed(case.seed + 10_007)
        drawn = [
            torch.randn(o.shape, dtype=o.dtype, generator=generator, device=where)
            for o in outputs
        ]
        if kept is None:  # drawn for this call alone: no copy needed
            return [d.to(o.device) for d, o in zip(drawn, outputs)]
        kept[key] = drawn
    return [d.to(o.device, copy=True) for d, o in zip(drawn, outputs)]
