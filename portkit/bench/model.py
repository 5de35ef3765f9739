"""What a benchmark run found, the figures derived from it, and its JSON form.

One ``Measurement`` per op x case x direction x implementation; a ``Report`` holds them
with the machine and the copy bandwidth measured in the same run, and derives the
figures people compare: GB/s, % of copy bandwidth, FLOP/s, speed against torch, twin
against prototype. The JSON written by ``--json`` and ``--save`` is ``Report.to_dict``,
and ``--compare`` reads it back with ``Report.from_dict``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portkit.atomic_write import write_atomic
from portkit.bench.peaks import peak_tflops
from portkit.bench.stats import Summary
from portkit.bench.timing import SPIN
from portkit.errors import PortkitError
from portkit.results import Outcome

SCHEMA = "portkit-bench/3"  # a row's status is an Outcome: "pass", "fail", "error", "skip"
# /1 had one "check" string ("ok", "skip: why", ...); /2 a status of bench's own words.
READS = ("portkit-bench/1", "portkit-bench/2", SCHEMA)
_BENCH_WORDS = {
    "ok": Outcome.PASS,
    "wrong": Outcome.FAIL,
    "skipped": Outcome.SKIP,
    "skip": Outcome.SKIP,
}
COMPILED = "compiled"  # the role of torch.compile's row: a comparison, not the op under test
BASELINE = "baseline"  # the role of the op's baseline= row: the torch call a user would make
# The torch rows a twin must beat: the fastest of them is "best torch" (ties: this order).
BEST_OF = (BASELINE, "reference", COMPILED)
# A median below this is mostly fixed cost, not bandwidth: a launch and the ramp-up and
# tail of a grid take 2-5 us on an H100, so under 20 us they are a tenth to a quarter of
# the time, and % copy (or % peak) measures them rather than the kernel's streaming.
LATENCY_BOUND_US = 20.0
# x_best first: the speed against the fastest torch row (BEST_OF); x_torch is against the
# reference alone (the op's definition of right, often a slow decomposition).
FIGURES = ("x_best", "gbps", "copy", "tflops", "peak", "x_torch", "x_proto")


# A row's status is portkit.results.Outcome, as in check and watch: PASS (timed, the output
# right), FAIL (an output differs from the reference at the timed shape), ERROR (the call
# raised, or its kernels did not build), SKIP (not run on this machine: no GPU for it).


def read_status(value: str) -> Outcome:
    """A saved row's status: an Outcome's value, or a portkit-bench/2 word ("ok", ...)."""
    return _BENCH_WORDS.get(value) or Outcome(value)


def parse_legacy(check: str) -> tuple[Outcome, str]:
    """A portkit-bench/1 "check" string ("ok", "skip: why", "wrong: ...") as (status, detail)."""
    head, _, rest = check.partition(": ")
    known = {**_BENCH_WORDS, "error": Outcome.ERROR}
    return (known[head], rest) if head in known else (Outcome.FAIL, check)


@dataclass(frozen=True)
class Measurement:
    op: str
    case: str
    shapes: tuple[tuple[int, ...], ...]
    dtype: str
    direction: str  # "forward" or "backward"
    implementation: str  # backend name: torch, numba, twin
    role: str  # reference, baseline, compiled, prototype or twin
    time: Summary | None  # microseconds of GPU time per call; None when it did not run
    host_us: float | None  # host time to issue one call (median)
    bytes: int
    flops: int | None = None
    status: Outcome = Outcome.PASS
    detail: str = ""  # why it is not OK: the mismatch report, the exception, the skip
    timing: str = SPIN  # how it was timed: portkit.bench.timing's SPIN or EVENTS
    scaled_from: str | None = None  # the case this one scales up (portkit.bench.scaling)
    teaching: str = ""  # the op's teaching= reason: its times are no speed claim

    @property
    def ok(self) -> bool:
        return self.status is Outcome.PASS and self.time is not None

    @property
    def failed(self) -> bool:
        """A wrong output or a failed call of an implementation under test: exit 1.
        torch.compile's row is a comparison; its failure is reported, not the op's."""
        return self.status.bad and self.role != COMPILED

    @property
    def latency_bound(self) -> bool:
        return self.time is not None and self.time.median < LATENCY_BOUND_US

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.op, self.case, self.direction, self.implementation)

    def to_dict(self) -> dict:
        return {
            "op": self.op,
            "case": self.case,
            "shapes": [list(s) for s in self.shapes],
            "dtype": self.dtype,
            "direction": self.direction,
            "implementation": self.implementation,
            "role": self.role,
            "time_us": self.time.to_dict() if self.time else None,
            "host_us": self.host_us,
            "bytes": self.bytes,
            "flops": self.flops,
            "status": self.status.value,
            "detail": self.detail,
            "timing": self.timing,
            "scaled_from": self.scaled_from,
            "teaching": self.teaching,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Measurement:
        if "status" in data:
            status, detail = read_status(data["status"]), data["detail"]
        else:
            status, detail = parse_legacy(data["check"])
        return cls(
            op=data["op"],
            case=data["case"],
            shapes=tuple(tuple(s) for s in data["shapes"]),
            dtype=data["dtype"],
            direction=data["direction"],
            implementation=data["implementation"],
            role=data["role"],
            time=Summary.from_dict(data["time_us"]) if data["time_us"] else None,
            host_us=data["host_us"],
            bytes=data["bytes"],
            flops=data.get("flops"),
            status=status,
            detail=detail,
            timing=data.get("timing", SPIN),  # reports written before it had the field
            scaled_from=data.get("scaled_from"),
            teaching=data.get("teaching") or "",  # reports written before it had the field
        )


@dataclass(frozen=True)
class Machine:
    gpu: str
    sms: int
    l2_bytes: int
    date: str  # UTC, ISO 8601
    versions: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CopyBandwidth:
    """A torch clone of a large buffer: read + write bytes over its median time."""

    bytes: int
    time: Summary

    @property
    def gbps(self) -> float:
        return gbps(self.bytes, self.time.median)


def gbps(count: int, microseconds: float) -> float:
    return count / (microseconds * 1e-6) / 1e9 if microseconds > 0 else 0.0


@dataclass(frozen=True)
class Report:
    machine: Machine
    copy: CopyBandwidth
    reps: int
    warmup: int
    measurements: tuple[Measurement, ...]

    # -- derived figures ------------------------------------------------------------------
    def find(self, op: str, case: str, direction: str, implementation: str) -> Measurement | None:
        for m in self.measurements:
            if m.key == (op, case, direction, implementation):
                return m
        return None

    def _peer(self, m: Measurement, role: str) -> Measurement | None:
        for other in self.measurements:
            if (other.op, other.case, other.direction, other.role) == (
                m.op,
                m.case,
                m.direction,
                role,
            ) and other.ok:
                return other
        return None

    def best_torch(self, m: Measurement) -> Measurement | None:
        """The fastest torch row of ``m``'s op, case and direction that ran and was
        right: the baseline, the reference or torch.compile of it (``BEST_OF``)."""
        rows = [p for p in (self._peer(m, role) for role in BEST_OF) if p and p.time]
        # mypy: rows hold only measurements with a time
        return min(rows, key=lambda p: p.time.median) if rows else None  # type: ignore[union-attr]

    def figures(self, m: Measurement) -> dict[str, float | None]:
        """Speed vs the best torch row (its time over this time: 0.5 is half as fast),
        GB/s, fraction of copy bandwidth, TFLOP/s and its fraction of the GPU's peak
        (portkit.bench.peaks), speed vs the reference alone, for a twin its speed over
        the prototype's, and whether the time is too short to say anything about
        bandwidth (``LATENCY_BOUND_US``)."""
        if not m.ok:
            return {k: None for k in FIGURES} | {"latency_bound": False}
        assert m.time is not None
        rate = gbps(m.bytes, m.time.median)
        torch_m = self._peer(m, "reference")
        best = self.best_torch(m)
        proto = self._peer(m, "prototype") if m.role == "twin" else None
        tflops = (m.flops / (m.time.median * 1e-6) / 1e12) if m.flops else None
        peak = peak_tflops(self.machine.gpu, m.dtype)
        return {
            "x_best": best.time.median / m.time.median if best and best.time else None,
            "gbps": rate,
            "copy": rate / self.copy.gbps if self.copy.gbps else None,
            "tflops": tflops,
            "peak": tflops / peak if tflops is not None and peak else None,
            "x_torch": torch_m.time.median / m.time.median if torch_m and torch_m.time else None,
            "x_proto": proto.time.median / m.time.median if proto and proto.time else None,
            "latency_bound": m.latency_bound,
        }

    def best_role(self, m: Measurement) -> str | None:
        best = self.best_torch(m) if m.ok else None
        return best.role if best else None

    def untimed_best(self) -> list[str]:
        """The roles of BEST_OF no row timed in a run that compares kernels with torch:
        x best is then the best of the others (a bench without torch.compile's rows was
        once quoted as "best of torch")."""
        timed = {m.role for m in self.measurements if m.time is not None}
        if not timed - set(BEST_OF):  # torch rows only: nothing is compared with them
            return []
        return [role for role in BEST_OF if role not in timed]

    @property
    def failures(self) -> list[Measurement]:
        """The rows that make ``portkit bench`` exit 1 (``Measurement.failed``)."""
        return [m for m in self.measurements if m.failed]

    # -- JSON -----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "machine": vars(self.machine),
            "copy": {
                "bytes": self.copy.bytes,
                "time_us": self.copy.time.to_dict(),
                "gbps": self.copy.gbps,
            },
            "reps": self.reps,
            "warmup": self.warmup,
            "best_torch_untimed": self.untimed_best(),  # derived: not read back
            "results": [
                {**m.to_dict(), "best_torch": self.best_role(m), **self.figures(m)}
                for m in self.measurements
            ],
        }

    @classmethod
    def from_dict(cls, data: Any, source: str = "report") -> Report:
        if not isinstance(data, dict) or data.get("schema") not in READS:
            raise PortkitError(f"{source} is not a portkit bench report (schema {SCHEMA})")
        try:
            return cls(
                machine=Machine(**data["machine"]),
                copy=CopyBandwidth(
                    data["copy"]["bytes"], Summary.from_dict(data["copy"]["time_us"])
                ),
                reps=data["reps"],
                warmup=data["warmup"],
                measurements=tuple(Measurement.from_dict(r) for r in data["results"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PortkitError(f"{source} is a damaged portkit bench report: {exc!r}") from None

    def save(self, path: Path) -> None:
        """Write the JSON next to ``path`` and rename it there: never half a file."""
        write_atomic(path, json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> Report:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise PortkitError(f"cannot read bench report {path}: {exc.strerror}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PortkitError(f"{path} is not JSON: {exc}") from None
        return cls.from_dict(data, source=str(path))
