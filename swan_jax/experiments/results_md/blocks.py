"""Markdown pieces every section shares: tables, the cells of the runs, a run's protocol."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from swan_jax.experiments.results_md import protocol
from swan_jax.experiments.results_md.store import RESULTS_FILE, ReproductionsError, Run

NOT_RUN = "not run"
# The legacy `label_columns` names of the graph-property experiment -> label settings
# (swan_jax.data.graphprop: "paper" columns normalised = "faithful", "adgn" = "swan-code").
LEGACY_LABELS = {"paper": "faithful", "adgn": "swan-code"}


def label_setting(cell: Mapping[str, Any]) -> str:
    """The label setting of a graph-property cell (`labels`, or the legacy columns)."""
    for key in ("labels", "label_setting"):
        if cell.get(key):
            return str(cell[key])
    columns = cell.get("label_columns")
    return LEGACY_LABELS.get(columns, str(columns))


def model_name(cell: Mapping[str, Any]) -> str:
    """The model of a cell (`model`, or LRGB's `variant`)."""
    return str(cell.get("model") or cell.get("variant"))


# How each paper experiment names a cell (the keys of paper_values.json's "expected").
CELL_KEYS: dict[str, Callable[[Mapping[str, Any]], tuple]] = {
    "transfer": lambda c: (c["topology"], c["distance"], c["model"]),
    "graphprop": lambda c: (c["task"], label_setting(c), c["model"]),
    "lrgb": lambda c: (c["dataset"], model_name(c)),
    "node_classification": lambda c: (c["dataset"], model_name(c)),
}


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
            try:
                name = key(cell)
            except KeyError as err:
                raise ReproductionsError(f"{run.folder / RESULTS_FILE}: a cell of "
                                         f"{run.experiment} has no {err}") from None
            out.setdefault(name, []).append((run, cell))
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
    if run.results.get("stub"):
        lines.append(f"- results.json: {run.results['stub']}")
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
