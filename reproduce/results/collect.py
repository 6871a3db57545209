"""`collect`: copy the small files of a finished or partial sweep into `reproductions/`
(the command's help says which); never checkpoints or caches. A committed run is replaced
only by one at least as large in every `protocol.protocol_measures`, unless `force`."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reproduce.results.protocol import smaller_measures
from reproduce.results.store import (
    COLLECTED_FILE,
    CONFIG_FILE,
    RESERVED,
    RESULTS_FILE,
    ReproductionsError,
    current_records,
    read_json,
)
from swan_jax.runs.io import write_text_atomic
from swan_jax.train import read_history

MAX_MB = 5.0


class CollectRefused(ReproductionsError):
    """What `collect` will not do without `--force` (one line)."""


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
            history = run_file.parent / "history.jsonl"
            out.append({"name": str(run_file.parent.relative_to(root)),
                        "program": described.get("program"),
                        "cell": described.get("cell"), "static": described.get("static"),
                        "epochs_done": len(read_history(history)) if history.exists() else 0,
                        "epochs_cap": config.get("epochs")})
    return out


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
            force: bool = False, note: str | None = None,
            max_mb: float = MAX_MB) -> list[str]:
    """Copy `source`'s small files to `root/<name or experiment>/`; the lines to print."""
    source, root = Path(source), Path(root)
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
        "in_progress": running}
    dest.mkdir(parents=True, exist_ok=True)
    write_text_atomic(dest / RESULTS_FILE, raw)
    if (source / CONFIG_FILE).exists():
        write_text_atomic(dest / CONFIG_FILE, (source / CONFIG_FILE).read_text())
    elif (dest / CONFIG_FILE).exists():
        (dest / CONFIG_FILE).unlink()  # never keep the configuration of another run
    write_text_atomic(dest / COLLECTED_FILE, json.dumps(collected, indent=1) + "\n")
    lines = [replaced] if replaced else []
    lines.append(f"collected {source} -> {dest}: {len(records)} finished program(s), "
                 f"{len(running)} in progress")
    if not (source / CONFIG_FILE).exists():
        lines.append(f"warning: {source / CONFIG_FILE} is missing; the protocol is read from "
                     f"{RESULTS_FILE}")
    return lines
