"""Program shapes, and a cell's cost priced from the shapes measured on a device kind.

A campaign cell is a sweep of programs (`Experiment.packed_plan`: one per static point,
cut by `runs_per_program` and `program_memory_gib`). What one epoch of a program costs
depends on its *shape*, written as one string (`shape_key`):

    <experiment>:<cell axes>/<static point>:<runs> runs:<settings digest>

the cell's axes without those that change no array (`NEUTRAL_AXES`: GraphProp's three
tasks are one generator's graphs with another target column), the static point (width,
depth, A_hat), the runs vmapped together (grid points x seeds), and a digest of the
configuration's other training settings (batch size, data sizes, solver; not epochs,
patience, seeds or the grid's values, `NOT_SHAPE`). Two programs of one shape compile
to the same program, whichever cell they serve.

`price` costs a cell on each GPU kind from the figures measured there
(`costs.measured_programs`: per shape, or per program name for older entries), program
by program, with `E` the cell's epoch cap:

* a program whose shape was measured (a probe, a campaign call, a collected run):
  `first epoch + E x seconds per epoch` (`costs.program_minutes`);
* else, a program no larger than a measured program of the cell (work: runs x layers x
  width, `work`): the smallest such program's figure, an upper bound (on a GPU a smaller
  program of the same kind is not slower: these programs are launch-bound);
* else its share of the cell's modelled cost, by work.

The cell's basis then says, per GPU kind, "measured" (how many programs, from what:
probe or campaign, device, date, shape) or "modelled", and `measured_minutes` holds the
minutes priced from measurements.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reproduce.campaign.plan import Entry

NEUTRAL_AXES = {"graphprop": ("task",)}
NOT_SHAPE = ("epochs", "patience", "seeds", "grid", "grid_name", "verify_md5")


@dataclasses.dataclass(frozen=True)
class ProgramShape:
    """One program of a cell as the plan prices it."""

    name: str
    runs: int
    shape: str  # `shape_key`
    work: float  # runs x layers x width (`work`)


def _static_point(program) -> str:
    return ",".join(f"{k}={v}" for k, v in program.static.items()) or "program"


def shape_key(exp, cfg, program) -> str:
    """The program's shape (module docstring): equal strings, equal compiled programs."""
    from swan_jax.experiments.packing import digest

    neutral = NEUTRAL_AXES.get(exp.name, ())
    cell = "/".join(str(v) for k, v in program.cell.items() if k not in neutral)
    settings = {k: v for k, v in cfg.identity().items() if k not in NOT_SHAPE}
    runs = len(program.grid) * len(cfg.seeds)
    return f"{exp.name}:{cell}/{_static_point(program)}:{runs} runs:{digest(settings)[:6]}"


def work(cfg, program) -> float:
    """Runs x layers x width of a program (a setting it does not have counts 1): orders a
    cell's programs by size and shares out a modelled cost."""
    axes = {**dict(cfg.grid), **program.static}

    def one(name: str) -> float:
        value = axes.get(name, getattr(cfg, name, None))
        value = value[0] if isinstance(value, tuple | list) and len(value) == 1 else value
        return float(value) if isinstance(value, int | float) else 1.0

    return len(program.grid) * len(cfg.seeds) * one("num_layers") * one("hidden")


class _NotCached(LookupError):
    """A memory figure `packing.json` does not hold (the plan loads no data)."""


def _packed(exp, cfg, cache: Mapping[str, int]) -> tuple[list, str]:
    """The cell's programs as the campaign packs them, the memory cut from `cache` only;
    without its figures, `runs_per_program` alone and a note saying so."""
    if cfg.program_memory_gib is None:
        return exp.plan(cfg), ""

    def no_data(cell):
        raise _NotCached(cell)

    try:
        return exp.packed_plan(cfg, exp.cells(cfg), no_data, cache=dict(cache)), ""
    except _NotCached:
        return exp.plan(cfg), (f"the cut to {cfg.program_memory_gib:g} GiB not known yet "
                               f"(packing.json lacks it: a probe or a campaign call on the "
                               f"data records it), counted uncut")


def cell_programs(entry: Entry, root: Path) -> tuple[list[ProgramShape], int, str]:
    """(programs, epoch cap, a note) of a sweep cell, as `runner.run_cell` would build
    them (the memory cut from `root/campaign/packing.json` where it holds the figures)."""
    from reproduce.campaign.costs import PACKING_FILE
    from reproduce.campaign.runner import cell_config

    exp, cfg = cell_config(entry, Path("runs/campaign/_probe"))
    path = root / "campaign" / PACKING_FILE
    cache = json.loads(path.read_text()) if path.exists() else {}
    programs, note = _packed(exp, cfg, cache)
    return [ProgramShape(p.name, len(p.grid) * len(cfg.seeds), shape_key(exp, cfg, p),
                         work(cfg, p)) for p in programs], int(cfg.epochs), note


@dataclasses.dataclass(frozen=True)
class Priced:
    """A cell's cost on one device kind, program by program."""

    minutes: float
    measured_minutes: float
    own: int  # programs priced by their own shape's figure
    bounded: int  # by a larger measured program's figure (an upper bound)
    modelled: int
    sources: tuple[str, ...]


def price_programs(programs: Sequence[ProgramShape], epochs: int, modelled_minutes: float,
                   figures: Mapping[Any, Mapping[str, Any]]) -> Priced:
    """The module docstring's pricing of `programs` at `epochs` (`figures`:
    `costs.measured_programs` of one device kind)."""
    from reproduce.campaign.costs import program_minutes

    found = {p.name: figures.get(p.shape) or figures.get((p.name, p.runs)) for p in programs}
    measured = sorted((p.work, p.name) for p in programs if found[p.name])
    total_work = sum(p.work for p in programs) or 1.0
    minutes = from_figures = 0.0
    own = bounded = 0
    sources = set()
    for p in programs:
        figure = found[p.name]
        if figure is None:  # the smallest measured program at least as large
            larger = [name for w, name in measured if w >= p.work]
            figure = found[larger[0]] if larger else None
            bounded += figure is not None
        else:
            own += 1
        if figure is None:
            minutes += modelled_minutes * p.work / total_work
            continue
        cost = program_minutes(figure, epochs)
        minutes, from_figures = minutes + cost, from_figures + cost
        sources.add(figure["source"])
    return Priced(minutes, from_figures, own, bounded, len(programs) - own - bounded,
                  tuple(sorted(sources)))


def statement(kind: str, priced: Priced) -> str:
    """The basis's words for one device kind: measured (how, from what) or modelled."""
    if not priced.own + priced.bounded:
        return f"{kind} modelled"
    n = priced.own + priced.bounded + priced.modelled
    parts = [f"{priced.own} at its own shape"]
    if priced.bounded:
        parts.append(f"{priced.bounded} at a larger measured program's pace (an upper "
                     f"bound)")
    if priced.modelled:
        parts.append(f"{priced.modelled} modelled (their share of the model below)")
    return (f"{kind} measured: {n} program(s), {', '.join(parts)}; from "
            + "; ".join(priced.sources))
