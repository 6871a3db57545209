"""Probes: a few timed epochs of each unmeasured program shape, so that the plan prices
the cells of that shape from a measurement (`python -m reproduce.campaign probe`, the
first thing a GPU slice spends on).

The candidates are the programs (`shapes.cell_programs`: as the campaign packs them) of
the remaining runnable sweep cells (not done, matching `--cells`, their data on this
machine) that no measured figure prices on this device kind. Measuring shape S prices
every program of shape S, in any cell, and every program of a cell holding S that is no
larger (`shapes.price_programs`, the upper bound); its *value* is the plan minutes those
programs now have from the model (their share of their cell's modelled cost on this
device kind). Probes go by value, largest first (greedy: minutes a probe taken before
already prices count once), so a GraphProp screen's largest program (its whole screen,
on each of the three tasks) comes before a transfer program (one cell).

A probe builds its program with the campaign's own construction (`runner.cell_config`,
`Experiment.packed_plan` with the campaign's packing cache: the real memory cut) in a
scratch folder, trains it for at most `epochs` epochs (never fewer than two: the first
compiles) within its time, and records it in `costs.json` as a campaign program is
(`runner._Timer`: the first epoch, the median steady epoch, the shape), marked `probe`.
The scratch folder is deleted: no cell is collected, no bundle or state is written.
"""

from __future__ import annotations

import dataclasses
import shutil
import signal
import time
from collections.abc import Mapping, Sequence
from typing import Any

from reproduce.campaign.plan import Entry
from reproduce.campaign.runner import Deadline, StopCampaign

PROBE_EPOCHS = 5  # the first (compiling) epoch, then four whose median is the pace
MIN_SECONDS = 20.0  # no probe starts with less left (its first epoch compiles)
SHARE = 0.5  # a probe may take at most this share of the time left (at least 45 s)


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One shape to probe: the first cell holding it, its program, and its value."""

    cell: Entry
    program: str
    shape: str
    runs: int
    minutes: float  # plan minutes its measurement prices (module docstring)
    cells: tuple[str, ...]  # the cells whose cost it changes


@dataclasses.dataclass(frozen=True)
class _Cell:
    entry: Entry
    programs: list  # shapes.ProgramShape
    modelled: float  # the cell's modelled minutes on this device kind
    unpriced: frozenset[str]  # its programs no measured figure prices yet


def _cells(entries: Sequence[Entry], opts, modelled: Mapping[str, Entry]) -> list[_Cell]:
    from reproduce.campaign.costs import measured_programs
    from reproduce.campaign.measure import is_measurement
    from reproduce.campaign.shapes import cell_programs

    figures = measured_programs(opts.reproductions, opts.device_kind)
    out = []
    for entry in entries:
        if is_measurement(entry):
            continue
        programs, _, _ = cell_programs(entry, opts.reproductions)
        priced = {p.name for p in programs
                  if figures.get(p.shape) or figures.get((p.name, p.runs))}
        largest = max((p.work for p in programs if p.name in priced), default=-1.0)
        unpriced = frozenset(p.name for p in programs
                             if p.name not in priced and p.work > largest)
        if unpriced:
            model = modelled.get(entry.id, entry)
            out.append(_Cell(entry, programs, model.cost(opts.device_kind), unpriced))
    return out


def _covers(cell: _Cell, shape: str, work: float) -> list[tuple[str, str, float]]:
    """(cell, program, modelled minutes) that measuring `shape` prices in `cell`."""
    if not any(p.shape == shape for p in cell.programs):
        return []
    total = sum(p.work for p in cell.programs) or 1.0
    return [(cell.entry.id, p.name, cell.modelled * p.work / total)
            for p in cell.programs
            if p.name in cell.unpriced and (p.shape == shape or p.work <= work)]


def candidates(entries: Sequence[Entry], opts, modelled: Mapping[str, Entry]
               ) -> list[Candidate]:
    """The shapes to probe, by value (module docstring), for the cells `entries`."""
    cells = _cells(entries, opts, modelled)
    shapes: dict[str, tuple[_Cell, Any]] = {}
    for cell in cells:
        for p in cell.programs:  # a shape's programs are equal: its first cell's
            if p.name in cell.unpriced:
                shapes.setdefault(p.shape, (cell, p))
    covers = {shape: [c for cell in cells for c in _covers(cell, shape, program.work)]
              for shape, (_, program) in shapes.items()}
    priced: set[tuple[str, str]] = set()  # by the probes chosen so far
    out = []
    while shapes:
        def value(shape: str) -> float:
            return sum(m for cid, name, m in covers[shape] if (cid, name) not in priced)

        best = max(shapes, key=value)
        minutes = value(best)
        if minutes <= 0:
            break
        cell, program = shapes.pop(best)
        out.append(Candidate(cell.entry, program.name, best, program.runs, minutes,
                             tuple(sorted({cid for cid, _, _ in covers[best]}))))
        priced.update((cid, name) for cid, name, _ in covers[best])
    return out


@dataclasses.dataclass
class _ProbeDeadline(Deadline):
    """A probe's stop: after `max_epochs`, or when another epoch would not fit; never
    before its second epoch (the first compiles: a pace needs one more)."""

    def on_epoch_end(self, epoch: int, record: Mapping[str, Any]) -> None:
        now = self.clock()
        took = now - (self._last if self._last is not None else now)
        self._last = now
        self.epochs += 1
        if self.interrupted or self.spent_epochs() or (
                self.epochs >= 2 and self.left() < 1.5 * took):
            raise StopCampaign


def probe_one(candidate: Candidate, opts, deadline: float, epochs: int
              ) -> dict[str, Any] | None:
    """Train the candidate's program for at most `epochs` epochs before `deadline` (a
    `time.monotonic()` value) in a scratch folder, deleted after; its `costs` entry."""
    from reproduce.campaign.costs import PACKING_FILE
    from reproduce.campaign.runner import _Timer, cell_config, packing_cache, program_shape
    from reproduce.campaign.shapes import shape_key, work
    from swan_jax.experiments import sweep
    from swan_jax.train import TrainingInterrupted

    folder = opts.work / "_probes" / candidate.cell.slug
    shutil.rmtree(folder, ignore_errors=True)
    exp, cfg = cell_config(candidate.cell, folder, **opts.overrides)
    data = sweep._DataCache(exp, cfg)
    try:
        with packing_cache(opts.folder / PACKING_FILE) as cache:
            programs = exp.packed_plan(cfg, exp.cells(cfg), data.get, cache=cache)
        # The plan's shape; where the real memory cut differs from what the plan knew,
        # the largest program of the same static point (its shape is recorded).
        def point(name: str) -> str:
            return name.split(",part=")[0]

        program = next((p for p in programs if shape_key(exp, cfg, p) == candidate.shape),
                       None) or max((p for p in programs
                                     if point(p.name) == point(candidate.program)),
                                    key=lambda p: work(cfg, p))
        splits = data.get(program.cell)
        stop = _ProbeDeadline(deadline, margin=0.0, max_epochs=epochs)
        stop.start_program(0.0)
        timer = _Timer(stop)
        try:
            sweep.train_program(exp, cfg, program, splits, on_epoch_end=timer.on_epoch_end)
        except TrainingInterrupted:
            pass
        return timer.entry(program_shape(exp, cfg, program, splits)) if timer.seconds else None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_probes(opts, *, seconds: float, epochs: int = PROBE_EPOCHS,
               listing: bool = False) -> list[str]:
    """Probe the plan's unmeasured shapes by value for at most about `seconds` (a probe
    under way finishes its first two epochs); `listing`: only say which, in what order."""
    from reproduce.campaign import gather, loop
    from reproduce.campaign.defaults import modelled_entries

    started = time.monotonic()
    entries = loop.resolved(loop.load_plan(opts.plan), opts)
    runs = gather._runs(opts.reproductions)
    done = {e.id for e in entries if e.runnable and loop.is_done(e, opts, runs)}
    chosen, lines = loop.with_data(loop.select(entries, opts, done), opts)
    modelled = {e.id: e for e in modelled_entries(opts.reproductions)}
    todo = candidates(chosen, opts, modelled)
    lines += [f"probes: {len(todo)} unmeasured shape(s) on {opts.device_kind}, by the plan "
              f"minutes each prices ({sum(c.minutes for c in todo):.0f} in all)"]
    if listing:
        return lines + [f"  {c.minutes:7.1f} min  {c.shape}  ({c.cell.id}: {c.program}; "
                        f"cells {', '.join(c.cells)})" for c in todo]
    print("\n".join(lines), flush=True)
    end = started + seconds
    stopped: list[int] = []

    def stop(signum, frame):  # SIGTERM (the slice's hard stop): no further probe, and
        stopped.append(signum)  # the one under way deletes its folder on the way out
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        lines += _probes(todo, opts, end, epochs, stopped)
    except KeyboardInterrupt:  # between probes, or before one trained
        lines.append("probes: stopped by a signal")
        print(lines[-1], flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return lines + [f"probes: {time.monotonic() - started:.0f} s"]


def _probes(todo: Sequence[Candidate], opts, end: float, epochs: int, stopped: list[int]
            ) -> list[str]:
    """Each candidate in turn while time is left (`run_probes`); the lines to print."""
    from reproduce.campaign import costs, loop

    lines: list[str] = []
    for i, c in enumerate(todo):
        left = end - time.monotonic()
        if left < MIN_SECONDS:
            lines.append(f"probes: {left:.0f} s left, less than a probe's first epoch "
                         f"({MIN_SECONDS:.0f} s): {len(todo) - i} shape(s) not probed")
            print(lines[-1], flush=True)
            break
        print(f"probe {i + 1}: {c.cell.id} {c.program} ({c.runs} runs), prices "
              f"{c.minutes:.0f} plan minutes", flush=True)
        try:
            timed = probe_one(c, opts, time.monotonic() + max(SHARE * left, min(left, 45.0)),
                              epochs)
        except Exception as err:  # one probe's failure (memory, a bug) stops only it
            lines.append(f"probe {i + 1}: {c.program}: failed: {type(err).__name__}: "
                         f"{loop.one_line(err)}")
            print(lines[-1], flush=True)
            continue
        if timed is None:
            lines.append(f"probe {i + 1}: {c.program}: no epoch completed")
        else:
            costs.record(opts.folder, opts.device_kind, c.cell.id, [timed], probe=True)
            paced = timed["seconds_per_epoch"] is not None
            lines.append(f"probe {i + 1}: {timed['shape']}: {timed['epochs']} epoch(s), "
                         f"first {timed['first_epoch_seconds']} s, " + (
                             f"then {timed['seconds_per_epoch']} s per epoch "
                             f"({c.minutes:.0f} plan minutes priced)" if paced else
                             "no pace (only the compiling epoch): prices nothing"))
        print(lines[-1], flush=True)
        if stopped:
            lines.append("probes: stopped by a signal")
            print(lines[-1], flush=True)
            break
    return lines
