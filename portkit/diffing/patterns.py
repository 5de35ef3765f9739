"""Name the pattern of a disagreement from the data, so a porting mistake is named and
not only located: each detector looks at where the mismatches are (positions, rows,
blocks, the inputs there, NaN poison) and returns a sentence, or None."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from portkit.diffing.model import CaseDiff, TensorDiff

Detector = Callable[["TensorDiff", Sequence["torch.Tensor"]], "str | None"]


def describe_patterns(diff: TensorDiff, inputs: Sequence[torch.Tensor]) -> list[str]:
    if not diff.mismatches:
        return []
    if diff.mismatches == diff.total and (nothing := unwritten(diff, inputs)):
        return [nothing]  # every element unwritten: nothing else to say
    found = [text for detect in DETECTORS if (text := detect(diff, inputs))]
    return found or ["no simple pattern: mismatches are scattered"]


def unwritten(diff: TensorDiff, inputs: Sequence[torch.Tensor]) -> str | None:
    from portkit.launch.poison import is_poison

    bad = diff.bad.reshape(-1)
    p, o = diff.prototype_values.reshape(-1)[bad], diff.other_values.reshape(-1)[bad]
    for side, values, others in (("the twin", o, p), ("the prototype", p, o)):
        if bool(is_poison(values).all()) and not bool(is_poison(others).any()):
            if diff.mismatches == diff.total:
                return (
                    f"{side} wrote nothing: every element still holds the NaN poison "
                    f"portkit fills outputs with"
                )
            return (
                f"{side} never wrote these {diff.mismatches} elements (they still hold "
                f"the NaN poison portkit fills outputs with)"
            )
    return None


def nan_disagreement(diff: TensorDiff, inputs: Sequence[torch.Tensor]) -> str | None:
    import torch

    from portkit.launch.poison import is_poison

    bad = diff.bad.reshape(-1)
    p, o = diff.prototype_values.reshape(-1)[bad], diff.other_values.reshape(-1)[bad]
    for side, values, others in (("the twin", o, p), ("the prototype", p, o)):
        # Computed NaN/Inf only: the poison of unwritten elements is unwritten()'s.
        wrong = ~torch.isfinite(values) & torch.isfinite(others) & ~is_poison(values)
        if int(wrong.sum()):
            kinds = "NaN" if bool(torch.isnan(values[wrong]).all()) else "NaN/Inf"
            return (
                f"{side} gives {kinds} where the other side is finite "
                f"({int(wrong.sum())} elements): an overflow (exp of a large value "
                f"without the stable branch?)"
            )
    return None


def contiguous_run(diff: TensorDiff, inputs: Sequence[torch.Tensor]) -> str | None:
    if diff.mismatches == diff.total:
        return None
    positions = diff.bad.reshape(-1).nonzero().reshape(-1)
    lo, hi = int(positions[0]), int(positions[-1])
    if hi - lo + 1 != diff.mismatches or diff.mismatches == diff.total:
        return None
    if hi == diff.total - 1:
        return (
            f"only the last {diff.mismatches} elements (flat {lo}..{hi}): the tail is "
            f"lost (a bound or a grid that rounds down?)"
        )
    return f"one contiguous run of {diff.mismatches} elements (flat {lo}..{hi})"


def periodic(diff: TensorDiff, inputs: Sequence[torch.Tensor]) -> str | None:
    if diff.mismatches * 2 > diff.total:
        return None
    positions = diff.bad.reshape(-1).nonzero().reshape(-1)
    if positions.numel() < 3:
        return None
    best = None
    period = 2
    while period <= 4096 and period < diff.total:
        residues = positions % period
        if bool((residues == residues[0]).all()):
            best = (period, int(residues[0]))
        period *= 2
    if best is None or diff.mismatches * best[0] < diff.total // 2:
        return None
    return f"every {best[0]}th element (flat index % {best[0]} == {best[1]})"


def blocks(diff: TensorDiff, inputs: Sequence[torch.Tensor]) -> str | None:
    writers = [e.writer for e in diff.mapped if e.writer is not None]
    if not writers:
        return None
    places = {(w.kernel, w.block) for w in writers}
    mapped = f"{len(writers)} of {diff.mismatches} mismatches mapped"
    if len(places) == 1:
        ((kernel, block),) = places
        last = " (the last block of the grid)" if writers[0].last_block else ""
        return f"all mismatches were written by block {block}{last} of {kernel} ({mapped})"
    if all(w.last_block for w in writers):
        return f"all mismatches were written by the last blocks of their launches ({mapped})"
    lanes = {w.thread[0] % 32 for w in writers}
    if len(lanes) == 1 and len(writers) >= 3:
        return f"all mismatches were written by lane {lanes.pop()} of a warp ({mapped})"
    return None


def input_range(diff: TensorDiff, inputs: Sequence[torch.Tensor]) -> str | None:
    import torch

    bad = diff.bad.reshape(-1)
    if bool(bad.all()):
        return None
    for number, x in enumerate(inputs):
        if x.numel() != diff.total or not x.dtype.is_floating_point:
            continue
        values = x.reshape(-1)
        ok = torch.isfinite(values)
        inside, outside = values[bad & ok], values[~bad & ok]
        if not inside.numel() or not outside.numel():
            continue
        if float(inside.min()) > float(outside.max()):
            return (
                f"only where input {number} is large: every mismatch has input {number} "
                f">= {float(inside.min()):.6g}, every match <= {float(outside.max()):.6g}"
            )
        if float(inside.max()) < float(outside.min()):
            return (
                f"only where input {number} is small: every mismatch has input {number} "
                f"<= {float(inside.max()):.6g}, every match >= {float(outside.min()):.6g}"
            )
        if bool((inside < 0).all()) and bool((outside < 0).any()) is False:
            return f"only where input {number} is negative"
    return None


def rows(diff: TensorDiff, inputs: Sequence[torch.Tensor]) -> str | None:
    import torch

    if len(diff.shape) != 2:
        return None
    bad = diff.bad
    count, total = int(bad.any(dim=1).sum()), diff.shape[0]
    p, o = diff.prototype_values, diff.other_values
    if diff.shape[0] == diff.shape[1] and diff.shape[0] > 1:
        swapped = torch.isclose(o, p.T, rtol=1e-5, atol=1e-6, equal_nan=True)
        if bool(swapped[bad].all()):
            return (
                "other[i, j] equals prototype[j, i] wherever they differ: rows and "
                "columns are swapped"
            )
    whole = bad[bad.any(dim=1)].float().mean(dim=1)
    if count and bool((whole > 0.9).all()) and diff.shape[1] > 1:
        return (
            f"whole rows differ ({count} of {total} rows): a per-row quantity (a "
            f"reduction such as the row's max or sum) differs, not single elements"
        )
    columns = bad.any(dim=0).nonzero().reshape(-1)
    if (
        columns.numel()
        and int(columns[0]) > 0
        and int(columns[-1]) == diff.shape[1] - 1
        and (columns.numel() == diff.shape[1] - int(columns[0]))
    ):
        return f"only columns {int(columns[0])}.. of each row"
    return None


def precision(diff: TensorDiff, inputs: Sequence[torch.Tensor]) -> str | None:
    if diff.nan_disagreements or diff.inf_disagreements:
        return None
    if diff.share < 0.05 and diff.mismatches < 64:
        return None
    if diff.max_rel > 1e-2:
        return None
    return (
        f"small differences spread over {100 * diff.share:.1f}% of elements (max rel "
        f"{diff.max_rel:.2g}, max {diff.max_ulp} ULP): a precision difference (float "
        f"where the prototype keeps double, or another summation order), not an "
        f"indexing mistake"
    )


DETECTORS: list[Detector] = [
    unwritten,
    nan_disagreement,
    contiguous_run,
    periodic,
    rows,
    input_range,
    blocks,
    precision,
]


def across_cases(cases: Sequence[CaseDiff]) -> list[str]:
    """Patterns over the op's cases (e.g. only float64 differs)."""
    ran = [c for c in cases if not c.error]
    bad_dtypes = {c.case.dtype for c in ran if c.differs}
    all_dtypes = {c.case.dtype for c in ran}
    notes = []
    if bad_dtypes and bad_dtypes != all_dtypes:
        notes.append(f"mismatches only in {', '.join(sorted(bad_dtypes))} cases")
    return notes
