"""Run an op's host launchers against kernels that only record their launches.

No kernel executes: the log says which kernels the launchers call, in what order,
with what launch configuration and argument types. The compile check uses it to
compile exactly the signatures the cases launch; the twin to instantiate the template
combinations they launch; ``portkit sim`` to find the first
kernel a forward launches; the benchmark to count simulated threads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from portkit.errors import LauncherError, OpDefinitionError, PortkitError, raised
from portkit.launch.kernel_set import KernelSet, LaunchConfig, LaunchTarget
from portkit.launch.op_inputs import as_tuple
from portkit.project.cases import Case, make_grad_outputs, make_inputs
from portkit.project.dtypes import BITS_VIEW, dtype_name
from portkit.project.tuning_table import declared_choice
from portkit.runtime.launch_contract import KernelsKind

if TYPE_CHECKING:
    import torch

    from portkit.project.discovery import Op


@dataclass(frozen=True)
class TensorArg:
    """A tensor argument as the twin signature check sees it: no data kept alive."""

    dtype: str
    shape: tuple[int, ...]

    @property
    def sizes(self) -> set[int]:
        """Its element count, each dimension, and the products of leading and of
        trailing dimensions (``rows = numel // cols`` of a tensor seen as a matrix)."""
        found = set(self.shape)
        for cut in range(len(self.shape) + 1):
            found.add(math.prod(self.shape[:cut]))
            found.add(math.prod(self.shape[cut:]))
        return found


@dataclass(frozen=True)
class Launch:
    kernel: str
    config: LaunchConfig
    signature: tuple  # numba types of the arguments
    args: tuple = ()  # a TensorArg for each tensor, the value itself for a scalar

    @property
    def blocks(self) -> int:
        return math.prod(self.config.grid)

    @property
    def threads(self) -> int:
        return self.blocks * self.config.threads_per_block


class _Recorder(LaunchTarget):
    def __init__(self, name: str, log: list[Launch]) -> None:
        self.name, self.log = name, log

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
        import numba
        import torch

        signature = tuple(
            numba_type(a) if isinstance(a, torch.Tensor) else numba.typeof(a) for a in args
        )
        described = tuple(
            TensorArg(dtype_name(a.dtype), tuple(a.shape)) if isinstance(a, torch.Tensor) else a
            for a in args
        )
        self.log.append(Launch(self.name, config, signature, described))


def numba_type(tensor: torch.Tensor) -> Any:
    """The numba type a kernel gets for ``tensor``: its NumPy array's, except bfloat16,
    which NumPy lacks: an array of numba-cuda's bfloat16 (project/dtypes.py)."""
    import numba

    if dtype_name(tensor.dtype) in BITS_VIEW:
        from numba.cuda import bf16

        return numba.types.Array(bf16.bfloat16, tensor.dim(), "C")
    return numba.typeof(tensor.numpy())


def record_launches(
    op: Op,
    case: Case,
    backward: bool = True,
    *,
    knob_choice: Any = None,
    kind: KernelsKind = KernelsKind.TRACE,
) -> list[Launch]:
    """The launches of ``op``'s forward (and backward, if asked and defined) on ``case``,
    with the declared knob defaults unless ``knob_choice`` (a ``KnobChoice``) is given;
    ``kind=KernelsKind.SIMULATED``: the launches the CPU backends get (their small
    ``portkit.sm_count``), not a GPU's."""
    log: list[Launch] = []
    recorders = {n: _Recorder(n, log) for n in op.kernels}
    k = KernelSet(op.name, "trace", "cpu", recorders, kind=kind)
    k.knob_choice = declared_choice(op) if knob_choice is None else knob_choice
    from portkit.runtime.autograd_function import forward_pair  # imports torch: not at start-up

    inputs = make_inputs(case, "cpu")
    definition = op.definition
    result = launched(op, case, "forward", lambda: definition.forward(k, *inputs, *case.extra))
    outputs, saved = forward_pair(op.name, result, OpDefinitionError)
    backward_launcher = definition.backward
    if backward and backward_launcher is not None:
        outputs = as_tuple(outputs)
        launched(
            op,
            case,
            "backward",
            lambda: backward_launcher(k, as_tuple(saved), *make_grad_outputs(case, outputs)),
        )
    return log


def launched(op: Op, case: Case, stage: str, call: Callable[[], Any]) -> Any:
    """What ``call`` (the op's ``stage`` launcher on ``case``) returns; anything it raises
    but a portkit error becomes one LauncherError line: what, where in the prototype, and
    that portkit found it tracing the launches (or, for a registered op, its layout)."""
    try:
        return call()
    except PortkitError:
        raise
    except Exception as exc:
        text, site = raised(exc, op.prototype_path)
        raise LauncherError(
            f"op {op.name}: its {stage} launcher raised {text} on case {case.name}, while "
            f"portkit traced its launches",
            site,
        ) from exc


def launch_signatures(op: Op, dtype: str) -> dict[str, tuple]:
    """Each kernel's argument types in the first non-empty case of ``dtype`` that
    launches it (types do not depend on sizes, but a launcher may pick its kernel by
    size: softmax holds short rows in registers and streams long ones), from the op's
    traced launches: the compile check, the lint and the signature check share one trace."""
    cases = {c.name for c in op.definition.cases if c.dtype == dtype and c.numel}
    found: dict[str, tuple] = {}
    for case, launch in traced_launches(op):
        if case in cases:
            found.setdefault(launch.kernel, launch.signature)
    return found


# definition's id -> (the definition, kept alive so that the id stays its own; the launches)
_TRACED: dict[int, tuple[Any, list[tuple[str, Launch]]]] = {}
_TRACED_KEPT = 32


def traced_launches(op: Op) -> list[tuple[str, Launch]]:
    """(case name, launch) for every launch of every case that is not GPU-only, traced
    once per op definition in a process: the signature check, the twin's
    instantiations (backends/twin/instances.py) and ``launch_signatures`` all ask, and a
    large case allocates its full-size inputs."""
    definition = op.definition
    kept = _TRACED.get(id(definition))
    if kept is not None and kept[0] is definition:
        return kept[1]
    launches = [
        (case.name, launch)
        for case in definition.cases
        if not case.gpu_only
        for launch in record_launches(op, case)
    ]
    launches += _knob_only_launches(op, {launch.kernel for _, launch in launches})
    if len(_TRACED) >= _TRACED_KEPT:
        del _TRACED[next(iter(_TRACED))]
    _TRACED[id(definition)] = (definition, launches)
    return launches


def _knob_only_launches(op: Op, launched: set[str]) -> list[tuple[str, Launch]]:
    """The launches of kernels that only a knob's other value launches (softmax_warp's
    split rows under warps_per_row > 1): each other value of each knob, the rest at
    their defaults, on the cases that are neither GPU-only nor large, so the compile and
    signature checks and the twin's instantiations cover every kernel a tuned table can
    pick. Nothing (and no extra tracing) when the defaults launch every kernel."""
    if not set(op.kernels) - launched:
        return []
    found: list[tuple[str, Launch]] = []
    for _, _, pinned in one_knob_changed(op):
        for case in small_cases(op):
            try:
                traced = record_launches(op, case, knob_choice=pinned)
            except PortkitError:  # a value a GPU would refuse: lint's knob finding
                continue
            found += [(case.name, launch) for launch in traced if launch.kernel not in launched]
    return found


def one_knob_changed(op: Op) -> list[tuple[str, Any, Any]]:
    """(label, value, knob choice pinned to it) for each other value of each declared
    knob, the rest at their defaults: the values no table may pick yet, which the trace
    and lint check."""
    if not op.definition.knobs:
        return []
    from portkit.runtime.knob_choice import describe

    choice = declared_choice(op)
    base = {name: values[0] for name, values in choice.declared.items()}
    found = []
    for name, values in choice.declared.items():
        for value in values[1:]:
            label = describe({name: value})
            found.append((label, value, choice.pinned({**base, name: value}, label)))
    return found


def small_cases(op: Op) -> list[Case]:
    """The op's cases that a CPU traces: neither GPU-only nor large."""
    return [c for c in op.definition.cases if not (c.gpu_only or c.large)]
