"""One RESULTS.md section per experiment: every paper cell (run or "not run"), ours beside
the reference and a verdict, then the protocol of each run that produced a number."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reproduce.results import compare, figures
from reproduce.results.blocks import (
    CELL_KEYS,
    NOT_RUN,
    cell_facts,
    cell_rows,
    devices,
    epochs_range,
    epochs_seeds,
    label_setting,
    ordered_keys,
    protocol_block,
    table,
)
from reproduce.results.protocol import paper_cell_points
from reproduce.results.store import Run

LABEL_TITLES = {
    "paper": "raw labels, ADGN's columns and loss averaging: the pipeline behind the "
             "paper's Table 2, compared with it",
    "faithful": "each task its own column, labels divided by their training maximum: the "
                "task as the paper describes it; the paper reports no number for it, so "
                "the reference is the constant predictor",
    "swan-code": "ADGN's columns, normalised labels (the SWAN authors' released loader); "
                 "no paper number, reference: the constant predictor"}


def protocols(runs: Sequence[Run], paper: Mapping[str, Any]) -> list[str]:
    used = [r for r in runs if r.cells or r.collected.get("in_progress")]
    lines = ["### Protocol of each run", ""] if used else []
    for run in used:
        lines += protocol_block(run, paper)
    return lines


# ==================================================================== graph transfer


def transfer(runs: Sequence[Run], paper: Mapping[str, Any], authors: Mapping[str, Any],
             figure: Path, figure_link: str) -> list[str]:
    src = authors["source"]
    lines = ["## Graph transfer (paper Figure 3)", "",
             "Test MSE of the target node's value after k hops (layers = k); ours: mean ± "
             "std over seeds. Reference: the values the authors plot as Figure 3 "
             f"(`{src['path']}` of {src['repository']} at {src['commit'][:7]}, copied to "
             "`swan_jax/experiments/references/transfer_figure3.json`; mean over their 4 seeds, "
             "no spread recorded for SWAN and ADGN). Verdict: orders of magnitude between "
             "ours and theirs.", ""]
    rows = cell_rows(runs, CELL_KEYS["transfer"])
    drawn = figures.transfer_figure([(r.name, r.cells) for r in runs], authors, figure,
                                    devices(runs))
    lines += ([f"![graph transfer]({figure_link})", ""] if drawn
              else ["No transfer cell has been collected yet: no figure.", ""])
    header = ["k", "Model", "Ours: test MSE", "Authors (Fig. 3)", "Verdict", "Epochs run",
              "Seeds", "Converged", "Protocol", "Best configuration", "Wall", "Run (device)"]
    missing = paper.get("not_implemented") or {}
    for topology in paper["expected"]["topology"]:
        keys = [k for k in ordered_keys(paper["expected"], rows) if k[0] == topology]
        body = []
        for key in keys:
            ref = authors["values"].get(topology, {}).get(str(key[1]), {}).get(key[2])
            theirs = compare.mean_std(ref["mean"], ref["std"], "mse") if ref else "–"
            if key not in rows:
                body.append([key[1], key[2].upper(), "not implemented" if key[2] in missing
                             else NOT_RUN, theirs, "–", *[""] * 7])
            for run, cell in rows.get(key, []):
                verdict = compare.orders(cell["test_mean"], ref["mean"])[1] if ref else "–"
                facts = cell_facts(run, cell, paper, paper_cell_points("transfer", cell))
                body.append([key[1], key[2].upper(),
                             compare.mean_std(cell["test_mean"], cell.get("test_std"), "mse"),
                             theirs, verdict, epochs_range(cell), epochs_seeds(cell)[1],
                             facts.converged, facts.protocol, best_config(cell), facts.wall,
                             f"{run.name} ({facts.device})"])
        lines += [f"### {topology.replace('-', ' ').title()}", "", *table(header, body)]
    notes = [f"{name.upper()}: {why}." for name, why in missing.items()]
    return lines + notes + ([""] if notes else []) + protocols(runs, paper)


def best_config(cell: Mapping[str, Any]) -> str:
    best = cell.get("best_hparams") or {}
    return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in sorted(best.items())) or "–"


# ============================================================ graph property prediction


def constant_score(runs: Sequence[Run], task: str, setting: str) -> tuple[float, str] | None:
    """The constant predictor's test log10 MSE of (task, setting), and the run it is from:
    a cell of model "constant", or a `constant_predictor` list / mapping in results.json."""
    for run in runs:
        for cell in run.cells:
            if (cell.get("model") == "constant" and cell.get("task") == task
                    and label_setting(cell) == setting):
                return float(cell["test_mean"]), run.name
        table_ = run.results.get("constant_predictor") or []
        items = (table_.items() if isinstance(table_, Mapping) else
                 ((f"{e.get('task')}/{label_setting(e)}", e) for e in table_))
        for name, entry in items:
            if name == f"{task}/{setting}":
                score = entry.get("test") if isinstance(entry, Mapping) else entry
                return float(score), run.name
    return None


def _graphprop_row(run: Run, cell, key, reference, constant, paper) -> list[Any]:
    metric = "log10_mse"
    floor = None if constant is None else constant[0]
    if compare.at_floor(cell["test_mean"], floor):
        verdict = compare.against_constant(cell["test_mean"], floor)[1]
    elif key[1] == "paper" and reference is not None:
        verdict = compare.against_paper(cell["test_mean"], reference[0], reference[1],
                                        metric)[1]
    else:
        verdict = compare.against_constant(cell["test_mean"], floor)[1]
    facts = cell_facts(run, cell, paper, paper_cell_points("graphprop", cell))
    return [key[0], key[2],
            compare.mean_std(cell["test_mean"], cell.get("test_std"), metric),
            _reference(key, reference), verdict,
            compare.mean_std(cell.get("val_mean"), cell.get("val_std"), metric),
            epochs_range(cell), epochs_seeds(cell)[1], facts.converged, facts.protocol,
            best_config(cell), facts.wall, f"{run.name} ({facts.device})"]


def _reference(key: tuple, reference) -> str:
    if key[1] != "paper":
        return "– (paper: raw labels only)"
    return "–" if reference is None else compare.mean_std(*reference, "log10_mse")


def graphprop(runs: Sequence[Run], paper: Mapping[str, Any]) -> list[str]:
    lines = [f"## Graph property prediction (paper {paper.get('table', 'Table 1')})", "",
             "Test log10 MSE (lower is better); ours: mean ± std over seeds. "
             f"{paper['setting_note'][0].upper()}{paper['setting_note'][1:]}. The constant "
             "predictor (the best constant fitted on the training split) is the floor "
             "every model must beat.", ""]
    rows = cell_rows([_without_constant(r) for r in runs], CELL_KEYS["graphprop"])
    header = ["Task", "Model", "Ours: test log10 MSE", "Paper", "Verdict", "Val (ours)",
              "Epochs run", "Seeds", "Converged", "Protocol", "Best configuration", "Wall",
              "Run (device)"]
    keys = ordered_keys(paper["expected"], rows)
    for setting in dict.fromkeys(k[1] for k in keys):
        body = []
        for task in dict.fromkeys(k[0] for k in keys if k[1] == setting):
            constant = constant_score(runs, task, setting)
            for key in (k for k in keys if k[:2] == (task, setting)):
                reference = paper["values"].get(key[2], {}).get(task)
                if key not in rows:
                    body.append([task, key[2], NOT_RUN, _reference(key, reference), "–",
                                 *[""] * 8])
                body += [_graphprop_row(run, cell, key, reference, constant, paper)
                         for run, cell in rows.get(key, [])]
            body.append([task, "constant predictor",
                         NOT_RUN if constant is None else f"{constant[0]:.4f}", "–",
                         "the floor" if constant else "not recorded", *[""] * 7,
                         "" if constant is None else constant[1]])
        lines += [f"### Label setting `{setting}`", "",
                  LABEL_TITLES.get(setting, "a label setting of the experiment") + ".", "",
                  *table(header, body)]
    return lines + protocols(runs, {"protocol": paper["protocol"]})


def _without_constant(run: Run) -> Run:
    """The run with its constant-predictor cells left out of the model rows."""
    import dataclasses

    results = {**run.results, "cells": [c for c in run.results.get("cells") or []
                                        if c.get("model") != "constant"]}
    return dataclasses.replace(run, results=results)
