"""The campaign: the plan's cells in order, within a time budget, resumable anywhere.

One call (`run_campaign`):

1. reads the plan and what is already collected (a done cell is skipped);
2. takes the runnable cells in order: a cell already under way first (a bundle in
   `reproductions/campaign/bundles/`, or checkpoints in the work folder), then by
   priority; with `fit`, only cells whose remaining cost on this device kind fits the
   time left;
3. trains each (`runner.run_cell`) until the budget is spent: the last epoch is saved;
   a measurement cell (the runtime table, the Jacobian figure: `measure.py`) runs whole
   when its cost fits, into its own `reproductions/<name>-<device kind>/`;
4. collects each finished cell into `reproductions/campaign-<group>/` at once and
   deletes its bundle; writes a bundle of each cell it left unfinished;
5. writes `reproductions/campaign/state.json` (per cell: progress, device, measured
   seconds per epoch), re-renders RESULTS.md, and returns what remains with its cost.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reproduce.campaign import bundle, costs, gather, measure
from reproduce.campaign.plan import Entry, load_plan
from reproduce.campaign.runner import (
    DATA_HINT,
    FIRST_EPOCH_SECONDS,
    CellOutcome,
    Deadline,
    run_cell,
)
from swan_jax.runs.io import write_text_atomic

STATE_FILE = "state.json"


@dataclasses.dataclass
class Options:
    """One call's settings (the command line's flags)."""

    plan: Path
    reproductions: Path = Path("reproductions")
    work: Path = Path("runs/campaign")
    device_kind: str = "cpu-2core"
    budget_minutes: float = 60.0
    cells: Sequence[str] = ()  # fnmatch patterns on cell ids; empty: all
    ordered: bool = False  # cells in the order of their patterns (`select`)
    fit: bool = False
    max_cell_minutes: float | None = None  # skip cells whose remaining cost is larger
    bundle_out: Path | None = None
    bundle_in: Sequence[Path] = ()
    bundle_max_mb: float = bundle.MAX_MB
    render: bool = True
    margin_seconds: float = 30.0
    max_epochs: int | None = None  # tests: stop after this many epochs
    overrides: dict[str, Any] = dataclasses.field(default_factory=dict)  # tests: tiny sizes
    note: str = ""
    download: bool = False  # fetch a cell's missing raw files (else: skipped, one line)

    @property
    def folder(self) -> Path:
        return self.reproductions / "campaign"

    def bundle_path(self, entry: Entry) -> Path:
        return self.folder / "bundles" / f"{entry.slug}.npz"


def read_state(opts: Options) -> dict[str, Any]:
    path = opts.folder / STATE_FILE
    return json.loads(path.read_text()) if path.exists() else {"cells": {}}


def _progress(entry: Entry, state: dict[str, Any]) -> float:
    """Fraction of the cell done (finished programs, and epochs of the one under way)."""
    info = state["cells"].get(entry.id) or {}
    return float(info.get("fraction", 0.0))


def remaining_minutes(entry: Entry, opts: Options, state: dict[str, Any]) -> float:
    return entry.cost(opts.device_kind) * (1.0 - _progress(entry, state))


def _under_way(entry: Entry, opts: Options) -> bool:
    return opts.bundle_path(entry).exists() or any(
        (opts.work / entry.slug).rglob("run.json"))


def select(entries: Sequence[Entry], opts: Options, done: set[str],
           state: dict[str, Any] | None = None) -> list[Entry]:
    """Runnable, not done, matching `cells`; cells under way first, then the plan order.
    With `ordered` (a GPU slice's order of value): by the first pattern of `cells` each
    matches, then under way first, then the least remaining cost on this device kind."""
    chosen = [e for e in entries if e.runnable and e.id not in done and (
        not opts.cells or any(fnmatch.fnmatch(e.id, p) for p in opts.cells))]
    if not (opts.ordered and opts.cells):
        return sorted(chosen, key=lambda e: not _under_way(e, opts))
    state = state if state is not None else {"cells": {}}

    def value(e: Entry) -> tuple:
        pattern = next(i for i, p in enumerate(opts.cells) if fnmatch.fnmatch(e.id, p))
        return pattern, not _under_way(e, opts), remaining_minutes(e, opts, state)

    return sorted(chosen, key=value)


def with_data(entries: Sequence[Entry], opts: Options) -> tuple[list[Entry], list[str]]:
    """The sweep cells whose data this machine has (and the measurement cells, which
    check their own), and one line per cell left out: before any compile, so that a
    slice spends nothing on them."""
    from reproduce.campaign.runner import data_missing

    kept, lines = [], []
    for entry in entries:
        reason = None if measure.is_measurement(entry) else data_missing(
            entry, opts.work / entry.slug, download=opts.download, **opts.overrides)
        if reason:  # the first missing file (where to put it); --download fetches them
            first, *more = reason.split("; ")
            lines.append(f"{entry.id}: data not here ({first}"
                         + (f"; and {len(more)} more file(s)" if more else "")
                         + "; or pass --download), skipped")
        else:
            kept.append(entry)
    return kept, lines


def _fraction(outcome: CellOutcome, work: Path, cap: int) -> float:
    if outcome.finished:
        return 1.0
    results = work / "results.json"
    finished = ({r["program"] for r in json.loads(results.read_text())["records"]}
                if results.exists() else set())
    epochs = sum(len((f / "history.jsonl").read_text().splitlines())
                 for f in bundle.unfinished_programs(work, finished)
                 if (f / "history.jsonl").exists())
    done = outcome.programs_done + min(epochs / max(cap, 1), 1.0)
    return min(done / max(outcome.programs, 1), 0.99)


def _record(state: dict[str, Any], entry: Entry, outcome: CellOutcome, opts: Options,
            work: Path, cap: int) -> None:
    info = state["cells"].setdefault(entry.id, {})
    seconds = info.get("seconds", {})
    seconds[opts.device_kind] = seconds.get(opts.device_kind, 0.0) + outcome.seconds
    epochs = info.get("epochs", {})
    epochs[opts.device_kind] = epochs.get(opts.device_kind, 0) + outcome.epochs
    info.update(status="finished" if outcome.finished else "under way",
                programs=f"{outcome.programs_done} of {outcome.programs}",
                fraction=round(_fraction(outcome, work, cap), 4), seconds=seconds,
                epochs=epochs, updated=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    if outcome.epochs:
        info.setdefault("seconds_per_epoch", {})[opts.device_kind] = round(
            outcome.seconds / outcome.epochs, 4)


def _install_signals(deadline: Deadline) -> dict[int, Any]:
    """SIGTERM and Ctrl-C stop training after its newest checkpoint and end the call (no
    further cell starts). Returns the handlers they replace."""
    def stop(signum, frame):
        deadline.interrupted = True
        raise KeyboardInterrupt

    return {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}


def _quiet_signals() -> None:
    """While collecting and bundling, signals wait: the files must be whole."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)


def _restore_bundles(opts: Options, entries: Sequence[Entry]) -> list[str]:
    lines = []
    for path in opts.bundle_in:  # e.g. the file a GPU slice returned
        meta = bundle.read_meta(path)
        target = next((e for e in entries if e.id == meta["cell"].get("id")), None)
        if target is None:
            raise bundle.BundleError(f"{path}: cell {meta['cell'].get('id')!r} is not in "
                                     f"the plan")
        opts.bundle_path(target).parent.mkdir(parents=True, exist_ok=True)
        if Path(path).resolve() != opts.bundle_path(target).resolve():
            bundle.copy_bundle(path, opts.bundle_path(target))
        lines.append(f"bundle {path} -> {opts.bundle_path(target)}")
    return lines


def _finish_cell(entry: Entry, outcome: CellOutcome, opts: Options, work: Path) -> list[str]:
    if outcome.finished:
        note = opts.note or f"campaign on {opts.device_kind}"
        lines = gather.collect_group([entry], [work], opts.reproductions,
                                     opts.work / "_collect" / gather.group_of(entry), note,
                                     opts.device_kind)
        bundle.remove_bundle(opts.bundle_path(entry))
        return lines
    try:
        meta = bundle.write_bundle(work, opts.bundle_path(entry),
                                   cell={"id": entry.id}, device_kind=opts.device_kind,
                                   max_mb=opts.bundle_max_mb)
    except bundle.BundleError as err:
        return [f"{entry.id}: no bundle ({err})"]
    if opts.bundle_out is not None:
        bundle.copy_bundle(opts.bundle_path(entry), opts.bundle_out)
    return [f"{entry.id}: bundle {opts.bundle_path(entry)} ({meta['bytes'] / 2 ** 20:.2f} MB "
            f"in {meta['parts'] + 1} file(s), "
            f"{len(meta['programs'])} program(s) under way, {len(meta['records'])} done)"]


def _said(lines: list[str]) -> list[str]:
    """`lines`, printed now (a long call reports as it goes)."""
    if lines:
        print("\n".join(lines), flush=True)
    return lines


def run_campaign(opts: Options, *, deadline: Deadline | None = None) -> list[str]:
    """One call of the campaign (see the module's docstring); prints its lines as they
    come and returns them all. `deadline` replaces the one `opts.budget_minutes` sets
    (tests: a fake clock)."""
    entries = resolved(load_plan(opts.plan), opts)
    deadline = deadline or Deadline(time.monotonic() + 60 * opts.budget_minutes,
                                    margin=opts.margin_seconds, max_epochs=opts.max_epochs)
    lines = _said(_restore_bundles(opts, entries))
    state = read_state(opts)
    runs = gather._runs(opts.reproductions)
    done = {e.id for e in entries if e.runnable and is_done(e, opts, runs)}
    chosen, missing = with_data(select(entries, opts, done, state), opts)
    lines += _said(missing)
    previous = _install_signals(deadline)
    ran: list[str] = []  # the cells this call trained: the only state entries it writes
    try:
        for entry in chosen:
            # No cell starts that could not start a program (every later one would only
            # report "no time for another program").
            first = opts.overrides.get("first_epoch_seconds", FIRST_EPOCH_SECONDS)
            if not deadline.room_for_program(first):
                if deadline.interrupted or deadline.spent_epochs():
                    break  # said already
                lines += _said([f"campaign: {max(deadline.left(), 0):.0f} s of the budget "
                                f"left (besides {deadline.margin:.0f} s kept for collecting), "
                                f"less than a program's first epoch ({first:.0f} s): no "
                                f"further cell starts"])
                break
            left = deadline.left() / 60
            cost = remaining_minutes(entry, opts, state)
            if (opts.fit and cost > left) or (opts.max_cell_minutes is not None
                                              and cost > opts.max_cell_minutes):
                continue
            ran.append(entry.id)
            lines += _one_cell(entry, opts, deadline, state)
    finally:
        _quiet_signals()
        _save_state(opts, state, ran)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return lines + _said(closing(opts, entries))


def _save_state(opts: Options, state: dict[str, Any], cells: Sequence[str]) -> None:
    """This call's cells written into the state file as it is now: a `merge` of another
    machine's cells while this call ran (the standing practice: the campaign runs in the
    background while a GPU slice is merged) keeps its entries."""
    current = read_state(opts)
    for cell in cells:
        if cell in state["cells"]:
            current["cells"][cell] = state["cells"][cell]
    opts.folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(opts.folder / STATE_FILE, json.dumps(current, indent=1) + "\n")


def is_done(entry: Entry, opts: Options, runs: Sequence[dict[str, Any]]) -> bool:
    """A sweep cell collected at its protocol, or a measurement run on this device kind."""
    if measure.is_measurement(entry):
        return measure.is_done(entry, opts.reproductions, opts.device_kind)
    return gather.is_done(entry, opts.reproductions, runs)


def _one_cell(entry: Entry, opts: Options, deadline: Deadline, state: dict[str, Any]
              ) -> list[str]:
    if measure.is_measurement(entry):  # no sweep, no bundle: its run is written whole
        try:
            return _said(measure.run_measurement(entry, opts, deadline, state))
        except KeyboardInterrupt:  # a signal while it measured: nothing was written
            deadline.interrupted = True
            return _said([f"{entry.id}: interrupted (nothing written)"])
        except Exception as err:  # as a sweep cell's failure: it stops only this cell
            return [_failed(entry, err, state)]
    from swan_jax.experiments.sweep import DataUnavailable

    work = opts.work / entry.slug
    if opts.bundle_path(entry).exists():
        bundle.restore_bundle(opts.bundle_path(entry), work)
    print(f"campaign: {entry.id} on {opts.device_kind} ({deadline.left() / 60:.1f} min "
          f"left; full cost {entry.cost(opts.device_kind):g} min)", flush=True)
    try:
        outcome = run_cell(entry, work, deadline, **opts.overrides,
                           packing_file=opts.folder / costs.PACKING_FILE)
    except KeyboardInterrupt:  # a signal between programs: nothing unsaved
        deadline.interrupted = True
        outcome = CellOutcome(False, 0, 0, 0, 0.0, stopped="interrupted")
    except DataUnavailable as err:  # nothing ran: the cell's state (under way) stands
        line = (f"{entry.id}: not run, its state kept: " + "; ".join(err.lines)
                + f" (data: the plan's data_dir, else $SWAN_DATA_DIR, else {DATA_HINT})")
        print(line, flush=True)
        return [line]
    except Exception as err:  # one cell's failure (memory, a bug) stops only it
        return [_failed(entry, err, state)]
    _quiet_signals()
    _record(state, entry, outcome, opts, work, _epoch_cap(entry, opts))
    costs.record(opts.folder, opts.device_kind, entry.id, outcome.timed)
    lines = [f"{entry.id}: {'finished' if outcome.finished else 'unfinished'} "
             f"({outcome.programs_done} of {outcome.programs} program(s), {outcome.epochs} "
             f"epoch(s) in {outcome.seconds / 60:.1f} min" + (f"; {outcome.stopped}" if
                                                            outcome.stopped else "") + ")"]
    lines += _finish_cell(entry, outcome, opts, work)
    _install_signals(deadline)  # back to stopping cleanly
    print("\n".join(lines), flush=True)
    return lines


def _failed(entry: Entry, err: Exception, state: dict[str, Any]) -> str:
    """The one line of a cell that failed (printed, and its status in the state)."""
    line = f"{entry.id}: failed: {type(err).__name__}: {one_line(err)}"
    state["cells"].setdefault(entry.id, {})["status"] = line.split(": ", 1)[1]
    print(line, flush=True)
    return line


def one_line(err: BaseException) -> str:
    """An error's message on one line (a refusal lists one data set per line)."""
    return " ".join(str(err).split())


def _epoch_cap(entry: Entry, opts: Options) -> int:
    from reproduce.campaign.runner import cell_config

    return int(cell_config(entry, opts.work / entry.slug, **opts.overrides)[1].epochs)


def closing(opts: Options, entries: Sequence[Entry]) -> list[str]:
    lines = render_fresh(opts.reproductions) if opts.render else []
    return lines + remaining(entries, opts)


def render_fresh(reproductions: Path) -> list[str]:
    """RESULTS.md (beside `reproductions`) rendered by a fresh interpreter of this tree.

    Why not in this process: a campaign runs for hours, and the renderer's text (its notes
    and sections) may change in the tree meanwhile; a render by the code this process
    loaded at its start would write the older text over a newer RESULTS.md (it did, once:
    a commit then failed the check that RESULTS.md is rendered from the tree). Raises
    `ReproductionsError` with the renderer's one-line refusal."""
    from reproduce.results import ReproductionsError

    root = Path(__file__).resolve().parents[2]  # the tree whose `reproduce` this is
    done = subprocess.run(
        [sys.executable, "-m", "reproduce.results", "render", "--reproductions",
         str(Path(reproductions).resolve()), "--out",
         str(Path(reproductions).resolve().parent / "RESULTS.md")],
        cwd=root, capture_output=True, text=True, check=False)
    if done.returncode:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise ReproductionsError(said[-1] if said else
                                 f"rendering RESULTS.md failed (exit {done.returncode})")
    return done.stdout.strip().splitlines()


def resolved(entries: Sequence[Entry], opts: Options) -> list[Entry]:
    """The plan with each waiting cell whose screening is collected made runnable."""
    runs = gather._runs(opts.reproductions)
    by_id = {e.id: e for e in entries}
    return [gather.resolve(e, by_id, runs) for e in entries]


def remaining(entries: Sequence[Entry], opts: Options) -> list[str]:
    """What is left of the plan and its estimated cost on this device kind."""
    entries = resolved(entries, opts)
    state = read_state(opts)
    runs = gather._runs(opts.reproductions)
    left = [e for e in entries if e.runnable and not is_done(e, opts, runs)]
    blocked = [e for e in entries if not e.runnable]
    total = sum(remaining_minutes(e, opts, state) for e in left)
    lines = [f"remaining: {len(left)} runnable cell(s), about {total / 60:.1f} h on "
             f"{opts.device_kind}; {len(blocked)} cell(s) not runnable yet "
             f"(waiting, needing code, or not implemented)"]
    for e in left[:10]:
        lines.append(f"  {e.id}: {remaining_minutes(e, opts, state):.1f} min"
                     + (" (under way)" if _under_way(e, opts) else ""))
    if len(left) > 10:
        lines.append(f"  ... and {len(left) - 10} more")
    return lines
