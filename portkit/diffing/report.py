"""How ``portkit diff`` shows its findings: rich tables, JSON, and a picture."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portkit.errors import PortkitError

if TYPE_CHECKING:
    from rich.console import Console

    from portkit.diffing.model import CaseDiff, ElementDiff, TensorDiff


def _writer_text(element: ElementDiff) -> str:
    w = element.writer
    if w is None:
        return "not found"
    return f"{w.kernel} block {w.block} thread {w.thread} line {w.line}"


def print_diff(
    console: Console, cases: Sequence[CaseDiff], notes: Sequence[str], plan_note: str
) -> None:
    from rich.table import Table
    from rich.text import Text

    for line in plan_note.splitlines():  # one note a line
        console.print(Text(f"note: {line}", style="yellow"))
    summary = Table(title="portkit diff", title_justify="left")
    for column in (
        "case",
        "prototype vs",
        "tensor",
        "max abs",
        "max rel",
        "max ULP",
        "mismatches",
        "NaN/Inf diff",
    ):
        summary.add_column(column, justify="left" if column in ("case", "tensor") else "right")
    for case in cases:
        if case.error:
            summary.add_row(
                case.case.name, case.other, "", "", "", "", Text("could not run", style="red"), ""
            )
        for t in case.tensors:
            share = f"{t.mismatches} ({100 * t.share:.3g}%)" if t.mismatches else "0"
            summary.add_row(
                case.case.name,
                f"{case.prototype} vs {case.other}",
                t.name,
                f"{t.max_abs:.3g}",
                f"{t.max_rel:.3g}",
                str(t.max_ulp),
                Text(share, style="red" if t.mismatches else "green"),
                f"{t.nan_disagreements}/{t.inf_disagreements}",
            )
    console.print(summary)
    for error, names in _errors(cases).items():  # one compile error, not one per case
        console.print(Text(f"{', '.join(names)}: could not run: {error}", style="red"))
    for case in cases:
        for t in case.tensors:
            if t.order_note:
                console.print(Text(f"{case.case.name} {t.order_note}"))
            if not t.mismatches:
                continue
            first = Table(
                title=f"{case.case.name} {t.name}: first mismatches "
                f"({t.rule or t.tolerance.describe()}; "
                f"{case.blocks_simulated} blocks re-simulated)",
                title_justify="left",
            )
            for column in ("index", case.prototype, case.other, "written by (prototype)"):
                first.add_column(column)
            for e in t.first:
                first.add_row(
                    str(list(e.index)), f"{e.prototype:.9g}", f"{e.other:.9g}", _writer_text(e)
                )
            console.print(first)
            for pattern in t.patterns:
                console.print(Text(f"  pattern: {pattern}"))
    for note in notes:
        console.print(Text(f"across cases: {note}"))
    for line, bad in verdict(cases):
        console.print(Text(line, style="bold red" if bad else "bold green"))


def _errors(cases: Sequence[CaseDiff]) -> dict[str, list[str]]:
    """Each distinct error and the cases it stopped."""
    found: dict[str, list[str]] = {}
    for case in cases:
        if case.error:
            found.setdefault(case.error, []).append(case.case.name)
    return found


def verdict(cases: Sequence[CaseDiff]) -> list[tuple[str, bool]]:
    """The last lines, each with whether it is bad news: how many of the cases that
    were compared differ, then how many could not run and why (never counted as differing)."""
    compared = [c for c in cases if not c.error]
    differing = [c for c in compared if c.differs]
    cases_word = "compared cases" if len(compared) < len(cases) else "cases"
    lines = []
    if differing:
        lines.append((f"{len(differing)} of {len(compared)} {cases_word} differ", True))
    elif compared:
        lines.append((f"all {len(compared)} {cases_word} agree", False))
    kinds: dict[str, int] = {}
    for case in cases:
        if case.error:
            kinds[case.error_kind] = kinds.get(case.error_kind, 0) + 1
    for kind, count in kinds.items():
        cases_word = "case" if count == 1 else "cases"
        lines.append((f"{count} {cases_word} could not run: {kind} (see above)", True))
    return lines


def diff_json(cases: Sequence[CaseDiff], notes: Sequence[str], plan_note: str) -> dict:
    def element(e: ElementDiff) -> dict:
        w = e.writer
        writer = (
            None
            if w is None
            else {
                "launch": w.launch,
                "kernel": w.kernel,
                "block": list(w.block),
                "thread": list(w.thread),
                "file": w.file,
                "line": w.line,
            }
        )
        return {
            "index": list(e.index),
            "prototype": _number(e.prototype),
            "other": _number(e.other),
            "writer": writer,
        }

    def tensor(t: TensorDiff) -> dict:
        return {
            "name": t.name,
            "shape": list(t.shape),
            "dtype": t.dtype,
            "rtol": t.tolerance.rtol,
            "atol": t.tolerance.atol,
            "tolerance_reason": t.tolerance.reason,
            # set where the measured control judged (against the reference, as check does):
            # then rtol/atol are only the dtype table's floor under it
            "bound": t.rule,
            "elements": t.total,
            "mismatches": t.mismatches,
            "share": t.share,
            "max_abs": t.max_abs,
            "max_rel": t.max_rel,
            "max_ulp": t.max_ulp,
            "order_note": t.order_note,
            "nan_disagreements": t.nan_disagreements,
            "inf_disagreements": t.inf_disagreements,
            "first": [element(e) for e in t.first],
            "patterns": t.patterns,
        }

    return {
        "note": plan_note,
        "cases": [
            {
                "case": c.case.name,
                "dtype": c.case.dtype,
                "prototype": c.prototype,
                "other": c.other,
                "error": c.error,
                "error_kind": c.error_kind,
                "differs": c.differs,
                "seconds": c.seconds,
                "blocks_simulated": c.blocks_simulated,
                "tensors": [tensor(t) for t in c.tensors],
            }
            for c in cases
        ],
        "across_cases": list(notes),
        "differs": any(c.differs for c in cases),
        "could_not_run": [c.case.name for c in cases if c.error],
    }


def _number(value: float) -> Any:
    """JSON has no NaN or Inf: those become strings."""
    return value if value == value and abs(value) != float("inf") else str(value)


def write_plot(path: Path, cases: Sequence[CaseDiff]) -> Path:
    """Per differing tensor: |error| over the output's shape, and mismatches per block
    (of the mapped ones). Written to a temporary file first, so a failure leaves no
    half-written picture."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PortkitError(f"--plot needs matplotlib: {exc}") from None
    import numpy as np

    differing = [(c, t) for c in cases for t in c.tensors if t.mismatches]
    if not differing:
        raise PortkitError("nothing differs, so there is nothing to plot")
    figure, axes = plt.subplots(len(differing), 2, figsize=(11, 4 * len(differing)), squeeze=False)
    for row, (case, t) in enumerate(differing):
        error = _error_image(t)
        shown = axes[row][0].imshow(error, aspect="auto", interpolation="nearest", cmap="magma")
        axes[row][0].set_title(
            f"{case.case.name} {t.name}: log10 |error| / tolerance (mismatch > 0)", fontsize=9
        )
        figure.colorbar(shown, ax=axes[row][0])
        counts: dict[tuple[int, int], int] = {}
        grid = (1, 1)
        for e in t.mapped:
            if e.writer is not None:
                key = (e.writer.block[1], e.writer.block[0])
                counts[key] = counts.get(key, 0) + 1
                grid = (e.writer.grid[1], e.writer.grid[0])
        blocks = np.zeros(grid)
        for (y, x), n in counts.items():
            blocks[y, x] = n
        axes[row][1].imshow(blocks, aspect="auto", interpolation="nearest", cmap="Reds")
        axes[row][1].set_title(
            f"mismatches per block (x right, y down) of {sum(counts.values())} mapped", fontsize=9
        )
    figure.tight_layout()
    path = Path(path)
    handle, temporary = tempfile.mkstemp(suffix=path.suffix or ".png", dir=path.parent or ".")
    os.close(handle)
    try:
        figure.savefig(temporary)
        os.replace(temporary, path)
    finally:
        plt.close(figure)
        if os.path.exists(temporary):
            os.unlink(temporary)
    return path


def _error_image(t: TensorDiff) -> Any:
    """|error| relative to the tolerance, as a 2-D image no larger than 512 x 512."""
    import numpy as np

    p = t.prototype_values.double().numpy()
    o = t.other_values.double().numpy()
    with np.errstate(all="ignore"):
        if t.allowed is not None:  # the measured control: against float64, as check judges
            o = t.exact.double().numpy()
            scale = t.allowed.double().numpy()
        else:
            scale = t.tolerance.atol + t.tolerance.rtol * np.abs(o)
        error = np.where(np.isnan(p) != np.isnan(o), 1e6, np.abs(p - o) / scale)
        error = np.nan_to_num(error, nan=0.0, posinf=1e6)
        image = np.log10(np.maximum(error, 1e-3))
    if image.ndim != 2:
        flat = image.reshape(-1)
        width = max(1, int(np.ceil(np.sqrt(flat.size))))
        padded = np.full(width * int(np.ceil(flat.size / width)), -3.0)
        padded[: flat.size] = flat
        image = padded.reshape(-1, width)
    rows = int(np.ceil(image.shape[0] / 512))
    cols = int(np.ceil(image.shape[1] / 512))
    if rows > 1 or cols > 1:  # max-pool, so a single bad element stays visible
        h, w = image.shape[0] // rows * rows, image.shape[1] // cols * cols
        pooled = image[:h, :w].reshape(h // rows, rows, w // cols, cols).max(axis=(1, 3))
        image = pooled
    return image
