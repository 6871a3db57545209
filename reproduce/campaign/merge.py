"""Another machine's campaign merged into this tree, cell by cell.

A GPU slice works on a copy of `reproductions/` and returns it (`reproduce/gpu_slice.sh`:
`$OUT/reproductions.tar`); meanwhile the campaign here may have advanced other cells. So
the copy never replaces the tree: for each plan cell, the side whose state is newer
(`campaign/state.json`, the cell's `updated` stamp) wins, and only for that cell:

- a cell the other machine finished: its cell summaries and program records (found in
  any collected run of the copy, at the cell's protocol) go into
  `reproductions/campaign-<group>-<device kind>/`, so every collected run names the one
  device its cells ran on; its local bundle, if any, is removed;
- a cell it left unfinished: its resume bundle replaces the local one;
- its state entry replaces the local one, keeping the local seconds and epochs of other
  device kinds (the plan's cost columns).

Measurements (`runtime-<kind>/`, the runtime table's timings; `jacobian-<kind>/`, the
Jacobian figure; `reproduce.campaign.measure`) are copied when this tree lacks them or
holds different ones.

A cell trained here too since (a work folder with checkpoints under the campaign's work
folder) is refused with one line: two histories of one run cannot be merged, and the
line says which folder to delete to take the other machine's.

    python -m reproduce.campaign merge runs/gpu/reproductions.tar [another ...]
"""

from __future__ import annotations

import json
import shutil
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reproduce.campaign import gather, measure
from reproduce.campaign.bundle import BundleError, copy_bundle, remove_bundle
from reproduce.campaign.costs import merge_costs, merge_packing
from reproduce.campaign.plan import Entry, load_plan
from reproduce.campaign.runner import cell_config
from swan_jax.runs.io import write_text_atomic

STATE = ("campaign", "state.json")


def merge_campaign(source: str | Path, opts) -> list[str]:
    """Merge the copy of `reproductions/` at `source` (a folder, or a `.tar` holding
    `reproductions/`) into `opts.reproductions`; returns the lines to print."""
    from reproduce.campaign.loop import STATE_FILE, read_state, resolved

    with tempfile.TemporaryDirectory() as tmp:
        root = _unpacked(Path(source), Path(tmp))
        theirs = json.loads(root.joinpath(*STATE).read_text())["cells"]
        ours = read_state(opts)
        runs = _collected_runs(root)
        lines = []
        for entry in resolved(load_plan(opts.plan), opts):
            other = theirs.get(entry.id)
            mine = ours["cells"].get(entry.id) or {}
            if not other or other.get("updated", "") <= mine.get("updated", ""):
                continue
            if measure.is_measurement(entry):  # its run is copied below, with the others
                ours["cells"][entry.id] = _merged_state(mine, other)
                continue
            line, taken = _take_cell(entry, mine, other, root, runs, opts)
            if taken:
                ours["cells"][entry.id] = _merged_state(mine, other)
            lines += [line] if line else []
        write_text_atomic(opts.folder / STATE_FILE, json.dumps(ours, indent=1) + "\n")
        lines += _take_measurements(root, opts.reproductions)
        lines += merge_costs(root, opts.reproductions)
        lines += merge_packing(root, opts.reproductions)
    return lines or [f"{source}: nothing newer than this tree"]


def _take_measurements(root: Path, local: Path) -> list[str]:
    """Measurements a slice made (`runtime-<kind>/`, `jacobian-<kind>/`: the plan's
    measurement cells or by hand): copied when this tree lacks them or holds other
    results."""
    lines = []
    for folder in sorted(p for name in measure.MEASUREMENTS for p in root.glob(f"{name}-*")):
        mine = local / folder.name
        if (mine / "results.json").exists() and (mine / "results.json").read_bytes() == (
                folder / "results.json").read_bytes():
            continue
        shutil.rmtree(mine, ignore_errors=True)
        shutil.copytree(folder, mine)
        lines.append(f"{folder.name}: measured there, copied into reproductions/{folder.name}")
    return lines


def _collected_runs(root: Path) -> list[dict[str, Any]]:
    """The copy's collected runs (`results.json`), each with its `collected.json` under
    the key `_collected` (the per-program timings)."""
    runs = []
    for path in sorted(root.glob("*/results.json")):
        try:
            run = json.loads(path.read_text())
            side = path.with_name("collected.json")
            run["_collected"] = json.loads(side.read_text()) if side.exists() else {}
        except json.JSONDecodeError as err:
            raise BundleError(f"{path}: not valid JSON ({err})") from None
        runs.append(run)
    return runs


def _unpacked(source: Path, tmp: Path) -> Path:
    """The `reproductions/` folder of `source` (unpacking a tar into `tmp`; a tar the
    slice cut into `<name>.part00`, `.part01`, ... is joined first)."""
    parts = sorted(source.parent.glob(source.name + ".part*")) if not source.exists() else []
    if parts:
        joined = tmp / "joined.tar"
        with joined.open("wb") as out:
            for part in parts:
                out.write(part.read_bytes())
        source = joined
    if source.is_file():
        try:
            with tarfile.open(source) as tar:
                tar.extractall(tmp, filter="data")
        except tarfile.TarError as err:
            raise BundleError(f"{source}: not a readable tar ({err})") from None
        source = tmp
    for candidate in (source, source / "reproductions"):
        if candidate.joinpath(*STATE).is_file():
            return candidate
    raise BundleError(f"{source}: no {'/'.join(STATE)} inside; pass the reproductions "
                      f"folder (or the .tar) a campaign wrote")


def _take_cell(entry: Entry, mine: Mapping[str, Any], other: Mapping[str, Any], root: Path,
               runs: Sequence[Mapping[str, Any]], opts) -> tuple[str | None, bool]:
    """Take `entry`'s newer work from the copy at `root`: (the line to print or None,
    whether it was taken)."""
    work = opts.work / entry.slug
    if any(work.rglob("run.json")):
        return (f"{entry.id}: not merged: it was trained here too ({work}); delete that "
                f"folder to take the other machine's"), False
    kind = device_kind(mine, other)
    if other.get("status") == "finished" and gather.is_done(entry, root, runs):
        name = _collect_finished(entry, kind, runs, opts)
        remove_bundle(opts.bundle_path(entry))
        return f"{entry.id}: finished on {kind}, collected into reproductions/{name}", True
    bundle = root / "campaign" / "bundles" / opts.bundle_path(entry).name
    if bundle.is_file():
        opts.bundle_path(entry).parent.mkdir(parents=True, exist_ok=True)
        copy_bundle(bundle, opts.bundle_path(entry))
        return (f"{entry.id}: under way on {kind} ({other.get('programs', '?')} program(s) "
                f"done), bundle -> {opts.bundle_path(entry)}"), True
    return None, False


def device_kind(mine: Mapping[str, Any], other: Mapping[str, Any]) -> str:
    """The device kind that advanced a cell on the other machine: the one whose seconds
    grew there beyond this tree's (a dict's order says only which kind came first)."""
    seconds, before = other.get("seconds") or {}, mine.get("seconds") or {}
    grew = [k for k, v in seconds.items() if v > before.get(k, 0.0)]
    if len(grew) == 1:
        return grew[0]
    return next(reversed(grew or list(seconds)), "unknown")


def _merged_state(mine: Mapping[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(other)
    for key in ("seconds", "epochs", "seconds_per_epoch"):
        merged[key] = {**(mine.get(key) or {}), **(other.get(key) or {})}
    return merged


def _matches(item: Mapping[str, Any], cells: Sequence[Mapping[str, Any]]) -> bool:
    return any(all(item.get(k) == v for k, v in cell.items()) for cell in cells)


def _collect_finished(entry: Entry, kind: str, runs: Sequence[Mapping[str, Any]],
                      opts) -> str:
    """The copy's summaries and records of `entry` into
    `reproductions/campaign-<group>-<kind>/`; returns that folder's name."""
    from swan_jax.experiments.config import dump_toml

    protocol, cells, exp_name = gather.entry_protocol(entry)
    run = next(r for r in runs if r.get("experiment") == exp_name
               and gather._same(protocol, r.get("config") or {})  # noqa: SLF001
               and any(_matches(c, cells) and isinstance(c.get("test_mean"), int | float)
                       for c in r.get("cells") or []))
    records = [r for r in run.get("records") or [] if _matches(r, cells)]
    new = {"experiment": exp_name, "config": run["config"], "notes": run.get("notes") or [],
           "machine": (records[0].get("machine") if records else None) or run.get("machine"),
           "cells": [c for c in run["cells"] if _matches(c, cells)], "records": records}
    name = gather.run_name(entry, kind)
    dest = opts.reproductions / name
    old = json.loads((dest / "results.json").read_text()) if (dest / "results.json").exists() \
        else None
    exp, cfg = cell_config(entry, opts.work / entry.slug)
    selectors = [k for k in entry.config if k in gather.SELECTORS]
    merged = gather.merge_results(old, [new], [a for a in exp.cell_axes
                                               if a not in exp.pooled_axes], selectors)
    dest.mkdir(parents=True, exist_ok=True)
    write_text_atomic(dest / "results.json", json.dumps(merged, indent=1) + "\n")
    for key in selectors:
        cfg = gather._with_union(cfg, key, merged["config"].get(key))  # noqa: SLF001
    write_text_atomic(dest / "config.toml", dump_toml(cfg, exp.name))
    _write_collected(dest, exp_name, kind, records, run)
    return name


def _write_collected(dest: Path, exp_name: str, kind: str,
                     records: Sequence[Mapping[str, Any]], run: Mapping[str, Any]) -> None:
    """`collected.json` beside the merged results: per-program timings kept from before
    and taken from the copy's own `collected.json` (the work folders stayed there)."""
    path = dest / "collected.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    theirs = run.get("_collected") or {}
    programs = {**(old.get("programs") or {}),
                **{r["name"]: (theirs.get("programs") or {}).get(r["name"], {})
                   for r in records}}
    collected = {"source": "campaign merge", "collected": time.strftime("%Y-%m-%d %H:%M:%S"),
                 "experiment": exp_name, "note": f"campaign on {kind}",
                 "notes": theirs.get("notes") or run.get("notes") or [], "programs": programs,
                 "in_progress": []}
    write_text_atomic(path, json.dumps(collected, indent=1) + "\n")
