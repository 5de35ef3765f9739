"""The author's contract: ``@portkit.op`` turns a class of host launchers into an op definition.

    @portkit.op(reference=torch.sigmoid, cases=portkit.cases.elementwise())
    class Sigmoid:
        def forward(k, x):             # k: the kernels of one implementation
            out = k.empty_like(x)      # outputs allocated through k are NaN-poisoned in checks
            k.sigmoid_fwd[portkit.cdiv(x.numel(), 256), 256](x, out, x.numel())
            return out, (out,)         # result(s), tensors saved for backward
        def backward(k, saved, dout):  # optional
            ...
            return (dx,)               # one gradient per input (None where there is none)

The launchers are written once and run against every implementation (simulated
prototype, prototype on the GPU, twin), so a difference between implementations is a
difference in kernels, never in launch code. The op's name is its file's name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from portkit.errors import OpDefinitionError
from portkit.project.cases import Case
from portkit.project.dtypes import DEFAULT_OP_DTYPES, DTYPES
from portkit.project.tolerances import Tolerance

OP_ATTRIBUTE = "__portkit_op__"
DIRECTIONS = ("forward", "backward")
# An ideal-traffic or work model: f(*inputs) -> bytes or FLOPs of the forward, or
# {"forward": f, "backward": g} (both take the forward's inputs).
CostModel = Callable[..., int] | Mapping[str, Callable[..., int]]


@dataclass(frozen=True)
class OpDefinition:
    """What ``@portkit.op`` records about a class; discovery adds the name and kernels."""

    class_name: str
    reference: Callable
    forward: Callable
    backward: Callable | None
    cases: tuple[Case, ...]
    dtypes: tuple[str, ...]
    same_shape: bool
    check_inputs: Callable | None
    # Per input: None (any of ``dtypes``, the same for all such inputs) or a fixed dtype.
    input_dtypes: tuple[str | None, ...] = ()
    bench: tuple[Case, ...] = ()  # `portkit bench` cases; empty: derived from `cases`
    ideal_bytes: CostModel | None = None
    ideal_flops: CostModel | None = None
    # The reference runs in this float dtype (narrower float inputs are widened, results
    # rounded once): for kernels that accumulate wider than they store. None: float16 and
    # bfloat16 run in float32, others as they are.
    reference_in: str | None = None
    # Declared tolerances (project/tolerances.py); the dtype table is the default.
    tolerances: tuple[Tolerance, ...] = ()
    # Float inputs that carry no gradient (constant tables, masks), by position or by the
    # forward's parameter name; inputs the backward returns None for are added by layout.
    no_grad: tuple[int | str, ...] = ()
    # The measured control's factors (checking/control.py): an output may be this many times
    # torch's own error in the kernels' precision, (forward, gradients).
    error_factor: tuple[float, float] = (2.0, 5.0)
    # The fastest torch way to compute the op (a fused torch function, a library kernel):
    # what a user would call instead of the twin. `portkit bench` times the twin against
    # the best of it, the reference and torch.compile of the reference.
    baseline: Callable | None = None
    # Why the op is a teaching example whose times are no speed claim (bench marks its
    # rows; README tables leave them out); None: its times are claims.
    teaching: str | None = None
    # Tunable launch parameters: name -> allowed values, the first the default
    # (portkit.runtime.knob_choice; ``portkit tune`` picks per GPU and shape bucket).
    knobs: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def __post_init__(self) -> None:
        where = f"@portkit.op class {self.class_name}"
        if not callable(self.reference):
            raise OpDefinitionError(f"{where}: reference must be callable")
        if self.baseline is not None and not callable(self.baseline):
            raise OpDefinitionError(
                f"{where}: baseline must be callable, with the reference's signature "
                f"(the fastest torch way to compute the op), got {self.baseline!r}"
            )
        if self.teaching is not None and not (
            isinstance(self.teaching, str) and self.teaching.strip()
        ):
            raise OpDefinitionError(
                f"{where}: teaching is the reason the op's times are no speed claim "
                f"(a sentence), got {self.teaching!r}"
            )
        if not self.cases:
            raise OpDefinitionError(f"{where}: cases must name at least one portkit Case")
        bad = [c for c in self.cases if not isinstance(c, Case)]
        if bad:
            raise OpDefinitionError(f"{where}: cases holds {bad[0]!r}, not a portkit Case")
        names = [c.name for c in self.cases]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise OpDefinitionError(f"{where}: case names repeat: {', '.join(duplicated)}")
        fixed = [d for d in self.input_dtypes if d is not None]
        unknown = sorted(set(self.dtypes) - set(DTYPES)) + sorted(set(fixed) - set(DTYPES))
        if unknown:
            raise OpDefinitionError(f"{where}: dtypes {unknown} unknown; portkit knows {DTYPES}")
        for case in self.cases:
            problem = self.refused_dtype(case.dtypes)
            if problem:
                hint = self._dtypes_hint(case)
                raise OpDefinitionError(f"{where}: case {case.name!r}: {problem}{hint}")
        bad = [c for c in self.bench if not isinstance(c, Case)]
        if bad:
            raise OpDefinitionError(f"{where}: bench holds {bad[0]!r}, not a portkit Case")
        names = [c.name for c in self.bench]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise OpDefinitionError(f"{where}: bench case names repeat: {', '.join(duplicated)}")
        for case in self.bench:
            problem = self.refused_dtype(case.dtypes)
            if problem:
                raise OpDefinitionError(
                    f"{where}: bench case {case.name!r}: {problem}{self._dtypes_hint(case)}"
                )
        if self.reference_in not in (None, "float32", "float64"):
            raise OpDefinitionError(
                f"{where}: reference_in is float32 or float64, got {self.reference_in!r}"
            )
        for label, model in (("bytes", self.ideal_bytes), ("flops", self.ideal_flops)):
            _check_cost_model(where, label, model)
        _require_params(where, "forward", self.forward, minimum=2)
        if self.backward is not None:
            _require_params(where, "backward", self.backward, minimum=3)
        self._check_tolerances(where)
        factors = self.error_factor
        if not (
            isinstance(factors, tuple)
            and len(factors) == 2
            and all(_positive_number(f) for f in factors)
        ):
            raise OpDefinitionError(
                f"{where}: error_factor is (forward, gradients), two numbers >= 1, got {factors!r}"
            )
        _check_knobs(where, self.knobs)
        for item in self.no_grad:
            if isinstance(item, bool) or not isinstance(item, (int, str)):
                raise OpDefinitionError(f"{where}: no_grad holds {item!r}; use names or positions")
            self.input_position(where, "no_grad", item)

    def _check_tolerances(self, where: str) -> None:
        known = {c.name for c in (*self.cases, *self.bench)}
        for t in self.tolerances:
            if not isinstance(t, Tolerance):
                raise OpDefinitionError(f"{where}: tolerances holds {t!r}, not a portkit.Tolerance")
            if t.case is not None and t.case not in known:
                raise OpDefinitionError(
                    f"{where}: tolerance for case {t.case!r}, which the op does not have; "
                    f"cases: {', '.join(sorted(known))}"
                )
            if t.grad and self.backward is None:
                raise OpDefinitionError(f"{where}: tolerance with grad=True but no backward")
            if t.grad and t.output is not None:
                self.input_position(where, "tolerance", t.output)

    @property
    def input_names(self) -> tuple[str, ...]:
        """The forward's parameter names after ``k`` (empty where it takes ``*inputs``)."""
        params = list(inspect.signature(self.forward).parameters.values())[1:]
        if any(p.kind is p.VAR_POSITIONAL for p in params):
            return ()
        return tuple(p.name for p in params)

    def input_label(self, position: int) -> str:
        """``input 2 (src)``: the position among all inputs, and the name if known."""
        names = self.input_names
        named = f" ({names[position]})" if position < len(names) else ""
        return f"input {position}{named}"

    def input_position(self, where: str, what: str, item: int | str) -> int:
        """The position of the input ``item`` names, or an OpDefinitionError."""
        names = self.input_names
        if isinstance(item, int):
            if item < 0 or (names and item >= len(names)):
                raise OpDefinitionError(f"{where}: {what} input {item} is not an input position")
            return item
        if item not in names:
            listing = ", ".join(names) if names else "none (forward takes *inputs)"
            raise OpDefinitionError(
                f"{where}: {what} names input {item!r}; the forward's inputs are {listing}"
            )
        return names.index(item)

    @property
    def no_grad_positions(self) -> frozenset[int]:
        return frozenset(self.input_position("", "no_grad", i) for i in self.no_grad)

    @property
    def has_backward(self) -> bool:
        return self.backward is not None

    def _dtypes_hint(self, case: Case) -> str:
        """How to make the op take the dtypes of ``case`` it refuses (none: "")."""
        fixed = {d for d in self.input_dtypes if d is not None}
        missing = [d for d in case.dtypes if d not in self.dtypes and d not in fixed]
        if not missing:
            return ""
        wanted = ", ".join(repr(d) for d in (*self.dtypes, missing[0]))
        hint = f" (declare the dtypes it takes: @portkit.op(dtypes=({wanted}), ...)"
        if case.gradcheck:  # the generators add it in float64 whatever their dtypes
            hint += "; or, for an op without float64, leave it out: gradcheck=False"
        return hint + ")"

    def refused_dtype(self, dtypes: Sequence[str]) -> str | None:
        """Why inputs of these dtypes (one per tensor input) are refused, or None (the
        runtime's rule, which an exported package applies too)."""
        from portkit.runtime.op_inputs import refused_dtype

        return refused_dtype(dtypes, self.dtypes, self.input_dtypes)


def _positive_number(value: object) -> bool:
    import math

    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 1
    )


def _check_cost_model(where: str, label: str, model: object) -> None:
    if model is None or callable(model):
        return
    if isinstance(model, Mapping):
        unknown = sorted(set(model) - set(DIRECTIONS))
        if unknown:
            raise OpDefinitionError(
                f"{where}: {label}= keys {unknown} unknown; use {list(DIRECTIONS)}"
            )
        if all(callable(f) for f in model.values()):
            return
    raise OpDefinitionError(
        f"{where}: {label}= takes f(*inputs) -> int or {{'forward': f, 'backward': g}}, "
        f"got {model!r}"
    )


def _check_knobs(where: str, knobs: tuple[tuple[str, tuple[Any, ...]], ...]) -> None:
    for name, values in knobs:
        if not (isinstance(name, str) and name.isidentifier() and not name.startswith("_")):
            raise OpDefinitionError(f"{where}: knob name {name!r} is not a Python identifier")
        if not values:
            raise OpDefinitionError(f"{where}: knob {name} lists no values")
        odd = [v for v in values if not isinstance(v, (int, float, str))]
        if odd:
            raise OpDefinitionError(
                f"{where}: knob {name} holds {odd[0]!r}; values are ints, floats, bools or strings"
            )
        if len(set(map(repr, values))) != len(values):
            raise OpDefinitionError(f"{where}: knob {name} lists a value twice: {list(values)}")


def _as_knobs(where: str, knobs: object) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if not isinstance(knobs, Mapping):
        raise OpDefinitionError(
            f"{where}: knobs= takes {{name: [values, the default first]}}, got {knobs!r}"
        )
    out = []
    for name, values in knobs.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise OpDefinitionError(
                f"{where}: knob {name!r} takes a list of values (the default first), got {values!r}"
            )
        out.append((name, tuple(values)))
    return tuple(out)


def _require_params(where: str, name: str, fn: Callable, minimum: int) -> None:
    if not callable(fn):
        raise OpDefinitionError(f"{where}: {name} must be a function")
    params = inspect.signature(fn).parameters.values()
    variadic = any(p.kind is p.VAR_POSITIONAL for p in params)
    if not variadic and len(params) < minimum:
        shape = "(k, *inputs)" if name == "forward" else "(k, saved, *grad_outputs)"
        raise OpDefinitionError(f"{where}: {name} must take {shape}")


def op(
    *,
    reference: Callable,
    cases: Sequence[Case],
    dtypes: Sequence[str] = DEFAULT_OP_DTYPES,
    same_shape: bool = True,
    input_dtypes: Sequence[str | None] = (),
    bench: Sequence[Case] = (),
    bytes: CostModel | None = None,  # noqa: A002 (the name the decorator reads best with)
    flops: CostModel | None = None,
    reference_in: str | None = None,
    tolerances: Sequence[Tolerance] | Tolerance = (),
    no_grad: Sequence[int | str] | int | str = (),
    error_factor: tuple[float, float] = (2.0, 5.0),
    baseline: Callable | None = None,
    teaching: str | None = None,
    knobs: Mapping[str, Sequence[Any]] | None = None,
) -> Callable[[type], type]:
    """Declare the class below as an op.

    reference:  the PyTorch function the kernels must match (its autograd is the
                reference backward).
    cases:      inputs to check, e.g. ``portkit.cases.elementwise(special=[...])``.
    dtypes:     dtypes the op accepts (portkit.project.dtypes.DTYPES: float16, bfloat16,
                float32, float64, integers, bool); others are refused with an
                InputError. Inputs not fixed by ``input_dtypes`` share one of them.
    input_dtypes: per input, None or a fixed dtype (``(None, "int64")``: a float
                tensor of the op's dtype and an int64 index tensor).
    same_shape: all tensor inputs must share one shape (elementwise ops). For other
                rules, define ``check_inputs(*inputs)`` on the class and raise
                ``portkit.InputError``.
    bench:      cases for ``portkit bench`` (default: the op's GPU-only cases, or its
                largest), e.g. ``[portkit.cases.custom("float32-4096x4096", [(4096, 4096)])]``.
    bytes:      the fewest bytes the op must move, ``f(*inputs) -> int`` for the forward
                or ``{"forward": f, "backward": g}``; default: the inputs' and outputs'
                sizes. ``portkit bench`` reports GB/s and % of copy bandwidth from it.
    flops:      the same shape of function for floating-point operations: compute-bound
                ops are reported in FLOP/s.
    reference_in: "float64" (or "float32") runs the reference in that dtype and rounds
                its results once, for kernels that accumulate wider than they store (a
                float64 running sum): torch's float32 reference then carries more error
                than the kernel. Default: half precision runs in float32.
    tolerances: ``[portkit.Tolerance(rtol, atol, reason="...", output=..., grad=...,
                case=..., against=..., dtype=...)]``: replaces the dtype table's default
                where the selectors match; the reason is shown wherever it is used.
    no_grad:    float inputs without a gradient (constant tables, masks), by the
                forward's parameter name or position: ``no_grad=("cos", "sin")``.
    error_factor: (forward, gradients): how many times torch's own error (its reference
                in the kernels' precision against float64) an output or gradient may
                show; default (2, 5), as FlashAttention's tests (checking/control.py).
    baseline:   the fastest torch way to compute the op, with the reference's signature
                and outputs (``torch.sigmoid``, ``F.rms_norm`` in a lambda): what a user
                would call instead of the twin. ``portkit bench`` checks its outputs like
                the reference's and times the twin against the best of it, the reference
                and ``torch.compile`` of the reference.
    teaching:   why the op's times are no speed claim (``"float64 sums: a teaching
                example"``): ``portkit bench`` marks its rows, README tables skip them.
    knobs:      tunable launch parameters, ``{"fwd_elems": [16, 8, 32]}``: name -> the
                values a launcher accepts, the first the default. Launchers read the
                chosen value as ``portkit.knobs(k, x).fwd_elems``; ``portkit tune`` picks
                per GPU and shape bucket (docs/authoring.md, "Tuned launch parameters").
    """

    def decorate(cls: type) -> type:
        if not isinstance(cls, type):
            raise OpDefinitionError("@portkit.op decorates a class holding forward/backward")
        forward = cls.__dict__.get("forward")
        if forward is None:
            raise OpDefinitionError(f"@portkit.op class {cls.__name__}: needs forward(k, *inputs)")
        definition = OpDefinition(
            class_name=cls.__name__,
            reference=reference,
            forward=_plain(forward),
            backward=_plain(cls.__dict__.get("backward")),
            cases=tuple(cases),
            dtypes=tuple(dtypes),
            same_shape=same_shape,
            check_inputs=_plain(cls.__dict__.get("check_inputs")),
            input_dtypes=tuple(input_dtypes),
            bench=tuple(bench),
            ideal_bytes=bytes,
            ideal_flops=flops,
            reference_in=reference_in,
            tolerances=_as_items(tolerances, Tolerance),
            no_grad=_as_items(no_grad, (int, str)),
            error_factor=tuple(error_factor) if isinstance(error_factor, list) else error_factor,
            baseline=baseline,
            teaching=teaching,
            knobs=_as_knobs(f"@portkit.op class {cls.__name__}", knobs or {}),
        )
        setattr(cls, OP_ATTRIBUTE, definition)
        return cls

    return decorate


def _as_items(value: object, single: type | tuple[type, ...]) -> tuple:
    """One item or a sequence of them, as a tuple."""
    # mypy: object is not iterable; anything but one item is a sequence of them here
    return (value,) if isinstance(value, single) else tuple(value)  # type: ignore[arg-type]


def _plain(member: Any) -> Any:
    """Accept plain functions and @staticmethod alike (a class's forward, or None)."""
    if isinstance(member, staticmethod):
        return member.__func__
    return member
