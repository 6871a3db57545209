"""Pieces both documents share: their fixed text, a markdown table, the cells of the runs
and what a row says about how its number was obtained (`Evidence`)."""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from reproduce.results import protocol
from reproduce.results.store import RESULTS_FILE, ReproductionsError, Run, matches
from swan_jax.experiments.sweep import duration

# The documents' fixed text (introductions, the paper tables' texts): data, not code.
TEXT: dict[str, Any] = tomllib.loads(Path(__file__).with_name("text.toml").read_text())


def label_setting(cell: Mapping[str, Any]) -> str:
    """A GraphProp cell's label setting (swan_jax.data.graphprop.LABEL_SETTINGS)."""
    return str(cell.get("labels"))


# How each paper experiment names a cell (the keys of paper_values.json's "expected").
CELL_KEYS: dict[str, Callable[[Mapping[str, Any]], tuple]] = {
    "transfer": lambda c: (c["topology"], c["distance"], c["model"]),
    "graphprop": lambda c: (c["task"], label_setting(c), c["model"]),
    "lrgb": lambda c: (c["dataset"], str(c.get("model") or c.get("variant"))),
    "node_classification": lambda c: (c["dataset"], str(c.get("model") or c.get("variant"))),
}


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return [line(header), "|" + " --- |" * len(header), *(line(r) for r in rows), ""]


def relative(path: Path, out: Path) -> str:
    """`path` as a link from the document `out`."""
    return Path(os.path.relpath(path.resolve(), out.resolve().parent)).as_posix()


def anchor(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def device(run: Run | None, machine: Mapping[str, Any] | None = None) -> str:
    """A run's (or a record's `machine`'s) device: "cpu:0", "cuda:0 (NVIDIA H100)"."""
    machine = run.machine if run else machine or {}
    name = str(machine.get("device", "unknown device"))
    return name + (f" ({machine['device_kind']})" if machine.get("device_kind") else "")


def short_device(label: str) -> str:
    """"cuda:0 (NVIDIA H200)" -> "NVIDIA H200", "cpu:0 (cpu)" -> "CPU"."""
    return re.sub(r"cpu:\d+( \(cpu\))?", "CPU", re.sub(r"cuda:\d+ \((.*?)\)", r"\1", label))


def cell_rows(runs: Sequence[Run], key: Callable[[Mapping[str, Any]], tuple]
              ) -> dict[tuple, list[tuple[Run, dict[str, Any]]]]:
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


def epochs_range(cell: Mapping[str, Any]) -> str:
    epochs = cell.get("epochs_run") or []
    if not epochs:
        return "–"
    low, high = min(epochs), max(epochs)
    return str(high) if low == high else f"{low}-{high}"


def best_config(cell: Mapping[str, Any]) -> str:
    best = cell.get("best_hparams") or {}
    return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in sorted(best.items())) or "–"


@dataclasses.dataclass(frozen=True)
class Evidence:
    """A run's summary of a cell, and what a row says about how its number was obtained."""

    run: Run
    summary: Mapping[str, Any]
    departures: tuple[str, ...]  # () = the paper's full protocol
    converged: str  # "yes", "still improving (k of n seeds)", "–"
    device: str
    wall: str
    note: str = ""  # said beside the departures (e.g. why a grid axis was not searched)

    @property
    def full(self) -> bool:
        return not self.departures

    @property
    def protocol(self) -> str:
        return "full" if self.full else "reduced: " + "; ".join(self.departures)

    @property
    def said(self) -> str:
        """The departures, the note beside them."""
        text = "none" if self.full else "; ".join(self.departures)
        return f"{text} ({self.note})" if self.note else text


def converged(cell: Mapping[str, Any], cap: Any) -> str:
    """"yes" unless a seed ran to the epoch cap with its best epoch in the last 10%."""
    seeds = cell.get("per_seed") or []
    if not seeds:
        return "–"
    improving = [s for s in seeds if not s.get("diverged") and isinstance(cap, int)
                 and s.get("epochs_run") == cap
                 and s.get("best_epoch", -1) >= s["epochs_run"] - max(
                     1, round(0.1 * s["epochs_run"]))]
    return f"still improving ({len(improving)} of {len(seeds)} seeds)" if improving else "yes"


def cell_records(run: Run, cell: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [r for r in run.records if matches(cell, r)]


def cell_device(run: Run, cell: Mapping[str, Any]) -> str:
    """The devices of the cell's records, else the run's."""
    names = [device(None, rec.get("machine")) for rec in cell_records(run, cell)]
    return ", ".join(dict.fromkeys(names)) or device(run)


def reworded(text: str, proto: Mapping[str, Any]) -> str:
    name = proto.get("name")
    if not name:
        return text
    return text.replace("(paper ", f"({name} ").replace("the paper's", f"the {name}'s")


def cell_departures(run: Run, cell: Mapping[str, Any], proto: Mapping[str, Any],
                    paper_points: int | None = None) -> tuple[str, ...]:
    """The run's departures; the grid as the cell's `grid_points` against the paper's for
    this cell (`paper_points`, default its whole grid); pooled splits against the paper's."""
    items = [short for short, _ in protocol.departures(run.config, proto)]
    points = paper_points if paper_points is not None else protocol.grid_points(proto)
    ours = cell.get("grid_points")
    if isinstance(ours, int) and proto.get("grid") and ours < points:
        items.append(f"grid {ours} of {points} points")
    for axis, theirs in (proto.get("grid") or {}).items():  # values the paper never tried
        outside = [v for v in (run.config.get("grid") or {}).get(axis, []) if v not in theirs]
        items += [f"{axis} {protocol.fmt_set(outside)} (paper {protocol.fmt_set(theirs)})"
                  ] if outside else []
    splits, seeds = proto.get("splits"), cell.get("per_seed") or []
    if splits and any("split" in s for s in seeds) and len(seeds) < splits:
        items.append(f"{len(seeds)} of {splits} splits")
    return tuple(reworded(d, proto) for d in items)


def evidence(run: Run, cell: Mapping[str, Any], proto: Mapping[str, Any],
             paper_points: int | None = None, note: str = "") -> Evidence:
    wall = cell.get("wall_time")
    return Evidence(run, cell, cell_departures(run, cell, proto, paper_points),
                    converged(cell, run.config.get("epochs")), cell_device(run, cell),
                    "–" if not isinstance(wall, int | float) else duration(wall), note)
