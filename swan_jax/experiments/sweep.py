"""The one sweep: an experiment says what is particular to it, the sweep does the rest.

An `Experiment` subclass declares its cells (what the paper's table has rows for), its
data (the splits of a cell), its model builder, its grid (static = shape-changing axes,
one compiled program per combination; every other axis numeric = vmapped), its task
(loss, metric and its direction, node or graph level) and its paper reference.
`run_sweep` then does the same for every experiment:

1. refuses before any training what it cannot do: output folders that are files or not
   writable, an existing results file or checkpoint folder without `--resume` /
   `--overwrite`, missing data (unless `--skip-missing`);
2. plans the programs and prints the plan;
3. trains each program not yet in the results (`swan_jax.train.train`; one folder per
   program, named after its cell, static point and a hash of everything that decides
   its numbers), with one overall progress bar;
4. writes `results.json` (a record per program), summarises over seeds per cell (the
   best grid point by mean validation metric), writes `table.md` beside the paper, the
   figure and the resolved `config.toml`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
import time
from collections import ChainMap
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar, cast

import jax
import numpy as np

from swan_jax.config import SWANConfig, concrete_hparams
from swan_jax.experiments import hosts, packing, report
from swan_jax.experiments.config import (
    CONFIG_DIR,
    SweepConfig,
    changed_settings,
    dump_toml,
    load_toml,
    shown_value,
    to_dict,
)
from swan_jax.experiments.locks import lock_outputs
from swan_jax.experiments.packing import digest
from swan_jax.experiments.records import ResultsFile, machine_info, summarise_runs
from swan_jax.models import SWANBlock, parameters_only
from swan_jax.pytrees import tree_size
from swan_jax.runs.io import check_output_dir, save_json_atomic, write_text_atomic
from swan_jax.settings import HINT, Hint, HintedError, coded_choices
from swan_jax.solvers import IMPLICIT_SOLVERS, check_implicit_plan
from swan_jax.train import (
    ModelFn,
    NodeSplit,
    Split,
    TrainConfig,
    TrainResult,
    duration,
    interactive,
    metric_mode,
    train,
)

Cell = dict[str, Any]
ConfigT = TypeVar("ConfigT", bound=SweepConfig)  # an experiment's `Config`


@dataclasses.dataclass(frozen=True)
class Task:
    """What a cell is scored by: loss, metric (its direction follows) and level."""

    loss: str
    metric: str
    level: str  # "graph" or "node"


class Experiment(Generic[ConfigT]):
    """Subclass, set the class attributes, override what is particular.

    Required: `name`, `cell_axes`, `cells`, `load_data`, `model_fn`, and `task` (a
    class attribute, or `task_for` per cell). Optional: `Config` (a `SweepConfig`
    subclass with the experiment's own fields), `static_axes` (or `static_axes_of` per
    cell), `pooled_axes` (cell axes a summary pools over, e.g. ten official splits),
    `grid` (per-cell axes), `paper` (the paper's mean and std of a cell),
    `missing_data` (checked before any training), `max_params`, `display_scale`,
    `notes`, `plot`.
    """

    name: ClassVar[str]
    title: ClassVar[str] = ""
    paper_ref: ClassVar[str] = "the paper"
    Config: ClassVar[type[SweepConfig]] = SweepConfig
    cell_axes: ClassVar[tuple[str, ...]] = ()
    static_axes: ClassVar[tuple[str, ...]] = ()
    pooled_axes: ClassVar[tuple[str, ...]] = ()
    task: ClassVar[Task | None] = None
    max_params: ClassVar[int | None] = None
    budget_hint: ClassVar[str] = "lower --hidden or --layers, or pass --allow-more-params"
    display_scale: ClassVar[float] = 1.0  # table values = metric x this (100: percent)
    table_sections: ClassVar[tuple[str, str] | None] = None  # (cell axis, heading)
    # False: the test split is scored only at the end, at each run's best validation epoch
    # (no per-epoch test curve), so an epoch evaluates once: one pass over a large graph.
    track_test: ClassVar[bool] = True
    # More scores per run (`run_scores`), summarised per cell as `<name>_mean`, `_std`.
    run_score_names: ClassVar[tuple[str, ...]] = ()

    # ------------------------------------------------------------ what is particular
    def cells(self, cfg: ConfigT) -> list[Cell]:
        raise NotImplementedError

    def load_data(self, cfg: ConfigT, cell: Cell) -> Mapping[str, Split]:
        raise NotImplementedError

    def model_fn(self, cfg: ConfigT, cell: Cell, static: Mapping[str, Any]) -> ModelFn:
        raise NotImplementedError

    def task_for(self, cfg: ConfigT, cell: Cell) -> Task:
        if self.task is None:
            raise NotImplementedError(f"{type(self).__name__} sets no task")
        return self.task

    def static_axes_of(self, cfg: ConfigT, cell: Cell) -> tuple[str, ...]:
        """The grid axes whose values split the cell into programs (`static_axes`); a
        traced choice (`settings.coded_choices`) not named here joins one program."""
        return self.static_axes

    def grid(self, cfg: ConfigT, cell: Cell) -> dict[str, tuple]:
        """The axes of a cell's grid (default: the configuration's)."""
        return dict(cfg.grid)

    def data_key(self, cfg: ConfigT, cell: Cell) -> Any:
        """Cells with equal keys share their data (loaded once)."""
        return json.dumps(cell, sort_keys=True)

    def missing_data(self, cfg: ConfigT, cell: Cell) -> str | None:
        """Why a cell's data cannot be had (checked for every cell before training)."""
        return None

    def paper(self, cell: Cell) -> tuple[float, float | None] | None:
        return None

    def ode_batch(self, cfg: ConfigT, cell: Cell, static: Mapping[str, Any]
                  ) -> tuple[int, int, int] | None:
        """`(graphs per training batch, nodes of the largest graph, ODE state width)` of a
        program whose model integrates `cfg.solver`, known without loading data (None:
        unknown, or no ODE block): what `check_solver_plan` sizes an implicit solver by."""
        return None

    def scale(self, cell: Mapping[str, Any]) -> float:
        """Table values are the metric times this (100: percent, as the paper prints)."""
        return self.display_scale

    def run_scores(self, cfg: ConfigT, program: Program, result: TrainResult,
                   splits: Mapping[str, Split]) -> list[dict[str, float]] | None:
        """Per run (in `result.runs`' order), more scores of its best parameters, named
        in `run_score_names` (GraphProp: the authors' batch-averaged score); none here."""
        return None

    def extra_results(self, cfg: ConfigT) -> dict[str, Any]:
        """More top-level entries of results.json (reference scores, ...); none here."""
        return {}

    def notes(self, cfg: ConfigT) -> list[str]:
        return []

    def plot(self, cells: Sequence[Mapping[str, Any]], path: Path) -> bool:
        """Draw the experiment's figure to `path`; False when there is nothing to draw."""
        return report.plot_against_paper(self, cells, path)

    def table(self, cfg: ConfigT, cells: Sequence[Mapping[str, Any]],
              skipped: Sequence[str]) -> str:
        """The markdown of `table.md` (default: the test metric beside the paper's)."""
        return report.table(self, cfg, cells, skipped)

    # ------------------------------------------------------------ the model's bridge
    def swan_block(self, cfg: SweepConfig, static: Mapping[str, Any], hp: Mapping[str, Any],
                   **fixed: Any) -> SWANBlock:
        """SWAN's block at one grid point, for `model_fn(hp)`: `SWANConfig.from_point` of
        the point (the program's `static` values and the run's `hp`, traced numbers where
        the program vmaps them) and `fixed`, what the cell decides (`variant`,
        `num_layers`, ...), integrated as `cfg.integrator` says."""
        # ChainMap only reads its maps; `hp` notes which keys are read, so not copied
        point: ChainMap[str, Any] = ChainMap(cast(MutableMapping[str, Any], hp),
                                             cast(MutableMapping[str, Any], static))
        swan = SWANConfig.from_point(point, **fixed)  # reads only SWAN's
        return SWANBlock(swan, **cfg.integrator.options())

    # ------------------------------------------------------------ its command line
    def add_arguments(self, parser) -> None:
        """Add the experiment's shortcut flags (`--all`, ...): every setting of `Config`
        has its flag already, generated from its declaration."""

    def base_config(self, args) -> ConfigT:
        """The configuration flags start from (default: the packaged TOML)."""
        return self.default_config()

    def check_arguments(self, args, error) -> None:
        """Refuse combinations of flags before anything else; `error(message)` exits 2."""

    def apply_arguments(self, args, cfg: ConfigT, error) -> ConfigT:
        """The experiment's own shortcut flags on top of `cfg` (every setting's flag is
        applied already); `error(message)` exits with 2."""
        return cfg

    # ------------------------------------------------------------ shared machinery
    @property
    def label(self) -> str:
        return self.title or self.name

    def default_config(self, **changes: Any) -> ConfigT:
        """The packaged `configs/<name>.toml` (or the dataclass defaults), then `changes`."""
        path = CONFIG_DIR / f"{self.name}.toml"
        cfg = load_toml(self.Config, path) if path.exists() else self.Config()
        return cast(ConfigT, dataclasses.replace(cfg, **changes))  # `Config` makes ConfigTs

    def plan(self, cfg: ConfigT, cells: Sequence[Cell] | None = None) -> list[Program]:
        """Every program of every cell, in order."""
        cells = self.cells(cfg) if cells is None else cells
        programs = [program for cell in cells for program in _cell_programs(self, cfg, cell)]
        return packing.pack(programs, cfg)  # `runs_per_program` (memory: `packed_plan`)

    def packed_plan(self, cfg: ConfigT, cells: Sequence[Cell], splits_of, *,
                    cache=None) -> list[Program]:
        """`plan`, with each static point cut to the runs whose step fits
        `cfg.program_memory_gib` (`packing`: needs the cells' data, `splits_of(cell)`;
        `cache`: a dict the caller keeps of the figures, `packing.memory_limit`)."""
        programs = [program for cell in cells for program in _cell_programs(self, cfg, cell)]
        if cfg.program_memory_gib is None:
            return packing.pack(programs, cfg)
        limit = packing.memory_limit(self, cfg, splits_of,
                                     lambda p: train_config(self, cfg, p, None), cache)
        return packing.pack(programs, cfg, limit)


@dataclasses.dataclass(frozen=True)
class Program:
    """One compiled program: a cell, a static point, its numeric grid points x seeds."""

    cell: Cell
    static: dict[str, Any]
    grid: list[dict[str, float]]
    ident: str  # hash of everything that decides the numbers but the epoch count
    name: str  # cell path / static point
    folder: Path

    @property
    def label(self) -> str:
        return " / ".join(str(v) for v in self.cell.values())


def grid_points(axes: Mapping[str, Sequence]) -> list[dict[str, Any]]:
    """Cartesian product of named axes: [{name: value, ...}, ...]."""
    names = list(axes)
    return [dict(zip(names, combo, strict=True))
            for combo in itertools.product(*(tuple(axes[n]) for n in names))]


def _cell_programs(exp: Experiment, cfg: SweepConfig, cell: Cell) -> list[Program]:
    axes = exp.grid(cfg, cell)
    # Where a traced choice (the adjacency) is known and where traced, decided here: with
    # several values its runs join one program (a code per run); alone it stays static,
    # its code known at trace time, so the program computes the one operator it selects.
    static_axes = {k: axes[k] for k in exp.static_axes_of(cfg, cell) if k in axes}
    static_axes.update({k: v for k, v in axes.items()
                        if k in coded_choices() and len(tuple(v)) == 1})
    numeric = grid_points({k: v for k, v in axes.items() if k not in static_axes})
    out = []
    for static in grid_points(static_axes):
        config = {k: v for k, v in cfg.identity().items() if k != "epochs"}  # resume extends
        ident = digest({"experiment": exp.name, "cell": cell, "static": static,
                        "grid": numeric, "config": config})
        point = ",".join(f"{k}={v}" for k, v in static.items()) or "program"
        cell_path = "/".join(str(v) for v in cell.values())
        out.append(Program(cell=dict(cell), static=static, grid=numeric, ident=ident,
                           name=f"{cell_path}/{point}",
                           folder=cfg.checkpoint_root() / cell_path / f"{point}-{ident}"))
    return out


def done_key(cfg: SweepConfig, program: Program) -> dict[str, Any]:
    """What a results record must match for its program to count as done."""
    return {"program": program.ident, "epochs": cfg.epochs}


# ====================================================================== before training


class SweepRefused(RuntimeError):
    """What the sweep refuses before any training (one line for the user)."""


class DataUnavailable(SweepRefused):
    """Cells refused for missing data (a line per data set: what is missing, how to get
    it, also as `lines`). Nothing was trained, nothing a run already saved was touched."""

    def __init__(self, message: str, lines: Sequence[str]):
        super().__init__(message)
        self.lines = list(lines)


NOT_RUN = "not run: data unavailable"  # how a skipped cell is marked (table, results)


def check_outputs(cfg: SweepConfig) -> None:
    """Every output folder a folder (or creatable) and writable; nothing is created."""

    check_output_dir(cfg.results_dir, "--results-dir")
    check_output_dir(cfg.checkpoint_root(), "--checkpoint-dir")
    from swan_jax.data.download import default_cache_dir

    cache = default_cache_dir(cfg.cache_dir)  # where the loaders will write it
    check_output_dir(cache, "--cache-dir")


class ResumeSettingsDiffer(HintedError, SweepRefused):
    """`resume` with settings that decide the numbers and differ from the results file's
    run: it would train other programs and replace the file's cells. Its hints name each
    differing setting (saved -> now), `resume`, `overwrite` and `results_dir`."""


def check_resume(cfg: SweepConfig, results: ResultsFile) -> None:
    """Refuse `resume` over a results file written with other settings (`epochs` and
    the settings of where and how to run may differ: `config.changed_settings`)."""
    if not cfg.resume or not results.saved_config:
        return
    changed = changed_settings(cfg, results.saved_config)
    if not changed:
        return
    hints = [Hint(name, None, f"{{switch}} {shown_value(old)} -> {shown_value(new)}")
             for name, old, new in changed]
    raise ResumeSettingsDiffer(
        f"{results.path} holds the results of other settings ({', '.join([HINT] * len(hints))}"
        f"): {HINT} would train new programs and replace its cells; run without it and "
        f"with {HINT} to start again with these settings, or give another {HINT} to keep "
        f"both", *hints, Hint("resume", True), Hint("overwrite", True),
        Hint("results_dir", None))


def check_solver_plan(exp: Experiment, cfg: SweepConfig, programs: Sequence[Program]
                      ) -> None:
    """An implicit solver refused before any data is loaded where an experiment knows
    its batches' size (`Experiment.ode_batch`), naming the batch size that fits."""
    if cfg.solver not in IMPLICIT_SOLVERS:
        return
    for program in programs:
        shape = exp.ode_batch(cfg, program.cell, program.static)
        if shape is not None:
            graphs, largest, width = shape
            check_implicit_plan(cfg.solver, batch_size=graphs, largest_graph=largest,
                                width=width, what=program.name)


def preflight(exp: Experiment, cfg: SweepConfig, results: ResultsFile) -> list[Cell]:
    """What a sweep refuses before it loads any data (a run and `--dry-run` alike): a
    resume with other settings, checkpoints without --resume / --overwrite, an implicit
    solver too large for its batches. Returns the cells."""
    check_resume(cfg, results)
    cells = exp.cells(cfg)
    programs = exp.plan(cfg, cells)
    check_folders(cfg, programs, results)
    check_solver_plan(exp, cfg, programs)
    return cells


def check_folders(cfg: SweepConfig, programs: Sequence[Program], results: ResultsFile
                  ) -> None:
    """A program folder with checkpoints needs --resume (continue) or --overwrite."""
    if cfg.resume or cfg.overwrite:
        return
    for program in programs:
        if not results.done(done_key(cfg, program)) and any(
                p.name.isdigit() for p in program.folder.glob("*")):
            raise SweepRefused(
                f"{program.folder} already holds checkpoints of {program.name}: pass "
                f"--resume to continue it, or --overwrite to start it again")


def available_cells(exp: Experiment, cfg: SweepConfig, cells: Sequence[Cell]
                    ) -> tuple[list[Cell], list[str]]:
    """The cells whose data is there, and one line per missing data set naming its cells,
    what is missing and how to get it. Refused (`DataUnavailable`) unless `skip_missing`,
    and with it too when no cell is left to run."""
    missing: dict[Any, str | None] = {}
    for cell in cells:
        key = exp.data_key(cfg, cell)
        if key not in missing:
            missing[key] = exp.missing_data(cfg, cell)
    gone: dict[str, list[str]] = {}
    for cell in cells:
        reason = missing[exp.data_key(cfg, cell)]
        if reason:
            gone.setdefault(reason, []).append(" / ".join(map(str, cell.values())))
    lines = [_not_run_line(names, reason) for reason, names in gone.items()]
    left = [c for c in cells if not missing[exp.data_key(cfg, c)]]
    get = how_to_get(lines)
    if lines and not cfg.skip_missing:
        raise DataUnavailable(
            "missing data, nothing was trained:\n  " + "\n  ".join(lines) + get
            + "\nget the files above, or pass --skip-missing (make: leave out STRICT=1) to "
              "run only the cells whose data is present", lines)
    if lines and not left:
        raise DataUnavailable("no cell has its data, nothing was trained:\n  "
                              + "\n  ".join(lines) + get + "\nget the files above", lines)
    return left, lines


def _not_run_line(names: Sequence[str], reason: str) -> str:
    """One short line per missing data set (a `MissingReport`'s `short`), carrying the
    report's `details` (how to get each file) for `how_to_get`."""
    from swan_jax.data.errors import MissingReport

    line = MissingReport(f"{', '.join(names)}: {NOT_RUN} ({getattr(reason, 'short', reason)})")
    line.short, line.details = str(line), tuple(getattr(reason, "details", ()))
    return line


def how_to_get(lines: Sequence[str]) -> str:
    """The details of `available_cells`' lines, once: how to get each missing file."""
    details = list(dict.fromkeys(d for line in lines for d in getattr(line, "details", ())))
    return "\nhow to get them:\n  " + "\n  ".join(details) if details else ""


def print_plan(exp: Experiment, cfg: SweepConfig, programs: Sequence[Program],
               todo: Sequence[Program]) -> None:
    runs = sorted({len(p.grid) * len(cfg.seeds) for p in todo})
    print(f"{exp.label} plan: {len(programs)} program(s), {len(programs) - len(todo)} already "
          f"done, {len(todo)} to train; runs per program (grid points x {len(cfg.seeds)} "
          f"seed(s)): {', '.join(map(str, runs)) or '-'}; up to {cfg.epochs} epoch(s) each",
          flush=True)
    for program in todo[:12]:
        print(f"  {program.name}: {len(program.grid)} grid point(s) x {len(cfg.seeds)} "
              f"seed(s)", flush=True)
    if len(todo) > 12:
        print(f"  ... and {len(todo) - 12} more", flush=True)


# ========================================================================= training


def train_config(exp: Experiment, cfg: SweepConfig, program: Program, on_epoch_end
                 ) -> TrainConfig:
    """The configuration's training settings (`cfg.train`, nested, not copied) with what
    the sweep decides per program: the task, the folder, the budget, divergence."""
    task = exp.task_for(cfg, program.cell)
    return dataclasses.replace(
        cfg.train, loss=task.loss, metric=task.metric, task_level=task.level,
        checkpoint_dir=str(program.folder), max_params=exp.max_params,
        on_divergence="stop_run", track_test=exp.track_test, description=program.name,
        on_epoch_end=on_epoch_end)


def parameter_count(model_fn: ModelFn, splits: Mapping[str, Split],
                    point: Mapping[str, float]) -> int:
    """Parameters of the model on one training graph (shapes only, nothing computed)."""
    from swan_jax.data.batching import budget_for, iterate_batches

    data: Any = splits["train"]
    data = getattr(data, "data", data)  # a NodeSplit's graphs
    graph = next(iterate_batches(data, 1, budget_for(data, 1))).graph
    hp = concrete_hparams(point)
    with parameters_only():
        return tree_size(jax.eval_shape(lambda: model_fn(hp).init(jax.random.PRNGKey(0),
                                                                   graph)))


def check_budget(exp: Experiment, cfg: SweepConfig, program: Program, model_fn: ModelFn,
                 splits) -> None:
    if exp.max_params is None or cfg.allow_more_params:
        return
    params = parameter_count(model_fn, splits, program.grid[0])
    if params > exp.max_params:
        raise SweepRefused(f"{program.label} {program.static}: {params:,} parameters exceed "
                           f"{exp.label}'s budget of {exp.max_params:,}; {exp.budget_hint}")


def data_sizes(splits: Mapping[str, Split]) -> dict[str, dict[str, int]]:
    """Per split: graphs and nodes it trains or scores on (a node split: its nodes)."""
    sizes = {}
    for name, split in splits.items():
        if isinstance(split, NodeSplit):
            sizes[name] = {"graphs": len(split.data), "nodes": int(np.sum(split.node_mask))}
        else:
            sizes[name] = {"graphs": len(split), "nodes": int(np.sum(split.n_node))}
    return sizes


def epoch_milliseconds(timings: Sequence[Mapping[str, float]]) -> dict[str, float | None]:
    """Median milliseconds per epoch of the training steps and of the evaluation (every
    evaluated split), apart; the first epoch, which compiles, is left out when there are
    others. None without timings."""
    timed = [t for t in timings if "train_seconds" in t and "eval_seconds" in t]
    steady = timed[1:] or timed
    return {f"{part}_ms_per_epoch": (1e3 * float(np.median([t[f"{part}_seconds"]
                                                            for t in steady]))
                                     if steady else None) for part in ("train", "eval")}


def program_record(exp: Experiment, cfg: SweepConfig, program: Program,
                   result: TrainResult, splits: Mapping[str, Split] | None = None
                   ) -> dict[str, Any]:
    seconds = [h["seconds"] for h in result.history]
    extra = (exp.run_scores(cfg, program, result, splits) if splits is not None else None)
    extra = extra or [{}] * len(result.runs)
    return {
        "data_sizes": data_sizes(splits) if splits is not None else None,
        "program": program.ident, "epochs": cfg.epochs, "name": program.name, **program.cell,
        "static": program.static,
        "runs": [{**r, **more, "hparams": {**program.static, **r["hparams"]}}
                 for r, more in zip(result.runs, extra, strict=True)],
        "metric": exp.task_for(cfg, program.cell).metric, "num_params": result.num_params,
        "epochs_completed": result.epochs_completed,
        "first_epoch_seconds": seconds[0] if seconds else None,
        "seconds_per_epoch": float(np.median(seconds[1:] or seconds)) if seconds else None,
        "train_seconds": float(sum(seconds)), "wall_time": result.wall_time,
        **epoch_milliseconds(result.timings),
        "checkpoint_dir": str(program.folder), "machine": machine_info()}


class _Overall:
    """One progress bar across every program (epochs), with an ETA; and a first estimate."""

    def __init__(self, cfg: SweepConfig, todo: Sequence[Program]):
        self.total, self.started, self.done = cfg.epochs * len(todo), time.perf_counter(), 0
        self.programs, self.measured = len(todo), 0
        self.bar = None
        self.quiet = cfg.quiet
        # A bar only on a terminal (or a notebook): a batch job's log gets each
        # program's plain epoch lines, which name the program, not redraws.
        if cfg.progress and not cfg.quiet and len(todo) > 1 and interactive():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, desc="all programs", unit="epoch", position=0,
                            dynamic_ncols=True)

    def epoch(self, epoch: int, record: Mapping[str, Any]) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
        if epoch != 1 or self.quiet:  # each program's first epoch compiles; its second
            return                    # shows its pace: estimated again for each program
        self.measured += 1
        rest = self.total - self.done
        later = self.programs - self.measured
        if rest * record["seconds"] > 60:
            print(f"estimate: {record['seconds']:.2g} s per epoch -> at most "
                  f"{duration(rest * record['seconds'])} for the remaining {rest} epoch(s) "
                  f"at this program's pace (less with early stopping"
                  + (f"; {later} program(s) not started yet, each estimated again at its "
                     f"own pace: another model or width can be slower)" if later else ")"),
                  flush=True)

    def program_done(self, epochs_run_now: int, epochs: int) -> None:
        rest = max(epochs - epochs_run_now, 0)  # early stopping, or resumed epochs
        self.done += rest
        if self.bar is not None:
            self.bar.update(rest)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class _DataCache:
    """The splits of the last data key (cells are ordered so equal keys are adjacent)."""

    def __init__(self, exp: Experiment, cfg: SweepConfig):
        self.exp, self.cfg, self.key = exp, cfg, None
        self.splits: Mapping[str, Split] | None = None

    def get(self, cell: Cell):
        key = self.exp.data_key(self.cfg, cell)
        if key != self.key:
            self.key, self.splits = key, None  # free the previous data first
            self.splits = self.exp.load_data(self.cfg, cell)
        return self.splits


def train_program(exp: Experiment, cfg: SweepConfig, program: Program,
                  splits: Mapping[str, Split] | None = None, *, on_epoch_end=None
                  ) -> TrainResult:
    """Train one program (fresh, resumed or, with `overwrite`, started again)."""
    splits = exp.load_data(cfg, program.cell) if splits is None else splits
    model_fn = exp.model_fn(cfg, program.cell, program.static)
    check_budget(exp, cfg, program, model_fn, splits)
    if cfg.overwrite and not cfg.resume and program.folder.exists() and hosts.writes_files():
        shutil.rmtree(program.folder)
    hosts.wait_for_all(f"start {program.ident}")
    describe = {"experiment": {"module": type(exp).__module__,
                               "class": type(exp).__qualname__, "name": exp.name},
                "config": to_dict(cfg), "cell": program.cell, "static": program.static,
                "program": program.ident}
    return train(model_fn, splits, train_config(exp, cfg, program, on_epoch_end),
                 program.grid, fingerprint_extra={"program": program.ident},
                 describe=describe)


def run_program(exp: Experiment, cfg: SweepConfig, program: Program, data: _DataCache,
                overall: _Overall) -> dict[str, Any]:
    """Train one program of a sweep and return its record."""
    epochs_now = []

    def on_epoch_end(epoch, record):
        epochs_now.append(epoch)
        overall.epoch(epoch, record)

    splits = data.get(program.cell)
    result = train_program(exp, cfg, program, splits, on_epoch_end=on_epoch_end)
    overall.program_done(len(epochs_now), cfg.epochs)
    if hosts.writes_files():  # its learning curves in its folder (a failure: a warning)
        report.draw_curves([program.folder], program.folder / report.CURVES_FILE,
                           title=program.name)
    return program_record(exp, cfg, program, result, splits)


# ========================================================================= summaries


def summarise_cells(exp: Experiment, cfg: SweepConfig, records: Sequence[Mapping[str, Any]]
                    ) -> list[dict[str, Any]]:
    """Per cell (pooled axes merged): the best grid point by mean validation metric, with
    mean / std over its seeds (and pooled cells) of validation and test metrics."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for rec in records:
        cell = {k: rec[k] for k in exp.cell_axes if k not in exp.pooled_axes}
        groups.setdefault(json.dumps(cell), []).append(rec)
    out = []
    for key, recs in groups.items():
        cell = json.loads(key)
        runs = [_pooled_run(run, rec, exp.pooled_axes) for rec in recs for run in rec["runs"]]
        summary = summarise_runs(runs, metric_mode(recs[0]["metric"]))
        best = summary["best"]
        chosen = [r for r in runs if r["hparams"] == best["hparams"]]
        programs = [rec for rec in recs if rec["static"] == {
            k: best["hparams"][k] for k in rec["static"]}]
        program = programs[0]
        out.append({
            **cell, "metric": recs[0]["metric"], "best_hparams": best["hparams"],
            **{k: best[k] for k in ("val_mean", "val_std", "test_mean", "test_std")},
            "seeds": sorted({r["seed"] for r in chosen}),
            "per_seed": [{k: r[k] for k in ("seed", "val_at_best", "test", "best_epoch",
                                            "epochs_run", "diverged", *exp.pooled_axes,
                                            *exp.run_score_names) if k in r}
                         for r in chosen],
            **_run_score_summary(exp.run_score_names, chosen),
            "epochs_run": [r["epochs_run"] for r in chosen],
            "diverged": [r["diverged"] for r in chosen],
            "epochs_completed": max(rec["epochs_completed"] for rec in recs),
            "params": program["num_params"], "seconds_per_epoch": program["seconds_per_epoch"],
            **{key: _median_or_none([rec.get(key) for rec in programs])
               for key in ("train_ms_per_epoch", "eval_ms_per_epoch")},
            "wall_time": float(sum(rec["wall_time"] for rec in recs)),
            "grid_points": len(summary["points"]), "programs": len(recs),
            "paper": _list_or_none(exp.paper(cell))})
    return out


def _pooled_run(run: Mapping[str, Any], rec: Mapping[str, Any], pooled: Sequence[str]
                ) -> dict[str, Any]:
    """A run with its pooled axes (e.g. the split) beside its hyper-parameters: from its
    program's cell, or from its own grid point where they were vmapped (a cell of several
    splits), so that the best point pools them instead of choosing among them."""
    hparams = run["hparams"]
    return {**run, "hparams": {k: v for k, v in hparams.items() if k not in pooled},
            **{a: hparams.get(a, rec.get(a)) for a in pooled}}


def _run_score_summary(names: Sequence[str], runs: Sequence[Mapping[str, Any]]
                       ) -> dict[str, float | None]:
    """`<name>_mean` and `<name>_std` (population) over the runs that have the score
    (None where none has: a run trained before the score existed)."""
    out: dict[str, float | None] = {}
    for name in names:
        values = [float(r[name]) for r in runs if r.get(name) is not None]
        finite = [v for v in values if np.isfinite(v)]
        out[f"{name}_mean"] = float(np.mean(finite)) if finite else None
        out[f"{name}_std"] = float(np.std(finite)) if finite else None
    return out


def _list_or_none(value):
    """The paper's (mean, std) as a list; a std the paper does not give stays None."""
    return None if value is None else [None if v is None else float(v) for v in value]


def _median_or_none(values):
    """The median of the values that are there (pooled cells: one per program)."""
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


# ============================================================================ the run


@dataclasses.dataclass
class SweepResult:
    """The cell summaries of a sweep, and the cells it did not run (`--skip-missing`)."""

    cells: list[dict[str, Any]]
    not_run: list[str]


def run_sweep(exp: Experiment, cfg: SweepConfig) -> SweepResult:
    """Run every program of `cfg` not yet in the results; write results, table, figure.

    Raises `SweepRefused` (one line) for what it refuses before training,
    `FileExistsError` for an existing results file, `FolderInUse` when another run holds
    the results or checkpoint folder.
    """
    hosts.join(cfg.distributed)
    check_outputs(cfg)
    with hosts.only_on_first(lock_outputs(cfg)):  # released on any exit, SIGKILL included
        return _sweep_locked(exp, cfg)


def _sweep_locked(exp: Experiment, cfg: SweepConfig) -> SweepResult:
    results = ResultsFile(Path(cfg.results_dir) / "results.json", overwrite=cfg.overwrite,
                          resume=cfg.resume)
    cells = preflight(exp, cfg, results)
    cells, skipped = available_cells(exp, cfg, cells)
    for line in skipped:  # said before the work (short), and again at the end
        print(line, flush=True)
    if skipped and how_to_get(skipped):  # the long part once
        print(how_to_get(skipped).lstrip("\n"), flush=True)
    data = _DataCache(exp, cfg)
    programs = exp.packed_plan(cfg, cells, data.get)
    if cfg.program_memory_gib is not None:  # the cut's own folders (the first check: uncut)
        check_folders(cfg, programs, results)
    todo = [p for p in programs if not results.done(done_key(cfg, p))]
    for program in programs:
        if program not in todo:
            print(f"{program.name}: already in {results.path}, skipped (--resume)")
    hosts.check_runs(cfg.shard_runs, todo, len(cfg.seeds))
    print_plan(exp, cfg, programs, todo)
    overall = _Overall(cfg, todo)
    summary = None
    try:
        for program in todo:  # the outputs after each program: a stopped sweep keeps them
            results.add(run_program(exp, cfg, program, data, overall))
            summary = write_outputs(exp, cfg, results, programs, skipped)
    finally:
        overall.close()
    if summary is None:  # nothing left to train: the outputs of what is done
        summary = write_outputs(exp, cfg, results, programs, skipped)
    return SweepResult(summary, list(skipped))


def write_outputs(exp: Experiment, cfg: SweepConfig, results: ResultsFile,
                  programs: Sequence[Program], skipped: Sequence[str]) -> list[dict[str, Any]]:
    """results.json (records, this plan's cell summaries and how many of its programs are
    done: a stopped sweep's cells summarise only those), table.md, figure, config.toml."""
    keys = [done_key(cfg, p) for p in programs]
    mine = [r for r in results.records
            if any(all(r.get(k) == v for k, v in key.items()) for key in keys)]
    cells = summarise_cells(exp, cfg, mine)
    if not hosts.writes_files():  # process 0 writes them
        return cells
    folder = Path(cfg.results_dir)
    save_json_atomic(results.path, {"experiment": exp.name, "machine": machine_info(),
                                    "config": to_dict(cfg), "notes": exp.notes(cfg),
                                    "cells": cells,
                                    "programs": {"planned": len(keys), "done": sum(
                                        results.done(key) for key in keys)},
                                    "records": results.records, "not_run": list(skipped),
                                    **exp.extra_results(cfg)},
                     overwrite=True)
    write_text_atomic(folder / "table.md", exp.table(cfg, cells, skipped))
    write_text_atomic(folder / "config.toml", dump_toml(cfg, exp.name))
    if cells:  # a figure that fails is a warning: the results above are written
        report.draw_figure(exp, cells, folder / f"{exp.name}.png")
        report.draw_curves([p.folder for p in programs], folder / report.CURVES_FILE,
                           title=f"{exp.label}, {folder}")
    return cells
