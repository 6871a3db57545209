"""reproductions/RUNS.md: every collected row (shown or superseded), the cells of no paper
table, each run's protocol, and the campaign's state."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reproduce.campaign import carry
from reproduce.results import compare, protocol
from reproduce.results.blocks import (
    TEXT,
    anchor,
    best_config,
    epochs_range,
    evidence,
    reworded,
    short_device,
    table,
)
from reproduce.results.sections import Shown
from reproduce.results.store import CONFIG_FILE, MEASUREMENTS, RESULTS_FILE, Run

SUMMARY_KEYS = {"metric", "best_hparams", "val_mean", "val_std", "test_mean", "test_std",
                "seeds", "per_seed", "epochs_run", "diverged", "epochs_completed", "params",
                "seconds_per_epoch", "wall_time", "grid_points", "programs", "paper",
                "train_ms_per_epoch", "eval_ms_per_epoch", "authors_test_mean",
                "authors_test_std", "authors_val_mean", "authors_val_std"}
HEADER = ["Ours: test", "Val", "Epochs", "Seeds (or splits)", "Converged", "Departures",
          "Best configuration", "Wall", "Ran on", "Run", "In RESULTS.md"]


def _numbers(summary: Mapping[str, Any], metric: str) -> list[str]:
    factor = compare.scale(metric)
    return [compare.mean_std(factor * summary["test_mean"], factor * (summary.get(
        "test_std") or 0.0), metric),
            compare.mean_std(factor * summary["val_mean"], factor * (summary.get(
                "val_std") or 0.0), metric) if compare.finite(summary.get("val_mean"))
            else "–", epochs_range(summary),
            str(len(summary.get("per_seed") or summary.get("seeds") or []))]


def _link(run: Run) -> str:
    return f"[{run.name}](#{anchor(run.name)})"


def every_row(shown: Sequence[Shown]) -> tuple[list[str], set[int]]:
    lines, used = [], set()
    for s in shown:
        body = []
        for cell, best, candidates in s.rows:
            for ev in candidates:
                used.add(id(ev.summary))
                body.append([*cell.labels, *_numbers(ev.summary, cell.metric),
                             ev.converged, ev.said.replace("](reproductions/", "]("),
                             best_config(ev.summary), ev.wall,
                             short_device(ev.device), _link(ev.run),
                             "shown" if ev is best else "superseded"])
        if body:
            lines += [f"### {s.table.heading}", "", *table([*s.table.columns, *HEADER], body)]
    return lines, used


def other_cells(runs: Sequence[Run], used: set[int], paper: Mapping[str, Any]) -> list[str]:
    body = []
    for run in runs:
        proto = (paper.get(run.experiment) or {}).get("protocol") or {}
        for summary in run.cells:
            if id(summary) in used:
                continue
            axes = " / ".join(str(summary[k]) for k in summary if k not in SUMMARY_KEYS)
            facts = evidence(run, summary, proto)
            metric = str(summary.get("metric", ""))
            body.append([axes, metric, *_numbers(summary, metric), facts.converged,
                         facts.protocol, best_config(summary),
                         short_device(facts.device), _link(run)])
    if not body:
        return []
    return ["## Cells of no paper table", "",
            "Other label settings, the constant predictor, experiments without a paper table.",
            "", *table(["Cell", "Metric", "Ours: test", "Val", "Epochs", "Seeds", "Converged",
                        "Protocol", "Best configuration", "Ran on", "Run"], body)]


def searched_grid(run: Run) -> str:
    """The union of the grid points the run's programs searched (a cell searches its own
    sub-grid: ADGN has no beta), else the configured grid."""
    axes: dict[str, list] = {}
    for rec in run.records:
        for r in rec.get("runs") or []:
            for axis, value in (r.get("hparams") or {}).items():
                axes.setdefault(axis, [])
                if value not in axes[axis]:
                    axes[axis].append(value)
    if not axes:
        return protocol.grid_line(run.config)
    return protocol.grid_line({"grid": axes}) + " over its programs"


def _in_progress_line(run: Run) -> str | None:
    finished = {r.get("program") for r in run.records}
    running = [p for p in run.collected.get("in_progress") or []
               if p.get("program") not in finished]
    if not running:
        return None
    items = [f"`{p['name']}` {p.get('epochs_done', 0)}/{p.get('epochs_cap')} epochs"
             for p in running[:8]]
    more = f" and {len(running) - 8} more" if len(running) > 8 else ""
    return "- In progress when collected (not in the tables): " + ", ".join(items) + more


def protocol_block(run: Run, proto: Mapping[str, Any]) -> list[str]:
    """What a run ran, where, how long, and how it departs from the paper's protocol."""
    cfg, coll = run.config, run.collected
    sizes = protocol.split_sizes(cfg)
    data = ("/".join(map(str, sizes)) + " train/val/test graphs" if sizes else
            f"first {cfg['limit']} raw rows / graphs per split" if cfg.get("limit") else
            "the full data (official splits)" if "limit" in cfg else
            "as the experiment loads it (the configuration sets no size)")
    patience = cfg.get("patience")
    files = ", ".join(f for f in (RESULTS_FILE, CONFIG_FILE) if (run.folder / f).exists())
    lines = [f"- Files: `reproductions/{run.name}/` ({files}), collected from "
             f"`{coll.get('source', '?')}` on {coll.get('collected', '?')}",
             f"- Machine: {protocol.machine_line(run.machine)}",
             f"- Data: {data}",
             f"- Training: up to {cfg.get('epochs')} epochs, "
             + ("no early stopping" if patience is None else f"patience {patience}")
             + f", batch {cfg.get('batch_size')}, {cfg.get('optimizer')}, solver "
             f"{cfg.get('solver', 'euler')}; seeds {', '.join(map(str, cfg.get('seeds') or []))}",
             f"- Grid searched: {searched_grid(run)}; selection by the best mean validation "
             f"metric over seeds, test read at each run's best validation epoch",
             f"- Wall time: {protocol.wall_line(run.records)}"]
    if run.results.get("stub"):
        lines.append(f"- results.json: {run.results['stub']}")
    lines += [line for line in [_in_progress_line(run)] if line]
    found = [reworded(long, proto) for _, long in protocol.departures(cfg, proto)]
    whose = (f"the {proto['name']}'s protocol ({proto.get('source', '')})" if proto.get("name")
             else "the paper's protocol")
    lines.append(f"- Departures from {whose}: " + (
        "; ".join(found) if found else "none found in the configuration"
        if proto else "no paper protocol to compare with"))
    notes = [n for n in coll.get("notes") or [] if n] + ([coll["note"]] if coll.get("note")
                                                         else [])
    if notes:
        lines.append("- Notes: " + "; ".join(notes))
    if run.results.get("not_run"):
        lines.append("- Cells skipped for missing data (`--skip-missing`): "
                     + "; ".join(run.results["not_run"]))
    lines += [f"- Problem: {p}" for p in run.problems]
    return lines + [""]


def run_sections(runs: Sequence[Run], paper: Mapping[str, Any]) -> list[str]:
    lines = ["## Runs", ""]
    for run in runs:
        lines += [f"### {run.name}", ""]
        if run.experiment in MEASUREMENTS:  # no sweep: its table in RESULTS.md says it all
            lines += [f"A `{run.experiment}` measurement (`reproductions/{run.name}/`), "
                      f"collected from `{run.collected.get('source', '?')}`; its rows and "
                      f"protocol are in RESULTS.md.", ""]
            continue
        proto = (paper.get(run.experiment) or {}).get("protocol") or {}
        lines += [f"Experiment `{run.experiment}`.", "", *protocol_block(run, proto)]
    return lines


def campaign(root: Path, runs: Sequence[Run]) -> list[str]:
    """The plan's size, the runs its finished cells were collected in, and each unfinished
    cell carried in `campaign/carried/` with how far it got (read from its parts)."""
    folder = root / "campaign"
    if not (folder / "plan.toml").exists():
        return []
    cells = tomllib.loads((folder / "plan.toml").read_text()).get("cell") or []
    runnable = sum(c.get("status") == "runnable" for c in cells)
    collected = [f"{_link(r)} ({len(r.cells)} cells)" for r in runs
                 if r.name.startswith("campaign-")]
    slugs = sorted({p.name.split(".")[0] for p in (folder / "carried").glob("*.tar.gz.*")})
    body = [[slug.replace("__", "/"), *carry.progress_of(folder / "carried", slug)]
            for slug in slugs]
    lines = ["## Reproduction campaign", "",
             f"`python -m reproduce.campaign` (`make campaign`) trains the {len(cells)} cells "
             f"of `campaign/plan.toml` ({runnable} runnable now) at the paper's protocol; "
             f"finished cells are collected as `campaign-<group>` runs, unfinished ones "
             f"continue from their run folders carried in `campaign/carried/`.", ""]
    lines += [f"Collected: {', '.join(collected)}.", ""] if collected else []
    return lines + (table(["Cell carried (unfinished)", "Programs done",
                           "Epochs of the programs under way"], body) if body else [])


def document(shown: Sequence[Shown], runs: Sequence[Run], paper: Mapping[str, Any],
             root: Path) -> str:
    rows, used = every_row(shown)
    parts = ["# Runs behind RESULTS.md", "",
             TEXT["runs_intro"], "",
             "## Every row of the paper tables", "", *rows,
             *other_cells(runs, used, paper), *run_sections(runs, paper),
             *campaign(root, runs)]
    return "\n".join(parts).rstrip() + "\n"

