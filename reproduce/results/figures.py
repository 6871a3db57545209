"""The figures of RESULTS.md and RUNS.md. Each takes points (panel, label, paper (mean,
std) or None, ours (mean, std) or None) and returns False, drawing nothing, without ours."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from reproduce.results.compare import finite

MODEL_COLORS = {"swan": "#029e73", "adgn": "#0173b2", "gcn": "#949494", "gin": "#d55e00",
                "sage": "#cc78bc", "gat": "#de8f05", "gps": "#ece133"}


def subplots(columns: int, width: float, height: float = 4.0, **options: Any):
    """`columns` axes outside pyplot: a notebook's matplotlib backend stays as it was."""
    fig = Figure(figsize=(width * columns, height))
    return fig, fig.subplots(1, columns, squeeze=False, **options)


def save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})


def transfer_figure(points: Sequence[tuple[str, str, tuple | None, tuple | None]],
                    distances: Mapping[tuple[str, str], Sequence[int]], path: Path) -> bool:
    """Test MSE against k, one panel per topology: ours (filled, band ± std) beside the
    paper's (hollow, dashed); `points` per (topology, model) in `distances`' order."""
    if not any(p[3] and finite(p[3][0]) for p in points):
        return False
    topologies = list(dict.fromkeys(p[0] for p in points))
    fig, axes = subplots(len(topologies), 5.2, sharey=True)
    for ax, topology in zip(axes[0], topologies, strict=True):
        for model in dict.fromkeys(p[1] for p in points if p[0] == topology):
            ks = distances[(topology, model)]
            rows = [(k, p[2], p[3]) for k, p in zip(ks, [q for q in points if q[:2] == (
                topology, model)], strict=True)]
            color = MODEL_COLORS.get(model.lower())
            ours = [(k, o[0], o[1]) for k, _, o in rows if o and finite(o[0])]
            if ours:
                k, mean, std = zip(*ours, strict=True)
                ax.plot(k, mean, "-", marker="o", color=color, label=model)
                ax.fill_between(k, [max(m - s, m / 10) for m, s in zip(mean, std, strict=True)],
                                [m + s for m, s in zip(mean, std, strict=True)], color=color,
                                alpha=0.15, linewidth=0)
            theirs = [(k, r[0]) for k, r, _ in rows if r]
            if theirs:
                k, mean = zip(*theirs, strict=True)
                ax.plot(k, mean, "--", marker="s", markerfacecolor="none", linewidth=0.8,
                        color=color, label=f"{model} (paper)")
        every = sorted({k for (t, _), ks in distances.items() if t == topology for k in ks})
        ax.set(xscale="log", yscale="log", title=topology, xlabel="distance k (hops)")
        ax.set_xticks(every, [str(d) for d in every])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("test MSE")
    axes[0][-1].legend(fontsize=7, loc="lower right", ncol=2)
    fig.suptitle("Graph transfer: ours (solid, ± std over seeds) vs the paper's Figure 3 "
                 "(hollow, dashed); the rows of RESULTS.md", fontsize=10)
    fig.tight_layout()
    save(fig, path)
    return True


def paired_figure(points: Sequence[tuple[str, str, tuple | None, tuple | None]], path: Path,
                  title: str, ylabel: str, log: bool = False) -> bool:
    """One panel per paper column: per row, the paper's value (hollow square) beside ours."""
    if not any(p[3] and finite(p[3][0]) for p in points):
        return False
    panels = list(dict.fromkeys(p[0] for p in points))
    fig, axes = subplots(len(panels), max(2.5, 0.55 * max(
        sum(p[0] == panel for p in points) for panel in panels) + 1.2))
    for ax, panel in zip(axes[0], panels, strict=True):
        rows = [p for p in points if p[0] == panel]
        for x, (_, _, paper, ours) in enumerate(rows):
            if paper:
                ax.errorbar(x - 0.12, paper[0], yerr=paper[1] or 0, fmt="s", color="black",
                            markerfacecolor="none", label="paper" if x == 0 else None)
            if ours and finite(ours[0]):
                ax.errorbar(x + 0.12, ours[0], yerr=ours[1] or 0, fmt="o", color="#029e73",
                            label="ours" if not any(r[3] for r in rows[:x]) else None)
        ax.set_xticks(range(len(rows)), [p[1] for p in rows], rotation=45, ha="right",
                      fontsize=8)
        ax.set(title=panel, yscale="log" if log else "linear")
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].set_ylabel(ylabel)
    handles = {label: h for ax in axes[0] for h, label in zip(*ax.get_legend_handles_labels(),
                                                              strict=True)}
    axes[0][0].legend(handles.values(), handles.keys(), fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save(fig, path)
    return True
