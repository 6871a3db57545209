"""Finished campaign cells into `reproductions/campaign-<group>/`, and which cells are done.

Cells of one group (the first part of a cell id: `transfer`, `graphprop-screen`, `lrgb`,
...) share a protocol, so their sweeps merge into one collected run: the cell summaries
and records of every finished cell, the configuration with the cell selectors
(`topologies`, `models`, ...) the union of the cells'. The merge starts from what is
committed, so a new machine adds to it without the old work folders; `collect` of
`reproduce.results` then copies it as any other run (and refuses a
smaller one).

A plan cell is done when some collected run (the campaign's or any other, e.g. a GPU
measurement collected by hand) holds a summary of that cell at the same protocol:
epochs, patience, seeds, batch size, grid and data as the cell's configuration.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reproduce.campaign.plan import Entry
from reproduce.campaign.runner import cell_config
from swan_jax.runs.io import write_text_atomic

# Configuration fields that choose cells (role "select"): unioned when cells merge.
SELECTORS = ("topologies", "distances", "models", "tasks", "labels", "datasets", "variants",
             "splits")
PROTOCOL_KEYS = ("epochs", "patience", "seeds", "batch_size", "optimizer", "grid", "sizes",
                 "per_size", "node_counts", "limit", "data_variant", "init", "hidden",
                 "dataset", "grid_name", "solver")


def group_of(entry: Entry) -> str:
    return entry.id.split("/")[0]


def run_name(entry: Entry, device_kind: str = "cpu-2core") -> str:
    """The folder under `reproductions/` that collects the cell's group on one device
    kind: `campaign-<group>` for a CPU, `campaign-<group>-<kind>` otherwise, so a
    collected run's machine is the machine of all its cells."""
    suffix = "" if device_kind.startswith("cpu") else f"-{device_kind}"
    return f"campaign-{group_of(entry)}{suffix}"


def _norm(value: Any) -> Any:
    """JSON-equal form (tuples as lists, grid axes as lists) for comparing protocols."""
    return json.loads(json.dumps(value, default=str))


def entry_protocol(entry: Entry) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """(protocol values, the cells it selects, experiment name) of a plan cell."""
    from swan_jax.experiments.config import to_dict

    exp, cfg = cell_config(entry, Path("runs/campaign/_probe"))
    config = _norm(to_dict(cfg))
    keys = [a for a in exp.cell_axes if a not in exp.pooled_axes]
    cells = [{a: c[a] for a in keys} for c in exp.cells(cfg)]
    return {k: config.get(k) for k in PROTOCOL_KEYS if k in config}, _norm(cells), exp.name


def _runs(root: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(root.glob("*/results.json")):
        try:
            out.append(json.loads(path.read_text()))
        except json.JSONDecodeError:
            continue
    return out


def is_done(entry: Entry, root: Path, runs: Sequence[Mapping[str, Any]] | None = None
            ) -> bool:
    """Whether every cell of `entry` is collected at its protocol under `root`."""
    protocol, cells, name = entry_protocol(entry)
    runs = _runs(root) if runs is None else runs
    for cell in cells:
        if not any(r.get("experiment") == name and _same(protocol, r.get("config") or {})
                   and any(all(c.get(k) == v for k, v in cell.items())
                           and isinstance(c.get("test_mean"), int | float)
                           for c in r.get("cells") or []) for r in runs):
            return False
    return True


def _same(protocol: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
    config = _norm(config)
    return all(config.get(k) == v for k, v in protocol.items())


# ============================================================================ merging


def _cell_key(cell: Mapping[str, Any], axes: Sequence[str]) -> str:
    return json.dumps({a: cell.get(a) for a in axes}, sort_keys=True)


def merge_results(old: Mapping[str, Any] | None, new: Sequence[Mapping[str, Any]],
                  axes: Sequence[str], selectors: Sequence[str]) -> dict[str, Any]:
    """`old` (committed) plus the finished sweeps `new`: a newer cell summary replaces
    the same cell's, records are added once (by program and epoch cap), and each
    selector of the configuration becomes the union over all."""
    runs = ([old] if old else []) + list(new)
    cells: dict[str, dict[str, Any]] = {}
    records: dict[tuple, dict[str, Any]] = {}
    for run in runs:
        for cell in run.get("cells") or []:
            cells[_cell_key(cell, axes)] = cell
        for rec in run.get("records") or []:
            records[(rec["program"], rec["epochs"])] = rec
    config = dict(new[-1]["config"] if new else old["config"])
    for key in selectors:
        values = [v for run in runs for v in ((run.get("config") or {}).get(key) or [])]
        if values:
            config[key] = list(dict.fromkeys(values))
    latest = new[-1] if new else old
    return {"experiment": latest["experiment"], "machine": latest.get("machine"),
            "config": config, "notes": latest.get("notes") or [],
            "cells": list(cells.values()), "records": list(records.values()),
            "not_run": []}


def collect_group(entries: Sequence[Entry], works: Sequence[Path], root: Path,
                  staging: Path, note: str, device_kind: str = "cpu-2core") -> list[str]:
    """Merge the finished cells `entries` (sweeps in `works`) into their group's run."""
    from reproduce.results import collect
    from swan_jax.experiments.config import dump_toml

    exp, cfg = cell_config(entries[0], works[0])
    name = run_name(entries[0], device_kind)
    old_path = root / name / "results.json"
    old = json.loads(old_path.read_text()) if old_path.exists() else None
    new = [json.loads((w / "results.json").read_text()) for w in works]
    selectors = [k for k in entries[0].config if k in SELECTORS]
    axes = [a for a in exp.cell_axes if a not in exp.pooled_axes]
    merged = merge_results(old, new, axes, selectors)
    write_text_atomic(staging / "results.json", json.dumps(merged, indent=1) + "\n")
    for key in selectors:
        cfg = _with_union(cfg, key, merged["config"].get(key))
    write_text_atomic(staging / "config.toml", dump_toml(cfg, exp.name))
    old_timings = _old_timings(root / name)
    lines = collect(staging, root, name=name, note=note)
    _keep_timings(root / name, old_timings)
    return lines


def _with_union(cfg, key: str, values: Any):
    import dataclasses

    return dataclasses.replace(cfg, **{key: tuple(values)}) if values else cfg


def _old_timings(folder: Path) -> dict[str, Any]:
    path = folder / "collected.json"
    return json.loads(path.read_text()).get("programs", {}) if path.exists() else {}


def _keep_timings(folder: Path, old: Mapping[str, Any]) -> None:
    """Per-program timings of cells collected before (their work folders may be gone)."""
    path = folder / "collected.json"
    collected = json.loads(path.read_text())
    programs = collected.get("programs") or {}
    for key, timing in old.items():
        if programs.get(key, {}).get("epochs", 0) == 0:
            programs[key] = timing
    collected["programs"] = programs
    write_text_atomic(path, json.dumps(collected, indent=1) + "\n")


# ======================================================================= dependencies


def best_point(entry: Entry, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The selected grid point of `entry`'s (single) cell where it is collected at its
    protocol, else None."""
    protocol, cells, name = entry_protocol(entry)
    for run in runs:
        if run.get("experiment") != name or not _same(protocol, run.get("config") or {}):
            continue
        for cell in run.get("cells") or []:
            if (all(cell.get(k) == v for k, v in cells[0].items())
                    and isinstance(cell.get("test_mean"), int | float)):
                return dict(cell.get("best_hparams") or {})
    return None


def resolve(entry: Entry, by_id: Mapping[str, Entry], runs: Sequence[Mapping[str, Any]]
            ) -> Entry:
    """A cell waiting for another (`status = "after <id>"`, e.g. a GraphProp cell after
    its screening) becomes runnable at that cell's selected point once it is collected;
    until then it stays as it is."""
    import dataclasses

    if not entry.status.startswith("after "):
        return entry
    source = by_id.get(entry.status[len("after "):])
    point = None if source is None else best_point(source, runs)
    if point is None:
        return entry
    grid = {k: [v] for k, v in point.items()}
    return dataclasses.replace(entry, status="runnable", config={**entry.config, "grid": grid},
                               note=(entry.note + "; " if entry.note else "")
                               + f"at the point {source.id} selected")
