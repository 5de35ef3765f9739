"""``--plot FILE.png``: one bar per implementation, grouped by op, case and direction,
on the scale that answers "did the port pay off": % of this GPU's copy bandwidth.

A dashed line marks the copy (100%), each kernel's bar says its speed against the best
torch row (the op's baseline=, the reference or torch.compile of it), and
implementations keep one colour throughout, so a glance finds the twin that falls
short. Drawn with matplotlib's Agg backend (no display needed); written to a temporary
file and renamed, so a failed plot never leaves half a PNG."""

from __future__ import annotations

from pathlib import Path

from portkit.atomic_write import write_atomic
from portkit.bench.model import BEST_OF, Report

COLOURS = {
    "reference": "#7f7f7f",
    "baseline": "#2ca02c",
    "compiled": "#bcbd22",
    "prototype": "#4c9be8",
    "twin": "#e8833a",
}


def write_plot(report: Report, path: Path) -> None:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[tuple[str, str, str], list] = {}
    for each in report.measurements:
        groups.setdefault((each.op, each.case, each.direction), []).append(each)
    short = {"forward": "fwd", "backward": "bwd"}
    labels = [f"{op}  {case}  {short[direction]}" for op, case, direction in groups]
    roles = list(COLOURS)
    height = 0.8 / len(roles)

    fig, ax = plt.subplots(figsize=(10, 0.55 * len(groups) * len(roles) / 2 + 1.8))
    # A small case that fits in L2 can time far above copy bandwidth: the axis follows the
    # bars up to 4x copy and cuts longer ones there (their figure stays in the text), or
    # "tight" bounds would widen the image to reach their labels (a 1000x row made a
    # PNG of 700,000 pixels, 14 s to encode).
    copies = [report.figures(m)["copy"] for m in report.measurements]
    largest = max((c * 100 for c in copies if c is not None), default=0.0)
    xmax = max(130.0, min(400.0, 1.15 * largest))
    seen: set[str] = set()
    for g, members in enumerate(groups.values()):
        for r, role in enumerate(roles):
            m = next((x for x in members if x.role == role), None)
            if m is None:
                continue
            f = report.figures(m)
            y = g + (r - (len(roles) - 1) / 2) * height
            if f["copy"] is None:
                why = f"{m.status.value}: {m.detail}"[:60]
                ax.text(1, y, f"{m.implementation}: {why}", va="center", fontsize=7)
                continue
            label = m.implementation if role not in seen else None
            seen.add(role)
            drawn = min(f["copy"] * 100, xmax)
            ax.barh(y, drawn, height * 0.9, color=COLOURS[role], label=label)
            note = f"{f['copy'] * 100:.0f}%" + (" (cut)" if drawn < f["copy"] * 100 else "")
            if role not in BEST_OF and f["x_best"] is not None:
                note += f"  {f['x_best']:.2f}x best torch ({report.best_role(m)})"
            ax.text(min(drawn, 0.7 * xmax) + 1, y, note, va="center", fontsize=7)
    ax.axvline(100, color="black", linestyle="--", linewidth=1)
    ax.text(100, -0.9, f"copy {report.copy.gbps:.0f} GB/s", ha="center", fontsize=7)
    ax.set_yticks(range(len(groups)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, xmax)
    ax.set_xlabel("% of copy bandwidth (bytes of inputs and outputs per call / GPU time)")
    ax.set_title(
        f"portkit bench — {report.machine.gpu}, {report.machine.date[:10]}, "
        f"median of {report.reps}",
        fontsize=10,
    )
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    write_atomic(Path(path), buffer.getvalue())
