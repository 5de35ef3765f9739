"""What a diff finds, as data: the two sides, per-tensor and per-element differences,
and the plan (which implementations meet). The engine (``case_diff``), the pattern
detectors and the report all read these; none of them imports another for its types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from portkit.checking.compare import Tolerance
from portkit.diffing.writers import CapturedLaunch, Writer
from portkit.project.cases import Case
from portkit.results import FailureSite

if TYPE_CHECKING:
    import torch

    from portkit.backends import Backend


@dataclass
class Side:
    """What one implementation produced for one case."""

    backend: Backend
    outputs: tuple[torch.Tensor, ...] = ()
    grads: tuple[torch.Tensor | None, ...] = ()
    launches: list[CapturedLaunch] = field(default_factory=list)
    machine: Any = None  # the simulator's machine, when the side ran in it
    error: str = ""
    error_kind: str = ""  # what kind of failure, for the verdict: "twin compile error"
    error_site: FailureSite | None = None  # where it failed (a fault's kernel, thread, line)


@dataclass
class ElementDiff:
    index: tuple[int, ...]
    position: int  # flat
    prototype: float
    other: float
    writer: Writer | None


@dataclass
class TensorDiff:
    """One output or gradient, prototype against the other side."""

    name: str  # "output 0", "grad of input 1"
    shape: tuple[int, ...]
    dtype: str
    tolerance: Tolerance
    total: int
    mismatches: int
    max_abs: float
    max_rel: float
    max_ulp: int
    nan_disagreements: int
    inf_disagreements: int
    first: list[ElementDiff]
    mapped: list[ElementDiff]  # a sample spread over the mismatches, with writers
    patterns: list[str]
    # Kept for --plot and the pattern detectors; not part of the JSON.
    prototype_values: Any = None
    other_values: Any = None
    bad: Any = None
    # Elements float atomics summed, compared with the summation-order bound
    # (checking/order_bound.py): what that comparison found, one line.
    order_note: str = ""
    # Against the reference, where `portkit check` uses the measured control: its bound in
    # words, the allowed error per element and the float64 reference it is measured from
    # (mismatches are outside it, as check's verdict); "" / None where the tolerance rules.
    rule: str = ""
    allowed: Any = None
    exact: Any = None

    @property
    def share(self) -> float:
        return self.mismatches / self.total if self.total else 0.0


@dataclass
class CaseDiff:
    case: Case
    prototype: str  # backend names
    other: str
    tensors: list[TensorDiff] = field(default_factory=list)
    error: str = ""  # why the case could not be compared (then nothing was)
    error_kind: str = ""  # short, for the verdict: "twin compile error"
    error_site: FailureSite | None = None  # where the side that failed failed, if known
    seconds: float = 0.0
    blocks_simulated: int = 0
    launches: list[CapturedLaunch] = field(default_factory=list)  # the prototype's

    @property
    def differs(self) -> bool:
        """Compared, and something differs; a case that could not run does not differ."""
        return not self.error and any(t.mismatches for t in self.tensors)


@dataclass
class Plan:
    """Which implementations meet, and what could not run on this machine."""

    prototype: Backend
    other: Backend
    tolerance: dict[str, Tolerance]
    note: str = ""  # said plainly when the twin could not run
    twin_missing: str = ""  # why no twin ran, when the other side is the reference
    # backend name -> (error, kind) of a build that failed: its later cases are not run.
    unbuilt: dict[str, tuple[str, str]] = field(default_factory=dict)
