"""Markdown pieces every section shares: tables, the cells of the runs, a run's protocol."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from swan_jax.experiments.results_md import protocol
from swan_jax.experiments.results_md.store import Run

NOT_RUN = "not run"


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A markdown table (cells are str()-ed; `|` escaped)."""
    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return [line(header), "|" + " --- |" * len(header), *(line(r) for r in rows), ""]


def device(run: Run) -> str:
    """The run's device as its results name it (e.g. "cpu:0", "cuda:0 (NVIDIA H100)")."""
    machine = run.machine
    name = str(machine.get("device", "unknown device"))
    return name + (f" ({machine['device_kind']})" if machine.get("device_kind") else "")


def devices(runs: Sequence[Run]) -> str:
    return ", ".join(dict.fromkeys(f"{device(r)} [{r.name}]" for r in runs)) or "no run"


def short_departures(run: Run, paper: Mapping[str, Any]) -> str:
    items = [short for short, _ in protocol.departures(run.config,
                                                       paper.get("protocol") or {})]
    return "; ".join(items) or "none"


def cell_rows(runs: Sequence[Run], key: Callable[[Mapping[str, Any]], tuple]
              ) -> dict[tuple, list[tuple[Run, dict[str, Any]]]]:
    """Key -> every (run, cell summary) with that key, runs in folder order."""
    out: dict[tuple, list[tuple[Run, dict[str, Any]]]] = {}
    for run in runs:
        for cell in run.cells:
            out.setdefault(key(cell), []).append((run, cell))
    return out


def ordered_keys(expected: Mapping[str, Sequence], found: Iterable[tuple]) -> list[tuple]:
    """The paper's cells in its order (every one, run or not), then any other cell run."""
    keys = list(itertools.product(*expected.values()))
    return keys + sorted((k for k in dict.fromkeys(found) if k not in keys), key=str)


def epochs_seeds(cell: Mapping[str, Any]) -> tuple[str, str]:
    epochs = cell.get("epochs_run") or []
    seeds = cell.get("seeds") or []
    diverged = sum(bool(d) for d in cell.get("diverged") or [])
    return (str(max(epochs)) if epochs else "–",
            f"{len(seeds)}" + (f" ({diverged} diverged)" if diverged else ""))


def _in_progress_line(run: Run) -> str | None:
    running = run.collected.get("in_progress") or []
    if not running:
        return None
    items = [f"`{p['name']}` {p.get('epochs_done', 0)}/{p.get('epochs_cap')} epochs"
             for p in running[:8]]
    more = f" and {len(running) - 8} more" if len(running) > 8 else ""
    return "- In progress when collected (not in the tables): " + ", ".join(items) + more


def protocol_block(run: Run, paper: Mapping[str, Any]) -> list[str]:
    """What a run ran, where, how long, and how it departs from the paper's protocol."""
    cfg, coll = run.config, run.collected
    sizes = protocol.split_sizes(cfg)
    data = ("/".join(map(str, sizes)) + " train/val/test graphs" if sizes else
            f"first {cfg['limit']} raw rows / graphs per split" if cfg.get("limit") else
            "the full data (official splits)" if "limit" in cfg else
            "as the experiment loads it (the configuration sets no size)")
    patience = cfg.get("patience")
    lines = [f"#### Run `{run.name}` ({run.experiment})", "",
             f"- Files: `reproductions/{run.name}/` (results.json, config.toml"
             + (", history.json" if run.history else "") + "), collected from "
             f"`{coll.get('source', '?')}` on {coll.get('collected', '?')}",
             f"- Machine: {protocol.machine_line(run.machine)}",
             f"- Data: {data}",
             f"- Training: up to {cfg.get('epochs')} epochs, "
             + ("no early stopping" if patience is None else f"patience {patience}")
             + f", batch {cfg.get('batch_size')}, {cfg.get('optimizer')}, solver "
             f"{cfg.get('solver', 'euler')}; seeds {', '.join(map(str, cfg.get('seeds') or []))}",
             f"- Grid searched: {protocol.grid_line(cfg)}; selection by the best mean "
             f"validation metric over seeds, test read at each run's best validation epoch",
             f"- Wall time: {protocol.wall_line(run.records)}"]
    running = _in_progress_line(run)
    lines += [running] if running else []
    found = [long for _, long in protocol.departures(cfg, paper.get("protocol") or {})]
    lines.append("- Departures from the paper's protocol: " + (
        "; ".join(found) if found else "none found in the configuration"
        if paper.get("protocol") else "no paper protocol to compare with"))
    notes = [n for n in coll.get("notes") or [] if n] + ([coll["note"]] if coll.get("note")
                                                         else [])
    if notes:
        lines.append("- Notes: " + "; ".join(notes))
    if run.results.get("not_run"):
        lines.append("- Cells skipped for missing data (`--skip-missing`): "
                     + "; ".join(run.results["not_run"]))
    lines += [f"- Problem: {p}" for p in run.problems]
    return lines + [""]
