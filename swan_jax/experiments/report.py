"""What a sweep shows a reader: the markdown table beside the paper, a figure, and the
training curves of every program (`plot_curves`, the `swan-curves` command)."""

from __future__ import annotations

import contextlib
import json
import math
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from swan_jax.train import HISTORY_FILE, RUN_FILE, read_history

CURVES_FILE = "curves.png"  # the learning curves: each program folder's, a results folder's


def format_value(value: float, metric: str, *, percent: bool = False) -> str:
    """One metric value the way the paper prints it: MSE in scientific notation (graph
    transfer's errors span 1e-7 to 1e-1), percentages with 2 decimals, the rest with 4.
    `value` is already scaled (times 100 where `percent`)."""
    if not math.isfinite(value):
        return "nan"
    if metric.lower() == "mse":
        return f"{value:.1e}"
    return f"{value:.2f}" if percent else f"{value:.4f}"


def format_mean_std(mean: float, std: float | None, metric: str, *,
                    percent: bool = False) -> str:
    """`"mean ± std"` with `format_value`; the std is left out where it is unknown."""
    text = format_value(mean, metric, percent=percent)
    if std is None or not math.isfinite(std):
        return text
    return f"{text} ± {format_value(std, metric, percent=percent)}"


def _cell_value(mean: float, std: float | None, metric: str, scale: float) -> str:
    return format_mean_std(scale * mean, None if std is None else scale * std, metric,
                           percent=scale == 100.0)


def _row(exp, columns: Sequence[str], c: Mapping[str, Any], beside: str = "") -> str:
    """One cell's table row (the paper's values come already scaled); `beside` follows
    our test value (a run off the paper's protocol says so there)."""
    spe, scale, metric = c.get("seconds_per_epoch"), exp.scale(c), c["metric"]
    diverged = " (diverged runs)" if any(c["diverged"]) else ""
    diverged += f" {beside}" if beside else ""
    paper = c.get("paper")
    return ("| " + " | ".join(str(c[a]) for a in columns) + f" | {metric.upper()} | "
            f"{_cell_value(c['test_mean'], c['test_std'], metric, scale)}{diverged} | "
            + ("–" if paper is None
               else format_mean_std(paper[0], paper[1], metric, percent=scale == 100.0))
            + f" | {_cell_value(c['val_mean'], c['val_std'], metric, scale)} | "
            f"{max(c['epochs_run'])} | {len(c['seeds'])} | {c['params']:,} | "
            f"{'–' if spe is None else f'{spe:.2g}'} | "
            f"`{json.dumps(c['best_hparams'], sort_keys=True)}` |")


def table(exp, cfg, cells: Sequence[Mapping[str, Any]], skipped: Sequence[str], *,
          beside: str = "") -> str:
    """Markdown: per cell, our test metric (mean ± std over seeds) beside the paper's;
    `beside` is written after each of our test values."""
    axes = [a for a in exp.cell_axes if a not in exp.pooled_axes]
    section = exp.table_sections[0] if exp.table_sections else None
    columns = [a for a in axes if a != section]
    percent = any(exp.scale(c) == 100 for c in cells)
    lines = [f"# {exp.label}: swan-jax vs. {exp.paper_ref}", "",
             "Test metric at each run's best validation epoch, for the grid point with the "
             "best mean validation metric; mean ± std over seeds (population std)"
             + ("; AP, F1, AUC in percent" if percent else "") + ".", ""]
    notes = exp.notes(cfg) + ([f"solver {cfg.solver}"] if cfg.solver != "euler" else [])
    if notes:
        lines += ["Notes: " + "; ".join(notes) + ".", ""]
    header = ("| " + " | ".join(columns) + " | Metric | Test (ours) | Paper | Val (ours) | "
              "Epochs | Seeds | Params | s/epoch | Best configuration |")
    rule = "|" + " --- |" * (len(columns) + 9)
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for cell in cells:
        groups.setdefault(None if section is None else cell.get(section), []).append(cell)
    for value, members in groups.items():
        if section is not None:
            lines += [f"## {exp.table_sections[1]} `{value}`", ""]
        lines += [header, rule]
        lines += [_row(exp, columns, c, beside) for c in members]
        lines.append("")
    if skipped:
        lines += ["**Partial run** (`--skip-missing`): the cells below have no result "
                  "here; each line says what is missing and how to get it:", ""]
        lines += [f"- {s}" for s in skipped] + [""]
    return "\n".join(lines).rstrip() + "\n"


def figure(**options: Any):
    """A `matplotlib.figure.Figure` outside pyplot (`options`: `figsize`, ...).

    Library code draws on these: `savefig` renders with the Agg canvas whatever the
    session's backend, nothing registers with pyplot (no figure left open), and the
    process-wide backend a notebook or GUI chose is never switched.
    """
    from matplotlib.figure import Figure

    return Figure(**options)


def draw_figure(exp, cells: Sequence[Mapping[str, Any]], path: Path) -> bool:
    """`exp.plot(cells, path)`, where a failure (a full disk, a font, a backend) is one line
    on stderr, not the end of a run whose results are already written."""
    try:
        return bool(exp.plot(cells, path))
    except Exception as err:  # noqa: BLE001 - any drawing failure; the results stand
        reason = " ".join(f"{type(err).__name__}: {err}".split())
        print(f"warning: the figure {path} was not written ({reason}); the results beside it "
              f"are complete, and the same command with --resume draws it again without "
              f"training", file=sys.stderr, flush=True)
        with contextlib.suppress(OSError):
            Path(path).unlink()  # no half-written image beside complete results
        return False


def plot_against_paper(exp, cells: Sequence[Mapping[str, Any]], path: Path) -> bool:
    """Our test metric per cell (mean ± std over seeds) with the paper's value beside it."""
    rows = [c for c in cells if math.isfinite(c["test_mean"])]
    if not rows:
        return False
    labels = [" / ".join(str(c[a]) for a in exp.cell_axes if a in c) for c in rows]
    y = range(len(rows))
    fig = figure(figsize=(7, 0.45 * len(rows) + 1.4))
    ax = fig.subplots()
    ax.errorbar([exp.scale(c) * c["test_mean"] for c in rows], y,
                xerr=[exp.scale(c) * c["test_std"] for c in rows], fmt="o", label="swan-jax")
    paper = [(i, c["paper"]) for i, c in enumerate(rows) if c.get("paper")]
    if paper:
        ax.errorbar([p[0] for _, p in paper], [i + 0.2 for i, _ in paper],
                    xerr=[p[1] or 0.0 for _, p in paper], fmt="s", label="paper")
    ax.set_yticks(list(y), labels)
    ax.invert_yaxis()
    ax.set_xlabel("test " + ", ".join(sorted({c["metric"] for c in rows}))
                  + (" (AP, F1, AUC in %)" if any(exp.scale(c) == 100 for c in rows) else ""))
    ax.set_title(f"{exp.label}: swan-jax vs. {exp.paper_ref}")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    return True


@contextlib.contextmanager
def _nan_quiet():
    """NumPy's nan-reductions and arithmetic without their warnings: a run that diverged
    has epochs with no finite value, drawn as gaps, which is no news to the user."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _band(ax, epochs, values, label):
    values = np.asarray(values, float)  # [epochs, runs]
    with _nan_quiet():
        mean = np.nanmean(values, axis=1)
        low, high = np.nanmin(values, 1), np.nanmax(values, 1)
    line, = ax.plot(epochs, mean, label=label, marker="o" if len(epochs) < 12 else None,
                    markersize=3)
    if values.shape[1] > 1:
        ax.fill_between(epochs, low, high, color=line.get_color(), alpha=0.15, linewidth=0)


def _run_file(folder: Path) -> dict[str, Any]:
    """A program folder's `run.json` (empty where it is missing or unreadable)."""
    try:
        return json.loads((folder / RUN_FILE).read_text())
    except (OSError, ValueError):
        return {}


def program_label(folder: Path, below: Path | None = None) -> str:
    """A program's name in a legend: a sweep's cell path and static point (what its
    `run.json` describes: `line/3/swan/adjacency=sym`), else its path under `below`,
    else the folder's own name (never ".")."""
    described = _run_file(folder).get("description")
    described = described if isinstance(described, dict) else {}
    cell = described.get("cell")
    name = folder.resolve().name
    if isinstance(cell, dict):
        ident = f"-{described.get('program')}"
        point = name[:-len(ident)] if name.endswith(ident) else name
        return "/".join([*(str(v) for v in cell.values()), point])
    if below is not None and folder.resolve() != below.resolve():
        return str(folder.relative_to(below)).removeprefix("checkpoints/")
    return name


def plot_curves(folder: str | Path, out: str | Path | None = None) -> Path:
    """Draw every `history.jsonl` under `folder` to `out` (default `folder/curves.png`)."""
    folder = Path(folder)
    files = sorted(folder.rglob(HISTORY_FILE))
    files = [f for f in files if read_history(f)]
    if not files:
        raise FileNotFoundError(f"no {HISTORY_FILE} with any epoch under {folder}")
    out = Path(out) if out is not None else folder / CURVES_FILE
    return plot_programs([f.parent for f in files], out, below=folder,
                         title=str(folder.resolve().name if str(folder) == "." else folder))


def plot_programs(folders: Sequence[Path], out: Path, *, title: str,
                  below: Path | None = None) -> Path:
    """`curves_figure` of the program folders, written to `out` (a PNG)."""
    fig = curves_figure(folders, title=title, below=below)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130)
    return out


def curves_figure(folders: Sequence[Path], *, title: str, below: Path | None = None):
    """The training loss and validation metric per epoch (whole epochs on the axis) of
    each program folder (its runs' mean, the band spanning their min to max), plus the
    learning rate when a schedule changed it; one line per program, named by
    `program_label`; titled by the program alone, else `title` and their count."""
    histories = {program_label(f, below): read_history(f / HISTORY_FILE) for f in folders}
    metrics = {_run_file(f).get("train", {}).get("metric") for f in folders}
    schedule = any(len({tuple(h["lr"]) for h in hist if "lr" in h}) > 1
                   for hist in histories.values())
    panels = ["train_loss", "val"] + (["lr"] if schedule else [])
    from matplotlib.ticker import MaxNLocator

    fig = figure(figsize=(4.6 * len(panels), 3.6))
    axes = fig.subplots(1, len(panels), squeeze=False)
    for name, hist in histories.items():
        epochs, runs = [h["epoch"] + 1 for h in hist], len(hist[0]["val"])
        for ax, key in zip(axes[0], panels, strict=True):
            _band(ax, epochs, [h[key] for h in hist],
                  f"{name} (mean of {runs} runs, band min-max)" if runs > 1 else name)
    [metric] = metrics if len(metrics) == 1 and None not in metrics else ["metric"]
    titles = {"train_loss": "training loss", "val": f"validation {metric}",
              "lr": "learning rate"}
    for ax, key in zip(axes[0], panels, strict=True):
        ax.set_title(titles[key])
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole
        ax.grid(True, alpha=0.3)
    with _nan_quiet():
        positive = all(np.nanmin(np.asarray(h["train_loss"], float)) > 0
                       for hist in histories.values() for h in hist)
    axes[0][0].set_yscale("log" if positive else "linear")
    if len(histories) <= 12:
        axes[0][-1].legend(fontsize=7, loc="best")
    fig.suptitle(next(iter(histories)) if len(histories) == 1
                 else f"{title}: {len(histories)} programs")
    fig.tight_layout()
    return fig


def draw_curves(folders: Sequence[Path], out: Path, *, title: str) -> bool:
    """`plot_programs` over the folders that hold an epoch, at the end of a run: a failure
    is one line on stderr (as `draw_figure`'s), never the end of the run."""
    try:
        folders = [f for f in folders
                   if (f / HISTORY_FILE).is_file() and read_history(f / HISTORY_FILE)]
        if not folders:
            return False
        plot_programs(folders, out, title=title)
        return True
    except Exception as err:  # noqa: BLE001 - any drawing failure; the results stand
        reason = " ".join(f"{type(err).__name__}: {err}".split())
        print(f"warning: the learning curves {out} were not written ({reason}); "
              f"swan-curves draws them from the folder's history.jsonl", file=sys.stderr,
              flush=True)
        with contextlib.suppress(OSError):
            Path(out).unlink()
        return False
