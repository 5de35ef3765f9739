"""Which launch configuration a launcher uses: ``portkit.knobs(k, x)``.

An op declares its tunable launch parameters (``@portkit.op(knobs={"fwd_elems": [16, 8]})``,
the first value of each the default). Its launchers read the chosen values through

    kn = portkit.knobs(k, x)      # the values for x's shape bucket on k's device
    threads = row_threads(cols, x.element_size(), kn.fwd_elems)

``k.knob_choice`` (a ``KnobChoice``) holds the declaration and the op's table of tuned
entries (``tuning/<op>.json``, written by ``portkit tune``): per GPU name and shape bucket,
the configuration that won there; elsewhere the defaults. An exported package picks by
the same rules. Standard library only (torch to name a tensor's GPU).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# The table file's format; a table of another format is refused, not misread.
TABLE_FORMAT = 1
Value = Any  # a JSON scalar: int, float, bool or str
Declared = Mapping[str, Sequence[Value]]  # knob name -> allowed values, the default first


class Knobs:
    """Chosen knob values, read as attributes (``kn.fwd_elems``) or ``kn["fwd_elems"]``."""

    __slots__ = ("_values", "_op", "_error", "label")

    def __init__(self, op: str, values: Mapping[str, Value], error: type[Exception], label: str):
        self._values, self._op, self._error = dict(values), op, error
        self.label = label  # "defaults", or where the configuration came from

    def __getattr__(self, name: str) -> Value:
        values = self._values  # __slots__: no recursion before they are set
        if name in values:
            return values[name]
        raise self._error(
            f"op {self._op} has no knob {name!r}; it declares "
            f"{', '.join(sorted(values)) or 'none (knobs= in @portkit.op)'}"
        )

    __getitem__ = __getattr__

    def as_dict(self) -> dict[str, Value]:
        return dict(self._values)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"Knobs({inner})"


def describe(values: Mapping[str, Value]) -> str:
    """``fwd_elems=8 bwd_threads_per_sm=2048``: a configuration in one label."""
    return " ".join(f"{k}={v}" for k, v in values.items()) or "no knobs"


def bucket(dtype: str, shape: Sequence[int]) -> str:
    """The shape bucket of a tensor: its dtype and each dimension rounded to the nearest
    power of two (``bfloat16-16384x4096``); a table keyed by bench shapes serves shapes
    near them. A dimension of 0 or 1 stays as it is."""
    dims = [d if d <= 1 else 1 << round(math.log2(d)) for d in shape]
    return f"{dtype}-{'x'.join(str(d) for d in dims) or 'scalar'}"


def tensor_bucket(tensor: Any) -> str:
    return bucket(str(tensor.dtype).removeprefix("torch."), tuple(tensor.shape))


def checked_values(
    op: str, declared: Declared, values: Mapping[str, Value], where: str, error: type[Exception]
) -> dict[str, Value]:
    """``values`` completed with the defaults, or ``error`` naming an unknown knob or a
    value outside its declared set."""
    unknown = sorted(set(values) - set(declared))
    if unknown:
        raise error(
            f"{where}: op {op} has no knob {unknown[0]!r}; it declares "
            f"{', '.join(sorted(declared)) or 'none'}"
        )
    for name, value in values.items():
        allowed = list(declared[name])
        if value not in allowed or type(value) is not type(allowed[allowed.index(value)]):
            raise error(
                f"{where}: knob {name}={value!r} of op {op} is not among its declared values "
                f"{allowed}"
            )
    return {name: values.get(name, allowed[0]) for name, allowed in declared.items()}


def _is_tensor(value: Any) -> bool:
    """``value`` is a tensor (torch imported here: only `portkit tune`'s run asks)."""
    import torch

    return isinstance(value, torch.Tensor)


def _gpu_name(tensor: Any) -> str:
    """The name of the GPU ``tensor`` lives on (its index None: the current device's)."""
    import torch

    return torch.cuda.get_device_name(tensor.device.index)


class KnobChoice:
    """An op's declared knobs and tuned table: ``values(tensor)`` picks the entry for the
    GPU ``tensor`` lives on and its shape bucket, else the defaults. ``pinned`` fixes one
    configuration whatever the tensor (``portkit check``, ``portkit tune``)."""

    def __init__(
        self,
        op: str,
        declared: Declared,
        table: Mapping[str, Any] | None,
        error: type[Exception],
        where: str = "tuning table",
    ) -> None:
        self.op, self.error = op, error
        self.declared = {name: tuple(values) for name, values in declared.items()}
        self.defaults = Knobs(
            op, checked_values(op, self.declared, {}, where, error), error, "defaults"
        )
        # GPU name -> bucket -> Knobs, every entry checked against the declaration now
        self.entries: dict[str, dict[str, Knobs]] = {}
        table = table or {}
        if table and table.get("format") != TABLE_FORMAT:
            raise error(f"{where}: format {table.get('format')!r}, not {TABLE_FORMAT}")
        for gpu, buckets in table.get("gpus", {}).items():
            for key, entry in buckets.items():
                label = f"tuned for {gpu}, {key}"
                values = checked_values(
                    op, self.declared, entry["config"], f"{where}: {label}", error
                )
                self.entries.setdefault(gpu, {})[key] = Knobs(op, values, error, label)
        self._pin: Knobs | None = None
        # Set by `portkit tune` on a pinned choice: the buckets the launchers ask about.
        self.asked: dict[str, None] | None = None
        self._device_name: Callable[[Any], str] = _gpu_name  # asked on a cache miss only
        self._cache: dict[tuple, Knobs] = {}

    def pinned(self, values: Mapping[str, Value], label: str = "") -> KnobChoice:
        """The same op with one configuration whatever the device and shape."""
        choice = KnobChoice(self.op, self.declared, None, self.error)
        full = checked_values(self.op, self.declared, values, "pinned configuration", self.error)
        choice._pin = Knobs(self.op, full, self.error, label or describe(full))
        return choice

    def configurations(self, bucket: str | None = None) -> list[Knobs]:
        """Every configuration the table can pick, the defaults first, each once; with
        ``bucket``, those it can pick for a tensor of that shape bucket (on any GPU)."""
        seen: dict[tuple, Knobs] = {tuple(self.defaults.as_dict().items()): self.defaults}
        for buckets in self.entries.values():
            for key, knobs in buckets.items():
                if bucket is None or key == bucket:
                    seen.setdefault(tuple(knobs.as_dict().items()), knobs)
        return list(seen.values())

    def values(self, tensor: Any) -> Knobs:
        if self._pin is not None:
            if self.asked is not None and _is_tensor(tensor):
                self.asked[tensor_bucket(tensor)] = None  # tune's run: plain sizes
            return self._pin
        if not self.entries or getattr(tensor, "device", None) is None:
            return self.defaults
        if tensor.device.type != "cuda":
            return self.defaults  # the simulator and the CPU twin: no GPU, no table entry
        # int(): a traced call's dimensions are SymInts, which do not hash; the entry is
        # chosen for the example sizes, as the real call will choose it (torch guards on it)
        shape = tuple(int(d) for d in tensor.shape)
        key = (tensor.device.index, tensor.dtype, shape)
        found = self._cache.get(key)
        if found is None:
            buckets = self.entries.get(self._device_name(tensor), {})
            dtype = str(tensor.dtype).removeprefix("torch.")
            found = buckets.get(bucket(dtype, shape), self.defaults)
            if len(self._cache) > 512:  # shapes follow a model's; a few hundred at most
                self._cache.clear()
            self._cache[key] = found
        return found


def knobs(k: Any, tensor: Any = None) -> Knobs:
    """The knob values a launcher uses for ``tensor`` (its device picks the table's GPU
    entry, its dtype and shape the bucket): ``kn = portkit.knobs(k, x)``. The backward
    passes the same tensor as the forward (a saved input) so both pick one entry."""
    choice = k.knob_choice  # declared by every k (kernels_protocol.Kernels)
    if choice is None:
        return Knobs(k.op, {}, AttributeError, "no knobs")
    return choice.values(tensor)
