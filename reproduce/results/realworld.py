"""RESULTS.md sections of the real-world experiments: LRGB (Table 2 and the training
curves), node classification (the paper's runtime table), and any other experiment."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reproduce.results import compare, figures
from reproduce.results.blocks import (
    CELL_KEYS,
    NOT_RUN,
    cell_facts,
    cell_rows,
    device,
    devices,
    epochs_range,
    epochs_seeds,
    model_name,
    ordered_keys,
    protocol_block,
    table,
)
from reproduce.results.sections import best_config, protocols
from reproduce.results.store import Run, cell_axes


def _ours(cell: Mapping[str, Any], metric: str) -> tuple[float, float]:
    factor = compare.scale(metric)
    return factor * cell["test_mean"], factor * (cell.get("test_std") or 0.0)


# ============================================================================== LRGB


def lrgb(runs: Sequence[Run], paper: Mapping[str, Any], figure: Path, figure_link: str
         ) -> list[str]:
    lines = [f"## Long-range graph benchmark (paper {paper.get('table', 'Table 2')})", "",
             "Test metric at each run's best validation epoch (AP and F1 in percent); ours: "
             "mean ± std over seeds, beside the paper's mean ± std over 3 seeds.", ""]
    rows = cell_rows(runs, CELL_KEYS["lrgb"])
    header = ["Data set", "Variant", "Metric", "Ours: test", "Paper", "Verdict", "Val (ours)",
              "Epochs run", "Seeds", "Converged", "Params", "s/epoch", "Protocol", "Wall",
              "Run (device)"]
    body = []
    for key in ordered_keys(paper["expected"], rows):
        metric = paper["metrics"].get(key[0], "metric")
        reference = paper["values"].get(key[0], {}).get(key[1])
        theirs = "–" if reference is None else compare.mean_std(*reference, metric)
        if key not in rows:
            body.append([*key, metric.upper(), NOT_RUN, theirs, "–", *[""] * 9])
        for run, cell in rows.get(key, []):
            mean, std = _ours(cell, metric)
            verdict = ("–" if reference is None else
                       compare.against_paper(mean, reference[0], reference[1], metric)[1])
            factor = compare.scale(metric)
            facts = cell_facts(run, cell, paper)
            spe = cell.get("seconds_per_epoch")
            body.append([*key, metric.upper(), compare.mean_std(mean, std, metric), theirs,
                         verdict, compare.mean_std(factor * cell["val_mean"],
                                                   factor * (cell.get("val_std") or 0), metric),
                         epochs_range(cell), epochs_seeds(cell)[1], facts.converged,
                         f"{cell.get('params', 0):,}", "–" if spe is None else f"{spe:.1f}",
                         facts.protocol, facts.wall, f"{run.name} ({facts.device})"])
    lines += table(header, body)
    lines += _curves(runs, paper, figure, figure_link)
    return lines + protocols(runs, paper)


def _curves(runs: Sequence[Run], paper: Mapping[str, Any], figure: Path, link: str
            ) -> list[str]:
    panels = []
    for run in runs:
        for program in (run.history or {}).get("programs") or []:
            cell = program.get("cell") or {}
            dataset = cell.get("dataset")
            panels.append((program, paper["metrics"].get(dataset, "metric"),
                           paper["values"].get(dataset, {}).get(model_name(cell))))
    used = [r for r in runs if r.history]
    if not figures.curves_figure(panels, figure, devices(used)):
        return ["Training curves: none collected yet (the 300-epoch Peptides-func run is "
                "collected with its per-epoch history when it exists).", ""]
    return ["Validation (solid) and test (dashed) metric per epoch of the collected "
            "histories, beside the paper's test value (band: its std); from "
            + ", ".join(f"`reproductions/{r.name}/history.json`" for r in used) + ":", "",
            f"![training curves]({link})", ""]


# =============================================================== node classification


def _timing_ms(run: Run, cell: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(training, evaluation) ms per epoch: the cell's own fields when the experiment
    records them, else the median over its programs of `collected.json`'s timings."""
    for train, infer in (("train_ms", "inference_ms"),
                         ("train_ms_per_epoch", "eval_ms_per_epoch")):  # the experiment's
        if compare.finite(cell.get(train)):
            return cell[train], cell.get(infer)
    programs = run.collected.get("programs") or {}
    timings = [programs.get(r["name"]) or {} for r in run.records
               if all(cell.get(a) == r[a] for a in cell_axes(r) if a in cell)]

    def median(key):
        values = [t[key] for t in timings if compare.finite(t.get(key))]
        return 1000 * statistics.median(values) if values else None

    return median("train_seconds_median"), median("eval_seconds_median")


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def node_classification(runs: Sequence[Run], paper: Mapping[str, Any]) -> list[str]:
    lines = ["## Node classification at scale (the paper's scalability table, "
             "tab:additional_runtimes)", "",
             "Score (ROC AUC x 100 on Tolokers and Questions, accuracy on ogbn-arxiv; mean ± "
             "std over the official splits) and milliseconds per epoch, ours beside the "
             f"paper's, which were measured on {paper['machine']}. Times on different "
             "hardware are not a like-for-like comparison: the ratio is shown, no verdict. "
             "Our inference time is the per-epoch evaluation (validation and test splits) "
             "unless the experiment records a single forward pass.", ""]
    rows = cell_rows(runs, CELL_KEYS["node_classification"])
    header = ["Data set", "Model", "Ours: score", "Paper", "Verdict", "Train ms (ours / "
              "paper)", "Inference ms (ours / paper)", "Epochs run", "Splits pooled",
              "Converged", "Protocol", "Wall", "Run (device)"]
    body = []
    for key in ordered_keys(paper["expected"], rows):
        metric = paper["metrics"].get(key[0], "roc_auc")
        ref = paper["values"].get(key[0], {}).get(key[1])
        theirs = "–" if ref is None else compare.mean_std(*ref["score"], metric)
        if key not in rows:
            body.append([*key, NOT_RUN, theirs, "–",
                         f"– / {ref['train_ms']}" if ref else "–",
                         f"– / {ref['inference_ms']}" if ref else "–", *[""] * 6])
        for run, cell in rows.get(key, []):
            mean, std = _ours(cell, metric)
            verdict = ("–" if ref is None else
                       compare.against_paper(mean, *ref["score"], metric)[1])
            train, infer = _timing_ms(run, cell)
            facts = cell_facts(run, cell, paper)
            splits = len(cell.get("per_seed") or []) or len(cell.get("seeds") or [])
            planned = (paper.get("protocol") or {}).get("splits")
            body.append([*key, compare.mean_std(mean, std, metric), theirs, verdict,
                         _ratio(train, ref and ref["train_ms"]),
                         _ratio(infer, ref and ref["inference_ms"]), epochs_range(cell),
                         f"{splits} of {planned}" if planned else splits, facts.converged,
                         facts.protocol, facts.wall, f"{run.name} ({facts.device})"])
    return lines + table(header, body) + protocols(runs, paper)


def _ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or not theirs:
        return f"{_ms(ours)} / {theirs or '–'}"
    return f"{_ms(ours)} / {theirs} (x{ours / theirs:.2g})"


# ====================================================================== other experiments


def other(experiment: str, runs: Sequence[Run]) -> list[str]:
    """Any experiment RESULTS.md has no paper section for: its cells as collected."""
    lines = [f"## Other experiment: `{experiment}`", "",
             "No paper section for this experiment; the values beside ours are the ones "
             "its results file carries.", ""]
    body = []
    for run in runs:
        for cell in run.cells:
            metric = str(cell.get("metric", ""))
            axes = ", ".join(f"{k} {cell[k]}" for k in cell_axes_of_summary(cell))
            ref = cell.get("paper")
            verdict = ("–" if not ref else
                       compare.against_paper(cell["test_mean"] * compare.scale(metric),
                                             ref[0], ref[1], metric)[1])
            mean, std = _ours(cell, metric)
            body.append([axes, metric, compare.mean_std(mean, std, metric),
                         "–" if not ref else compare.mean_std(*ref, metric), verdict,
                         best_config(cell), f"{run.name} ({device(run)})"])
    lines += table(["Cell", "Metric", "Ours: test", "Reference", "Verdict",
                    "Best configuration", "Run (device)"], body)
    for run in runs:
        lines += protocol_block(run, {})
    return lines


SUMMARY_KEYS = {"metric", "best_hparams", "val_mean", "val_std", "test_mean", "test_std",
                "seeds", "per_seed", "epochs_run", "diverged", "epochs_completed", "params",
                "seconds_per_epoch", "wall_time", "grid_points", "programs", "paper"}


def cell_axes_of_summary(cell: Mapping[str, Any]) -> list[str]:
    """The cell axes of a sweep's cell summary (`sweep.summarise_cells`)."""
    return [k for k in cell if k not in SUMMARY_KEYS]
