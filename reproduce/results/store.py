"""The committed `reproductions/` folder: `paper_values.json` (the paper's numbers and
protocols), per run `<run>/results.json` and `config.toml` (copied verbatim),
`collected.json` (source, notes, programs in progress), and `figures/*.png` (drawn by
`render`); reading it, and writing a measurement's run (`benchmarks.runtime_table`,
`reproductions.jacobian`: no sweep, so no configuration file)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from swan_jax.runs.io import write_text_atomic

PAPER_FILE = "paper_values.json"
PAPER_KEYS = ("paper", "devices", "transfer", "graphprop", "lrgb", "node_classification")
RESULTS_FILE = "results.json"
CONFIG_FILE = "config.toml"
COLLECTED_FILE = "collected.json"
FIGURES = "figures"
# Folders under reproductions/ that are not runs: figures, the campaign's plan / state /
# carried parts, the GraphProp differential check (its section.md is shown verbatim), and
# Python's bytecode of the studies' shared module (reproductions/_differential.py).
RESERVED = {FIGURES, "campaign", "graphprop-differential", "__pycache__"}
SECTION_FILE = "section.md"  # a folder with only this (and its files) is not a run
# Keys of a sweep record that are not cell axes (sweep.program_record).
RECORD_KEYS = {"program", "epochs", "name", "static", "runs", "metric", "num_params",
               "epochs_completed", "first_epoch_seconds", "seconds_per_epoch",
               "train_seconds", "wall_time", "checkpoint_dir", "machine", "data_sizes",
               "train_ms_per_epoch", "eval_ms_per_epoch"}


def cell_axes(record: Mapping[str, Any]) -> list[str]:
    return [k for k in record if k not in RECORD_KEYS]


def matches(cell: Mapping[str, Any], record: Mapping[str, Any]) -> bool:
    """Whether `record` is one of `cell`'s programs (it agrees on the cell's axes)."""
    return all(cell.get(a) == record[a] for a in cell_axes(record) if a in cell)


def current_records(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Records of this configuration (its epoch cap, a summarised cell): a results file
    keeps the records of earlier, different runs in the same folder."""
    epochs = (results.get("config") or {}).get("epochs")
    cells = results.get("cells") or []
    return [r for r in results.get("records") or [] if r.get("epochs") == epochs
            and any(matches(c, r) for c in cells)]


class ReproductionsError(RuntimeError):
    """A file of `reproductions/` that cannot be read (one line naming it)."""


def read_json(path: Path) -> Any:
    """The JSON in `path`; a missing or malformed file raises one line naming it."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ReproductionsError(f"{path}: no such file") from None
    except json.JSONDecodeError as err:
        raise ReproductionsError(f"{path}: not valid JSON ({err})") from None


@dataclasses.dataclass
class Run:
    """One collected run; `problems`: what is missing (shown, never fatal)."""

    name: str
    folder: Path
    experiment: str
    results: dict[str, Any]
    collected: dict[str, Any]
    problems: list[str]

    @property
    def config(self) -> dict[str, Any]:
        return self.results.get("config") or {}

    @property
    def cells(self) -> list[dict[str, Any]]:
        # a summary with a test mean (NaN when its programs all diverged: kept)
        return [c for c in self.results.get("cells") or []
                if isinstance(c.get("test_mean"), int | float)]

    @property
    def records(self) -> list[dict[str, Any]]:
        return current_records(self.results)

    @property
    def machine(self) -> dict[str, Any]:
        return self.results.get("machine") or {}


RUNTIME = "runtime"  # `benchmarks.runtime_table`'s timings
JACOBIAN = "jacobian"  # `reproductions.jacobian`'s figure
MEASUREMENTS = (RUNTIME, JACOBIAN)


def load_run(folder: Path) -> Run | None:
    """The run in `folder`, or None when the folder holds no results at all."""
    problems = []
    if not (folder / RESULTS_FILE).exists():
        return None
    results = read_json(folder / RESULTS_FILE)
    if not isinstance(results, dict) or "cells" not in results:
        raise ReproductionsError(f"{folder / RESULTS_FILE}: not a sweep's results file "
                                 f"(no 'cells')")
    collected: dict[str, Any] = {}
    if (folder / COLLECTED_FILE).exists():
        collected = read_json(folder / COLLECTED_FILE)
    else:
        problems.append(f"no {COLLECTED_FILE} (source and notes unknown)")
    if not (folder / CONFIG_FILE).exists() and results.get("experiment") not in MEASUREMENTS:
        problems.append(f"no {CONFIG_FILE} (the protocol below is read from "
                        f"{RESULTS_FILE}'s copy of the configuration)")
    return Run(name=folder.name, folder=folder, experiment=str(results.get("experiment")),
               results=results, collected=collected, problems=problems)


def load_runs(root: Path) -> tuple[list[Run], list[str]]:
    """Every run under `root` by name, and a line per folder without results."""
    runs, empty = [], []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and p.name not in RESERVED):
        run = load_run(folder)
        if run is not None:
            runs.append(run)
        elif (folder / SECTION_FILE).exists():
            continue
        elif any(folder.iterdir()):
            empty.append(f"{folder}: no {RESULTS_FILE}; collect the run again")
    return runs, empty


def load_paper(root: Path) -> dict[str, Any]:
    path = root / PAPER_FILE
    if not path.exists():
        raise ReproductionsError(f"{path}: missing; it holds the paper's values every "
                                 f"comparison needs (restore it from git)")
    paper = read_json(path)
    missing = [k for k in PAPER_KEYS if k not in paper]
    if missing:
        raise ReproductionsError(f"{path}: no {', '.join(missing)} (restore it from git)")
    return paper


def output_arguments(p: argparse.ArgumentParser, experiment: str) -> None:
    """A measurement's --note, --reproductions and --out."""
    p.add_argument("--note", default="",
                   help="a line shown beside the rows (e.g. how loaded the machine was)")
    p.add_argument("--reproductions", type=Path, default=Path("reproductions"))
    p.add_argument("--out", type=Path, default=None,
                   help=f"results folder (default REPRODUCTIONS/{experiment}-<device kind>)")


def write_run(out: Path, record: dict[str, Any], source: str) -> None:
    """A measurement's `results.json` and `collected.json`, as `load_run` reads them."""
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / RESULTS_FILE, json.dumps(record, indent=1, default=float) + "\n")
    collected = {"source": source, "collected": time.strftime("%Y-%m-%d %H:%M:%S"),
                 "experiment": record["experiment"],
                 "note": f"load average {record['load_average'][0]:.1f} at the end"}
    write_text_atomic(out / COLLECTED_FILE, json.dumps(collected, indent=1) + "\n")
