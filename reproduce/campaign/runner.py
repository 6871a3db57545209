"""Train one campaign cell until it is done or the deadline comes, never past a save.

A cell is one sweep (`Experiment.plan` of its configuration: one or more programs) in
its own work folder, always with `resume`: whatever was checkpointed there (by an
earlier call, or a restored bundle) continues. The public pieces of
`swan_jax.experiments.sweep` do the work (`train_program`, `program_record`,
`write_outputs`); what is added is the stop: before each program there must be time for
its first (compiling) epoch, and after each epoch `Deadline.on_epoch_end` stops training
once another epoch would not fit. It stops by raising `KeyboardInterrupt` inside the
loop, which saves the completed epoch and raises `TrainingInterrupted` (an interrupted
run resumes bit-identically).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import time
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from reproduce.campaign.plan import Entry

EXPERIMENT_MODULES = {"transfer": "transfer", "graphprop": "graphprop", "lrgb": "lrgb",
                      "node_classification": "node_classification"}


class StopCampaign(KeyboardInterrupt):
    """Raised inside the training loop when the budget is spent (after a save)."""


# Seconds a program's first epoch (compiling, then one epoch) is given before it starts.
FIRST_EPOCH_SECONDS = 60.0

@dataclasses.dataclass
class Deadline:
    """When to stop: `deadline` (a `time.monotonic()` value), with `margin` seconds kept
    for collecting and bundling. `max_epochs` (tests): stop after that many epochs."""

    deadline: float
    margin: float = 30.0
    max_epochs: int | None = None
    clock: Callable[[], float] = time.monotonic
    report_seconds: float = 120.0  # a progress line at most this often
    epochs: int = 0
    interrupted: bool = False  # a signal: no further epoch or program starts
    label: str = ""  # the program under way and its epoch cap (progress lines)
    cap: int = 0
    _last: float | None = None
    _reported: float = -float("inf")

    def left(self) -> float:
        if self.interrupted:
            return -float("inf")
        return self.deadline - self.margin - self.clock()

    def room_for_program(self, first_epoch_seconds: float = FIRST_EPOCH_SECONDS) -> bool:
        """Whether a program's first epoch (compiling) fits in what is left."""
        return self.left() > first_epoch_seconds and not self.spent_epochs()

    def start_program(self, first_epoch_seconds: float) -> bool:
        """Whether a program may start (`room_for_program`); its epochs are timed from now."""
        self._last = self.clock()
        return self.room_for_program(first_epoch_seconds)

    def spent_epochs(self) -> bool:
        return self.max_epochs is not None and self.epochs >= self.max_epochs

    def on_epoch_end(self, epoch: int, record: Mapping[str, Any]) -> None:
        """Called after each epoch, before its save: stop when another epoch (1.5x the
        time since the last call: one epoch, or a fused block's) would not fit. The loop
        saves the completed epochs on the way out."""
        now = self.clock()
        took = now - (self._last if self._last is not None else now)
        self._last = now
        self.epochs += 1
        if now - self._reported >= self.report_seconds:
            self._reported = now
            # the record's own pace: a fused block's epochs reach this hook together
            pace = float(record.get("seconds", took))
            eta = (self.cap - epoch - 1) * pace
            print(f"  {self.label}: epoch {epoch + 1} of at most {self.cap}, {pace:.3g} s per "
                  f"epoch, program ETA {eta / 60:.1f} min (less with early stopping), "
                  f"budget left {self.left() / 60:.1f} min", flush=True)
        if self.spent_epochs() or self.left() < 1.5 * took:
            raise StopCampaign


def experiment(name: str):
    if name not in EXPERIMENT_MODULES:
        raise ValueError(f"experiment {name!r} is not one the campaign runs "
                         f"({', '.join(EXPERIMENT_MODULES)})")
    module = importlib.import_module(f"swan_jax.experiments.{EXPERIMENT_MODULES[name]}")
    return module.EXPERIMENT


def _as_field(cls, name: str, value: Any) -> Any:
    """A plan value as the configuration field wants it (TOML lists -> tuples)."""
    hint = str(typing.get_type_hints(cls).get(name, ""))
    if value == "none":
        return None
    if isinstance(value, list) and "tuple" in hint:
        return tuple(value)
    return value


# The repository's data beside it, as the Makefile finds it (../shared/data of the
# repository root): the campaign runs outside make too. The package never looks there.
REPO_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
DATA_HINT = "../shared/data"


def repository_data_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """$SWAN_DATA_DIR when set (the experiments read it themselves: None), else the
    repository's `../shared/data` when it exists, else None (the loaders' `data/`)."""
    env = os.environ if env is None else env
    if env.get("SWAN_DATA_DIR") or not REPO_DATA.is_dir():
        return None
    return REPO_DATA


def cell_config(entry: Entry, work: Path, **overrides: Any):
    """(experiment, configuration) of a plan cell run in `work` (always resumable): the
    experiment's packaged protocol, then the plan's changes (its grid axes replace the
    packaged ones axis by axis). An experiment that reads raw files reads them from the
    plan's `data_dir`, else $SWAN_DATA_DIR, else the repository's `../shared/data`."""
    exp = experiment(entry.experiment)
    base = exp.default_config()
    changes = {k: _as_field(exp.Config, k, v) for k, v in entry.config.items() if k != "grid"}
    found = repository_data_dir()
    if found is not None and "data_dir" in exp.Config.__dataclass_fields__ and \
            "data_dir" not in changes and "data_dir" not in overrides:
        changes["data_dir"] = found
    grid = {**base.grid, **{k: tuple(v) for k, v in (entry.config.get("grid") or {}).items()}}
    changes.update(grid=grid, results_dir=work, checkpoint_dir=work / "checkpoints",
                   resume=True, overwrite=False, progress=False, **overrides)
    return exp, exp.default_config(**changes)


def data_missing(entry: Entry, work: Path, *, download: bool = False, **overrides: Any
                 ) -> str | None:
    """Why the cell's data is not on this machine (the first of its data sets that is
    missing), else None: checked before any compile. Without `download` nothing is
    fetched (a lent GPU machine reaches no network: a download would only wait)."""
    exp, cfg = cell_config(entry, work, **overrides)
    if "download" in exp.Config.__dataclass_fields__ and not download:
        cfg = dataclasses.replace(cfg, download=False)
    for cell in exp.cells(cfg):
        reason = exp.missing_data(cfg, cell)
        if reason:
            return reason
    return None


@dataclasses.dataclass
class CellOutcome:
    """What one call did to a cell."""

    finished: bool
    programs: int
    programs_done: int
    epochs: int
    seconds: float
    cells: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    stopped: str = ""
    timed: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # `costs`


def program_shape(exp, cfg, program, splits) -> dict[str, Any]:
    """What a program's cost depends on: experiment, runs, training nodes, layers, width,
    and the shape string the plan matches (`shapes.shape_key`)."""
    from reproduce.campaign.shapes import shape_key
    from swan_jax.experiments.sweep import data_sizes

    axes = {**dict(cfg.grid), **program.static}

    def one(value):  # a one-value grid axis as its value
        return value[0] if isinstance(value, tuple | list) and len(value) == 1 else value

    return {"program": program.name, "experiment": exp.name,
            "runs": len(program.grid) * len(cfg.seeds),
            "nodes": data_sizes(splits)["train"]["nodes"],
            "layers": one(axes.get("num_layers", getattr(cfg, "num_layers", None))),
            "hidden": one(axes.get("hidden", getattr(cfg, "hidden", None))),
            "shape": shape_key(exp, cfg, program)}


@contextlib.contextmanager
def packing_cache(path: Path | None):
    """A dict of `packing.memory_limit`'s figures read from `path` and written back if
    it grew (None: a dict kept by no one)."""
    import json

    from swan_jax.runs.io import write_text_atomic

    known = json.loads(path.read_text()) if path is not None and path.exists() else {}
    cache = dict(known)
    yield cache
    if path is not None and cache != known:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(cache, indent=1, sort_keys=True) + "\n")


class _Timer:
    """The seconds of each epoch a call trains of one program (`Deadline.on_epoch_end`'s
    records), as a `costs` entry."""

    def __init__(self, deadline: Deadline):
        self.deadline = deadline
        self.seconds: list[float] = []

    def on_epoch_end(self, epoch: int, record: Mapping[str, Any]) -> None:
        self.seconds.append(float(record.get("seconds", 0.0)))
        self.deadline.on_epoch_end(epoch, record)

    def entry(self, shape: Mapping[str, Any]) -> dict[str, Any]:
        steady = sorted(self.seconds[1:])
        return {**shape, "epochs": len(self.seconds),
                "first_epoch_seconds": round(self.seconds[0], 3) if self.seconds else None,
                "seconds_per_epoch": round(steady[len(steady) // 2], 4) if steady else None}


def run_cell(entry: Entry, work: Path, deadline: Deadline, *,
             first_epoch_seconds: float = FIRST_EPOCH_SECONDS,
             packing_file: Path | None = None, **overrides: Any) -> CellOutcome:
    """Train the cell's programs not yet done, in order, until done or out of time.
    `packing_file`: the JSON kept of the memory figures that cut programs
    (`packing_cache`), so that a cell resumed elsewhere does not trace them again."""
    from swan_jax.experiments import sweep
    from swan_jax.experiments.records import ResultsFile
    from swan_jax.train import TrainingInterrupted

    started, epochs_before = time.monotonic(), deadline.epochs
    exp, cfg = cell_config(entry, work, **overrides)
    sweep.check_outputs(cfg)
    results = ResultsFile(work / "results.json", resume=True)
    cells, skipped = sweep.available_cells(exp, cfg, exp.cells(cfg))
    data = sweep._DataCache(exp, cfg)
    with packing_cache(packing_file) as cache:
        programs = exp.packed_plan(cfg, cells, data.get, cache=cache)
    todo = [p for p in programs if not results.done(sweep.done_key(cfg, p))]
    splits, stopped, timed = None, "", []
    for program in todo:
        if not deadline.start_program(first_epoch_seconds):
            stopped = "no time for another program"
            break
        splits = data.get(program.cell)
        deadline.label, deadline.cap = f"{entry.id} {program.name}", int(cfg.epochs)
        timer = _Timer(deadline)
        try:
            result = sweep.train_program(exp, cfg, program, splits,
                                         on_epoch_end=timer.on_epoch_end)
        except TrainingInterrupted:
            stopped = ("interrupted" if deadline.interrupted else "budget spent") + (
                " (stopped after a checkpoint)")
            break
        finally:
            if timer.seconds:
                timed.append(timer.entry(program_shape(exp, cfg, program, splits)))
        results.add(sweep.program_record(exp, cfg, program, result, splits))
    done = sum(results.done(sweep.done_key(cfg, p)) for p in programs)
    finished = done == len(programs) and not skipped
    summaries = sweep.write_outputs(exp, cfg, results, programs, skipped) if finished else []
    return CellOutcome(finished=finished, programs=len(programs), programs_done=done,
                       epochs=deadline.epochs - epochs_before,
                       seconds=time.monotonic() - started,
                       cells=summaries, stopped=stopped or ("; ".join(skipped)),
                       timed=timed)
