"""Measured seconds per program, by shape: what each GPU slice (and CPU call) timed.

Every campaign call appends, per program it trained, one entry to
`reproductions/campaign/costs.json`:

    device  the device kind (cpu-2core, h100, h200)
    cell    the plan cell; program  the program's name (cell path / static point)
    shape   experiment, runs (grid points x seeds), train nodes, layers, hidden
    epochs  the epochs this call trained of it, seconds_per_epoch (median of those
            after the call's first), first_epoch_seconds (the call's first: compiles)

    shape   (newer entries) the program's shape (`shapes.shape_key`): what the plan
            matches; probe  true for a probe's program (`probe.py`: a few epochs of an
            unmeasured shape, nothing else kept)

`merge` takes a slice's entries into this tree (`merge_costs`), and the plan
(`defaults.py`, `shapes.price_programs`) costs a cell's programs by the figures measured
for their shapes on each device kind: `measured_programs` reads these entries and the
per-program medians of every collected GPU run (`reproductions/*-<kind>/collected.json`,
their runs from `results.json`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from swan_jax.runs.io import write_text_atomic

COSTS_FILE = "costs.json"
PACKING_FILE = "packing.json"  # runs per program that fit, by program and memory budget
GPU_KINDS = ("h100", "h200")


def _read(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text()).get("programs", []) if path.exists() else []


def _key(item: Mapping[str, Any]) -> tuple:
    return (item.get("device"), item.get("program"), item.get("runs"), item.get("recorded"))


def record(folder: Path, device: str, cell: str, timed: Sequence[Mapping[str, Any]], *,
           probe: bool = False) -> None:
    """Append this call's programs (`runner.CellOutcome.timed`) to `folder/costs.json`
    (`probe`: marked as a probe's)."""
    if not timed:
        return
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    mark = {"probe": True} if probe else {}
    items = _read(folder / COSTS_FILE) + [{"device": device, "cell": cell, "recorded": stamp,
                                          **mark, **t} for t in timed]
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(folder / COSTS_FILE, json.dumps({"programs": items}, indent=1) + "\n")


def merge_costs(theirs: Path, ours: Path) -> list[str]:
    """The entries of `theirs/campaign/costs.json` this tree lacks, added to its own."""
    mine = _read(ours / "campaign" / COSTS_FILE)
    known = {_key(i) for i in mine}
    new = [i for i in _read(theirs / "campaign" / COSTS_FILE) if _key(i) not in known]
    if not new:
        return []
    (ours / "campaign").mkdir(parents=True, exist_ok=True)
    write_text_atomic(ours / "campaign" / COSTS_FILE,
                      json.dumps({"programs": mine + new}, indent=1) + "\n")
    return [f"costs: {len(new)} measured program(s) taken into reproductions/campaign/"
            f"{COSTS_FILE}"]


def merge_packing(theirs: Path, ours: Path) -> list[str]:
    """The memory figures of `theirs/campaign/packing.json` (`runner.packing_cache`) this
    tree lacks, added to its own (they are deterministic: shapes only)."""
    path = ours / "campaign" / PACKING_FILE
    other = theirs / "campaign" / PACKING_FILE
    mine = json.loads(path.read_text()) if path.exists() else {}
    new = {k: v for k, v in (json.loads(other.read_text()) if other.exists() else {}).items()
           if k not in mine}
    if not new:
        return []
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps({**mine, **new}, indent=1, sort_keys=True) + "\n")
    return [f"packing: {len(new)} program size(s) taken into reproductions/campaign/"
            f"{PACKING_FILE}"]


def _collected(root: Path, kind: str) -> dict[tuple[str, int], dict[str, Any]]:
    """Per-program medians of the collected runs measured on `kind`."""
    out = {}
    for folder in sorted(root.glob(f"*-{kind}")):
        timings = folder / "collected.json"
        results = folder / "results.json"
        if not (timings.exists() and results.exists()):
            continue
        programs = json.loads(timings.read_text()).get("programs") or {}
        for rec in json.loads(results.read_text()).get("records") or []:
            t = programs.get(rec.get("name"), {})
            if "seconds_median" in t:
                out[(rec["name"], len(rec.get("runs") or []))] = {
                    "seconds_per_epoch": float(t["seconds_median"]),
                    "first_epoch_seconds": rec.get("first_epoch_seconds") or 0.0,
                    "source": f"reproductions/{folder.name}"}
    return out


def measured_programs(root: Path, kind: str) -> dict[Any, dict[str, Any]]:
    """`(program name, runs)` and, for entries that record it, `shape` ->
    `{seconds_per_epoch, first_epoch_seconds, source}` measured on device kind `kind`:
    collected runs, then the newest `costs.json` entry (several epochs timed) of each
    program; `source` names it (probe or campaign, device, date, shape)."""
    out: dict[Any, dict[str, Any]] = dict(_collected(root, kind))
    for item in _read(root / "campaign" / COSTS_FILE):
        if item.get("device") != kind or not item.get("seconds_per_epoch"):
            continue
        if int(item.get("epochs") or 0) < 2:  # only a compiling epoch: not a pace
            continue
        what = "probe" if item.get("probe") else "campaign"
        shape = item.get("shape") or f"{item['program']}, {item['runs']} runs"
        figure = {"seconds_per_epoch": float(item["seconds_per_epoch"]),
                  "first_epoch_seconds": float(item.get("first_epoch_seconds") or 0.0),
                  "source": f"{what}, {kind}, {item.get('recorded', '')}, {shape} "
                            f"(reproductions/campaign/{COSTS_FILE})"}
        out[(item["program"], int(item["runs"]))] = figure
        if item.get("shape"):
            out[item["shape"]] = figure
    return out


def program_minutes(figure: Mapping[str, Any], epochs: int) -> float:
    """Wall minutes of a program at `epochs` from its measured pace and first epoch."""
    return (figure["first_epoch_seconds"] + epochs * figure["seconds_per_epoch"]) / 60
