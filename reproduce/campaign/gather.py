"""Finished cells into `reproductions/campaign-<group>[-<device kind>]/`; which are done.

The cells of one group (the id's first part) share a protocol: their finished run folders
merge into one collected run, starting from the committed one (`merge_results`), which
`reproduce.results.collect` then copies as any other run. A cell is done when a collected
run holds each of its cells at its protocol; a measurement when
`reproductions/<experiment>-<device kind>/` holds a run at its config.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reproduce.campaign.cells import Cell
from reproduce.results import collect
from swan_jax.experiments.config import dump_toml, from_dict, load_toml, to_dict
from swan_jax.runs.io import write_text_atomic

# Configuration fields that choose cells: unioned when cells merge.
SELECTORS = ("topologies", "distances", "models", "tasks", "labels", "datasets", "variants",
             "splits")
PROTOCOL_KEYS = ("epochs", "patience", "seeds", "batch_size", "optimizer", "grid", "sizes",
                 "per_size", "node_counts", "limit", "data_variant", "init", "hidden",
                 "dataset", "grid_name", "solver")
IGNORED_KEYS = ("ref",)  # measurement settings that do not change what a run measures


def experiment(name: str):
    return importlib.import_module(f"swan_jax.experiments.{name}").EXPERIMENT


def cell_config(cell: Cell):
    """(experiment, the cell's resolved configuration) without running anything."""
    exp = experiment(cell.experiment)
    return exp, from_dict(exp.Config, cell.config, source=f"cell {cell.id}",
                          base=exp.default_config(), experiment=exp.name)


def _norm(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _summaries(cell: Cell, collected: Sequence[Mapping[str, Any]]) -> list[dict | None]:
    """Per cell of the sweep cell, its summary in a collected run at its protocol."""
    exp, cfg = cell_config(cell)
    config = _norm(to_dict(cfg))
    protocol = {k: config.get(k) for k in PROTOCOL_KEYS if k in config}
    keys = [a for a in exp.cell_axes if a not in exp.pooled_axes]
    found: list[dict | None] = []
    for one in _norm([{a: c[a] for a in keys} for c in exp.cells(cfg)]):
        found.append(next((c for r in collected if r.get("experiment") == exp.name
                           and all(_norm(r.get("config") or {}).get(k) == v
                                   for k, v in protocol.items())
                           for c in r.get("cells") or []
                           if all(c.get(k) == v for k, v in one.items())
                           and isinstance(c.get("test_mean"), int | float)), None))
    return found


def is_done(cell: Cell, root: Path, collected: Sequence[Mapping[str, Any]],
            device_kind: str) -> bool:
    if cell.measurement:
        path = root / f"{cell.experiment}-{device_kind}" / "results.json"
        config = json.loads(path.read_text()).get("config") or {} if path.exists() else None
        return config is not None and all(config.get(k) == v for k, v in cell.config.items()
                                          if k not in IGNORED_KEYS)
    return all(s is not None for s in _summaries(cell, collected))


def resolve(cell: Cell, by_id: Mapping[str, Cell], collected: Sequence[Mapping[str, Any]]
            ) -> Cell:
    """A cell `after <id>` made runnable at the point that cell selected, once collected."""
    source = by_id.get(cell.status.removeprefix("after "))
    if not cell.status.startswith("after ") or source is None:
        return cell
    found = _summaries(source, collected)
    if not found or found[0] is None:
        return cell
    grid = {k: [v] for k, v in (found[0].get("best_hparams") or {}).items()}
    return dataclasses.replace(cell, status="runnable", config={**cell.config, "grid": grid})


def run_name(cell: Cell, device_kind: str) -> str:
    """`campaign-<group>` on a CPU, `campaign-<group>-<kind>` otherwise."""
    return f"campaign-{cell.group}" + ("" if device_kind.startswith("cpu")
                                       else f"-{device_kind}")


def merge_results(old: Mapping[str, Any] | None, new: Mapping[str, Any],
                  axes: Sequence[str], selectors: Sequence[str]) -> dict[str, Any]:
    """`old` (committed) plus a finished sweep `new`: its cell summaries replace the same
    cells', records are added once (by program, epoch cap and cell), selectors are
    unioned."""
    both = ([old] if old else []) + [new]
    cells = {json.dumps({a: c.get(a) for a in axes}, sort_keys=True): c
             for run in both for c in run.get("cells") or []}
    # the cell's axes in the key too: a renamed model's record (`gcn-biasbefore`) shares
    # its program's digest with the new model's, which must not replace it
    records = {json.dumps([r["program"], r["epochs"], *(r.get(a) for a in axes)]): r
               for run in both for r in run.get("records") or []}
    config = dict(new["config"])
    for key in selectors:
        values = [v for run in both for v in ((run.get("config") or {}).get(key) or [])]
        config[key] = list(dict.fromkeys(values))
    return {"experiment": new["experiment"], "machine": new.get("machine"),
            "config": config, "notes": new.get("notes") or [], "cells": list(cells.values()),
            "records": list(records.values()), "not_run": []}


def collect_cell(cell: Cell, run: Path, root: Path, device_kind: str, note: str
                 ) -> list[str]:
    """Merge the finished run folder `run` into its group's collected run."""
    exp = experiment(cell.experiment)
    name = run_name(cell, device_kind)
    old_path = root / name / "results.json"
    old = json.loads(old_path.read_text()) if old_path.exists() else None
    selectors = [k for k in cell.config if k in SELECTORS]
    axes = [a for a in exp.cell_axes if a not in exp.pooled_axes]
    merged = merge_results(old, json.loads((run / "results.json").read_text()), axes,
                           selectors)
    staging = run / "collected"
    write_text_atomic(staging / "results.json", json.dumps(merged, indent=1) + "\n")
    cfg = load_toml(exp.Config, run / "config.toml", base=exp.default_config())
    cfg = dataclasses.replace(cfg, **{k: tuple(merged["config"][k]) for k in selectors})
    write_text_atomic(staging / "config.toml", dump_toml(cfg, exp.name))
    return collect(staging, root, name=name, note=note)

