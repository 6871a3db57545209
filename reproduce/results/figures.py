"""The figures RESULTS.md shows, drawn from `reproductions/` only.

* `transfer_figure`: test MSE against the distance k, one panel per topology, our mean
  (band: ± std over seeds) beside the authors' plotted values (hollow markers, dashed);
* `curves_figure`: per collected program with a history, the validation and test metric
  per epoch of each seed, with the paper's value (band: its std) as a horizontal line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reproduce.results.compare import finite, scale

MODEL_COLORS = {"swan": "#029e73", "adgn": "#0173b2", "gcn": "#949494", "gin": "#d55e00",
                "sage": "#cc78bc", "gat": "#de8f05", "gps": "#ece133"}
RUN_STYLES = ("-", "-.", ":")


def _subplots(columns: int, width: float, **options: Any):
    """A figure of `columns` axes outside pyplot: the renderer never switches the
    process-wide matplotlib backend (a notebook's stays as it was)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * columns, 4.0))
    return fig, fig.subplots(1, columns, squeeze=False, **options)


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})


def _our_lines(ax, runs: Sequence[tuple[str, Sequence[Mapping[str, Any]]]], topology: str,
               models: Sequence[str]) -> None:
    for style, (label, cells) in zip(RUN_STYLES * 4, runs, strict=False):
        for model in models:
            rows = sorted((c["distance"], c["test_mean"], c.get("test_std") or 0.0)
                          for c in cells if c["topology"] == topology
                          and c["model"] == model and finite(c["test_mean"]))
            if not rows:
                continue
            k, mean, std = zip(*rows, strict=True)
            name = model.upper() + (f" ({label})" if len(runs) > 1 else "")
            color = MODEL_COLORS.get(model)
            line, = ax.plot(k, mean, style, marker="o", color=color, label=name)
            ax.fill_between(k, [max(m - s, m / 10) for m, s in zip(mean, std, strict=True)],
                            [m + s for m, s in zip(mean, std, strict=True)],
                            color=line.get_color(), alpha=0.15, linewidth=0)


def transfer_figure(runs: Sequence[tuple[str, Sequence[Mapping[str, Any]]]],
                    authors: Mapping[str, Any], path: Path, device: str) -> bool:
    """Draw our transfer cells (per run label) beside the authors' values; False when no
    run has a finite cell."""
    cells = [c for _, rows in runs for c in rows if finite(c.get("test_mean"))]
    if not cells:
        return False
    from matplotlib.ticker import NullLocator

    topologies = authors["topologies"]
    models = [m for m in authors["models"] if any(c["model"] == m for c in cells)]
    models += sorted({c["model"] for c in cells} - set(models))
    fig, axes = _subplots(len(topologies), 5.2, sharey=True)
    for ax, topology in zip(axes[0], topologies, strict=True):
        _our_lines(ax, runs, topology, models)
        for model in models:
            points = [(int(k), row[model]["mean"]) for k, row in
                      authors["values"][topology].items() if model in row]
            if points:
                k, mean = zip(*sorted(points), strict=True)
                ax.plot(k, mean, "--", marker="s", markerfacecolor="none", linewidth=0.8,
                        color=MODEL_COLORS.get(model), label=f"{model.upper()} (authors)")
        distances = sorted({int(k) for k in authors["values"][topology]}
                           | {c["distance"] for c in cells})
        ax.set(xscale="log", yscale="log", title=topology.replace("-", " ").title(),
               xlabel="distance k (hops)")
        ax.set_xticks(distances, [str(d) for d in distances])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("test MSE")
    handles = {label: handle for ax in axes[0]
               for handle, label in zip(*ax.get_legend_handles_labels(), strict=True)}
    axes[0][-1].legend(handles.values(), handles.keys(), fontsize=7, loc="lower right",
                       ncol=2)
    fig.suptitle(f"Graph transfer: ours (solid, ± std over seeds; {device}) vs the authors' "
                 f"Figure 3 values (hollow, dashed)", fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    return True


def _program_title(program: Mapping[str, Any]) -> str:
    cell = " / ".join(str(v) for v in (program.get("cell") or {}).values())
    epochs = len(program.get("epoch") or [])
    state = (f"in progress, {epochs} of {program.get('epochs_cap')} epochs"
             if program.get("status") == "in progress" else f"{epochs} epochs")
    return f"{cell} ({state})"


def curves_figure(programs: Sequence[tuple[Mapping[str, Any], str, tuple | None]],
                  path: Path, device: str) -> bool:
    """One panel per (program history, metric name, paper (mean, std) or None)."""
    programs = [p for p in programs if p[0].get("epoch")]
    if not programs:
        return False
    fig, axes = _subplots(len(programs), 6.0)
    for ax, (program, metric, paper) in zip(axes[0], programs, strict=True):
        factor, epochs = scale(metric), [e + 1 for e in program["epoch"]]
        for i, run in enumerate(program.get("runs") or []):
            for key, style in (("val", "-"), ("test", "--")):
                if key in program:
                    values = [factor * row[i] if finite(row[i]) else math.nan
                              for row in program[key]]
                    ax.plot(epochs, values, style, linewidth=1.0, color=f"C{i % 10}",
                            label=f"{key} (seed {run['seed']})")
        if paper is not None:
            ax.axhline(paper[0], color="black", linewidth=1.0,
                       label=f"paper test {paper[0]:g} ± {paper[1]:g}")
            ax.axhspan(paper[0] - paper[1], paper[0] + paper[1], color="black", alpha=0.1)
        ax.set(title=_program_title(program), xlabel="epoch",
               ylabel=metric.upper() + (" (%)" if factor == 100 else ""))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Training curves ({device})", fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    return True
