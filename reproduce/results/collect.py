"""`collect`: copy the small files of a finished or partial sweep into `reproductions/`
(the command's help says which); never checkpoints or caches. A committed run is replaced
only by one at least as large in every `protocol.protocol_measures`, unless `force`."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reproduce.results.protocol import smaller_measures
from reproduce.results.store import (
    COLLECTED_FILE,
    CONFIG_FILE,
    HISTORY_FILE,
    RESERVED,
    RESULTS_FILE,
    ReproductionsError,
    cell_axes,
    current_records,
    matches,
    read_json,
)
from swan_jax.runs.io import write_text_atomic
from swan_jax.train import read_history

HISTORY_EXPERIMENTS = ("lrgb",)  # experiments whose curves RESULTS.md draws ("auto")
HISTORY_CHOICES = ("auto", "all", "none")
MAX_MB = 5.0
MAX_IN_PROGRESS_RUNS = 12  # curves of an unfinished program with more runs are skipped


class CollectRefused(ReproductionsError):
    """What `collect` will not do without `--force` (one line)."""


def program_folder(record: Mapping[str, Any], source: Path) -> Path | None:
    """A record's checkpoint folder, also when the results folder has moved."""
    recorded = Path(str(record.get("checkpoint_dir") or ""))
    if str(recorded) not in ("", ".") and recorded.is_dir():
        return recorded
    parts = recorded.parts
    if "checkpoints" in parts:
        index = len(parts) - 1 - parts[::-1].index("checkpoints")
        moved = source.joinpath(*parts[index:])
        if moved.is_dir():
            return moved
    return None


def read_history_lines(folder: Path | None) -> list[dict[str, Any]]:
    return read_history(folder) if folder and (folder / "history.jsonl").exists() else []


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, list):
        return [_round(v) for v in value]
    return value


def curves(lines: Sequence[Mapping[str, Any]], runs: Sequence[int]) -> dict[str, list]:
    out: dict[str, list] = {"epoch": [int(h["epoch"]) for h in lines]}
    for key in ("train_loss", "val", "test"):
        if all(key in h for h in lines):
            out[key] = [_round([h[key][r] for r in runs]) for h in lines]
    return out


def _chosen_runs(cell: Mapping[str, Any], records: Sequence[Mapping[str, Any]]
                 ) -> list[tuple[Mapping[str, Any], list[int]]]:
    """(record, run indices) of the cell's selected grid point (every pooled record)."""
    best = cell.get("best_hparams") or {}
    found = [(rec, [i for i, run in enumerate(rec.get("runs") or []) if run["hparams"] == best])
             for rec in records if matches(cell, rec)]
    return [(rec, runs) for rec, runs in found if runs]


def _entry(rec: Mapping[str, Any], runs: Sequence[int], lines, status: str,
           cap: Any) -> dict[str, Any]:
    return {"name": rec.get("name"), "status": status, "epochs_cap": cap,
            "cell": {a: rec[a] for a in cell_axes(rec)},
            "runs": [{"run": i, "seed": rec["runs"][i]["seed"],
                      "hparams": rec["runs"][i]["hparams"]} for i in runs],
            **curves(lines, runs)}


def in_progress(source: Path, results: Mapping[str, Any], finished: set[str]
                ) -> list[dict[str, Any]]:
    """Program folders of this configuration that have no record yet (still training)."""
    config = results.get("config") or {}
    roots = {source / "checkpoints", Path(config.get("checkpoint_dir") or source / "checkpoints")}
    out = []
    for root in sorted(r for r in roots if r.is_dir()):
        for run_file in sorted(root.rglob("run.json")):
            info = json.loads(run_file.read_text())
            described = info.get("description") or {}
            theirs = described.get("config") or {}
            if described.get("program") in finished or any(
                    theirs.get(k) != config.get(k) for k in ("grid", "seeds", "epochs")):
                continue
            lines = read_history_lines(run_file.parent)
            out.append({"name": str(run_file.parent.relative_to(root)),
                        "program": described.get("program"),
                        "cell": described.get("cell"), "static": described.get("static"),
                        "runs": [{"run": r["run"], "seed": r["seed"], "hparams": r["hparams"]}
                                 for r in info.get("runs") or []],
                        "epochs_done": len(lines), "epochs_cap": config.get("epochs"),
                        "folder": run_file.parent})
    return out


def histories(results: Mapping[str, Any], source: Path, running: Sequence[Mapping[str, Any]]
              ) -> dict[str, Any]:
    """`history.json`: each finished cell's selected runs, each few-run program's in progress."""
    cap = (results.get("config") or {}).get("epochs")
    programs, seen = [], set()
    records = current_records(results)
    for cell in results.get("cells") or []:
        for rec, runs in _chosen_runs(cell, records):
            if rec["program"] in seen:
                continue
            seen.add(rec["program"])
            lines = read_history_lines(program_folder(rec, source))
            if lines:
                programs.append(_entry(rec, runs, lines, "finished", cap))
    for prog in running:
        if len(prog["runs"]) <= MAX_IN_PROGRESS_RUNS and prog["epochs_done"]:
            rec = {"name": prog["name"], **(prog["cell"] or {}), "runs": prog["runs"]}
            programs.append(_entry(rec, range(len(prog["runs"])),
                                   read_history_lines(prog["folder"]), "in progress", cap))
    return {"experiment": results.get("experiment"), "programs": programs}


def _check_replace(dest: Path, results: Mapping[str, Any], force: bool) -> str | None:
    """Refuse a different or smaller run over a committed one (unless force); what it replaced."""
    if not (dest / RESULTS_FILE).exists():
        return None
    old = read_json(dest / RESULTS_FILE)
    if old.get("experiment") != results.get("experiment") and not force:
        raise CollectRefused(
            f"{dest} holds a {old.get('experiment')} run, this is {results.get('experiment')}:"
            f" pass --as NAME to collect it beside, or --force to replace it")
    smaller = smaller_measures(results, old)
    if smaller and not force:
        raise CollectRefused(
            f"refusing to replace {dest} with a smaller run ({'; '.join(smaller)}): pass "
            f"--force to replace it anyway, or --as NAME to keep both")
    return f"replaced {dest}" + (f" (smaller: {'; '.join(smaller)})" if smaller else "")


def _load_source(source: Path, max_mb: float) -> tuple[dict[str, Any], str]:
    path = source / RESULTS_FILE
    if not path.is_file():
        raise ReproductionsError(f"{path}: no such file; give a results folder whose sweep "
                                 f"finished a program, e.g. results/transfer")
    raw = path.read_bytes()
    if len(raw) > max_mb * 2 ** 20:
        raise CollectRefused(f"{path} is {len(raw) / 2 ** 20:.1f} MB, over --max-mb "
                             f"{max_mb:g}: reproductions/ keeps small files only")
    results = read_json(path)
    if not isinstance(results, dict) or "cells" not in results or "experiment" not in results:
        raise ReproductionsError(f"{path}: not a sweep's results file (no 'experiment' / "
                                 f"'cells')")
    return results, raw.decode()


def collect(source: str | Path, root: str | Path = "reproductions", *, name: str | None = None,
            force: bool = False, history: str = "auto", note: str | None = None,
            max_mb: float = MAX_MB) -> list[str]:
    """Copy `source`'s small files to `root/<name or experiment>/`; the lines to print."""
    source, root = Path(source), Path(root)
    if history not in HISTORY_CHOICES:
        raise ValueError(f"history must be one of {HISTORY_CHOICES}, got {history!r}")
    results, raw = _load_source(source, max_mb)
    dest = root / (name or str(results["experiment"]))
    if dest.name in RESERVED or not dest.name or dest.name.startswith("."):
        raise ReproductionsError(f"--as {dest.name!r}: choose another name")
    replaced = _check_replace(dest, results, force)
    records = current_records(results)
    running = in_progress(source, results, {r["program"] for r in records})
    collected = {
        "source": str(source), "collected": time.strftime("%Y-%m-%d %H:%M:%S"),
        "experiment": results["experiment"], "note": note,
        "notes": [str(n) for n in results.get("notes") or []],
        "in_progress": [{k: v for k, v in p.items() if k not in ("folder", "runs")}
                        for p in running]}
    dest.mkdir(parents=True, exist_ok=True)
    write_text_atomic(dest / RESULTS_FILE, raw)
    if (source / CONFIG_FILE).exists():
        write_text_atomic(dest / CONFIG_FILE, (source / CONFIG_FILE).read_text())
    elif (dest / CONFIG_FILE).exists():
        (dest / CONFIG_FILE).unlink()  # never keep the configuration of another run
    write_text_atomic(dest / COLLECTED_FILE, json.dumps(collected, indent=1) + "\n")
    wanted = history == "all" or (history == "auto"
                                  and results["experiment"] in HISTORY_EXPERIMENTS)
    curves_json = histories(results, source, running) if wanted else {"programs": []}
    if curves_json["programs"]:
        write_text_atomic(dest / HISTORY_FILE, json.dumps(curves_json) + "\n")
    elif (dest / HISTORY_FILE).exists():
        (dest / HISTORY_FILE).unlink()  # never keep curves of another run
    lines = [replaced] if replaced else []
    lines.append(f"collected {source} -> {dest}: {len(records)} finished program(s), "
                 f"{len(running)} in progress, {len(curves_json['programs'])} curve(s)")
    if not (source / CONFIG_FILE).exists():
        lines.append(f"warning: {source / CONFIG_FILE} is missing; the protocol is read from "
                     f"{RESULTS_FILE}")
    return lines
