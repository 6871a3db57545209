"""The protocol a collected run ran (its `results.json` -> `config`), how big it is, and
where it departs from the paper's (`paper_values.json` -> `<experiment>.protocol`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from reproduce.results.store import current_records
from swan_jax.data.graphprop import DEFAULT_NODES, DEFAULT_PER_SIZE, SPLITS
from swan_jax.experiments import graphprop, transfer
from swan_jax.experiments.sweep import duration

EXPERIMENTS: dict[str, Any] = {"transfer": transfer.EXPERIMENT, "graphprop": graphprop.EXPERIMENT}


def split_sizes(config: Mapping[str, Any]) -> list[int] | None:
    """Graphs per split (train, val, test) when the configuration decides them (GraphProp's
    data module's defaults where it leaves them implicit)."""
    if config.get("sizes"):
        return [int(v) for v in config["sizes"]]
    if "per_size" in config or "node_counts" in config:
        per_size = config.get("per_size") or [DEFAULT_PER_SIZE[s] for s in SPLITS]
        counts = ([len(config["node_counts"])] * 3 if config.get("node_counts")
                  else [len(DEFAULT_NODES[s]) for s in SPLITS])
        return [int(p) * int(c) for p, c in zip(per_size, counts, strict=True)]
    return None


def data_size(config: Mapping[str, Any]) -> float:
    """A number that grows with the data a configuration trains on (inf: all of it)."""
    sizes = split_sizes(config)
    return _unlimited(config.get("limit")) if sizes is None else float(sum(sizes))


def grid_points(config: Mapping[str, Any]) -> int:
    return math.prod(len(_values(v)) for v in (config.get("grid") or {}).values())


def _unlimited(value: Any) -> float:
    return math.inf if value is None else float(value)


def protocol_measures(results: Mapping[str, Any]) -> dict[str, float]:
    """What `collect` compares before replacing a run (each grows with the protocol)."""
    config = results.get("config") or {}
    cells = [c for c in results.get("cells") or [] if "test_mean" in c]
    return {"epochs": _unlimited(config.get("epochs")),
            "patience": _unlimited(config.get("patience")),
            "seeds": float(len(config.get("seeds") or [])),
            "data": data_size(config),
            "grid points": float(grid_points(config)),
            "finished cells": float(len(cells)),
            "finished programs": float(len(current_records(results)))}


def smaller_measures(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[str]:
    """Each measure in which `new` results are smaller than `old`, as "name a < b"."""
    a, b = protocol_measures(new), protocol_measures(old)
    return [f"{name} {a[name]:g} < {b[name]:g}".replace("inf", "unlimited")
            for name in a if a[name] < b[name]]


def _values(values: Any) -> list:
    return list(values) if isinstance(values, list | tuple) else [values]


def fmt_set(values: Sequence) -> str:
    return "{" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values) + "}"


def departures(config: Mapping[str, Any], paper: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(short, long) per departure of `config` from the paper's `protocol`, the grid aside
    (`blocks.cell_departures` counts each cell's)."""
    out: list[tuple[str, str]] = []
    sizes, paper_sizes = split_sizes(config), paper.get("data")
    if isinstance(paper_sizes, list) and sizes is not None and sizes != paper_sizes:
        out.append((f"data {'/'.join(map(str, sizes))}",
                    f"data {'/'.join(map(str, sizes))} train/val/test graphs (paper "
                    f"{'/'.join(map(str, paper_sizes))})"))
    if config.get("limit") is not None:
        out.append((f"first {config['limit']} graphs",
                    f"only the first {config['limit']} raw rows / graphs per split (paper: "
                    f"the full data)"))
    for key, label in (("epochs", "epochs"), ("patience", "patience")):
        if key in paper and config.get(key) != paper[key]:
            ours = "none" if config.get(key) is None else config.get(key)
            theirs = "none" if paper[key] is None else paper[key]
            out.append((f"{label} {ours}", f"{label} {ours} (paper {theirs})"))
    seeds = len(config.get("seeds") or [])
    if "seeds" in paper and seeds != paper["seeds"]:
        out.append((f"{seeds} seed(s)", f"{seeds} seed(s) (paper {paper['seeds']})"))
    for key in ("optimizer", "batch_size", "hidden"):
        if key in paper and key in config and config[key] != paper[key]:
            out.append((f"{key} {config[key]}", f"{key} {config[key]} (paper {paper[key]})"))
    if config.get("solver", "euler") != "euler":
        out.append((f"solver {config['solver']}", f"solver {config['solver']} (paper: "
                                                   f"explicit Euler layers)"))
    if config.get("data_variant") not in (None, "paper"):
        variant = config["data_variant"]
        out.append((f"data {variant}", f"data variant {variant} (paper: the data as the "
                                       f"paper describes it)"))
    options = config.get("data_options") or {}
    if options:
        shown = ", ".join(f"{k}={v}" for k, v in options.items())
        out.append((shown, f"data options {shown}"))
    return out


def machine_line(machine: Mapping[str, Any]) -> str:
    parts = [str(machine.get("device", "unknown device"))]
    for key in ("device_kind", "device_count", "cpu_count"):
        if machine.get(key) is not None:
            parts.append(f"{key.replace('_', ' ')} {machine[key]}")
    host = machine.get("machine") or machine.get("platform")
    if machine.get("processor"):
        host = f"{host}, {machine['processor']}"
    return ", ".join(parts) + (f" on {host}" if host else "") + (
        f"; jax {machine['jax']}" if machine.get("jax") else "")


def grid_line(config: Mapping[str, Any]) -> str:
    grid = config.get("grid") or {}
    axes = [f"{axis} {fmt_set(_values(v))}" for axis, v in grid.items()]
    return " x ".join(axes) + f" ({grid_points(config)} point(s))" if axes else "none"


def wall_line(records: Sequence[Mapping[str, Any]]) -> str:
    total = sum(float(r.get("wall_time") or 0.0) for r in records)
    dates = sorted(str((r.get("machine") or {}).get("date", "")) for r in records)
    dates = [d for d in dates if d]
    span = f", finished {dates[0]} to {dates[-1]}" if dates else ""
    return f"{duration(total)} summed over {len(records)} finished program(s){span}"


def paper_cell_points(experiment: str, cell: Mapping[str, Any]) -> int | None:
    """Grid points the paper searches for this cell (transfer, GraphProp): the experiment's
    own grid of the cell under its packaged configuration, which is the paper's protocol
    (ADGN has no beta, the baselines fewer axes, a regular graph one beta)."""
    if experiment not in EXPERIMENTS:
        return None
    exp = EXPERIMENTS[experiment]
    return grid_points({"grid": exp.grid(exp.default_config(),
                                         {a: cell[a] for a in exp.cell_axes})})
