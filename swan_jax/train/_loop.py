"""`train`: every (grid point, seed) run of one model family as one vmapped program.

The call is a short sequence of named parts: `_Program` fixes what does not change
(splits, batch budget, compiled step and prediction); `_initial_state` checks the
parameter and memory budgets on shapes alone, then initialises the `RunState`;
`_resume` restores the newest checkpoint; `_epoch` trains, checks divergence, evaluates
and updates early stopping (or `_block` runs several short epochs in one device call,
`_fused`); `_after_epochs` records, checkpoints and reports; `_result` reports the best
parameters' scores (their epoch's record; evaluated only where it scored no such split).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from swan_jax.data.batching import budget_for, eval_batch_size, iterate_batches
from swan_jax.models.formation import plain_phis
from swan_jax.pytrees import tree_bytes, tree_size
from swan_jax.runs.interrupts import held
from swan_jax.settings import SettingError
from swan_jax.solvers import SolverError, clear_errors
from swan_jax.train import _memory
from swan_jax.train._config import (
    Hyper,
    ModelFn,
    TrainConfig,
    TrainingDiverged,
    TrainingInterrupted,
    TrainResult,
)
from swan_jax.train._epoch import divergence_message, loss_divergence
from swan_jax.train._evaluate import DEVICE_METRICS, finish_sums, metric_key, metric_mode
from swan_jax.train._folder import ProgramFolder, accepted_fingerprints
from swan_jax.train._fused import EpochBlocks, can_fuse
from swan_jax.train._metric import Metric, check_output
from swan_jax.train._optim import (
    TRAIN_READS,
    epoch_learning_rates,
    init_plateau,
    stack_hparams,
    step_plateau,
)
from swan_jax.train._pipeline import Setup, choose_pipeline
from swan_jax.train._placement import Placement, batch_targets
from swan_jax.train._progress import Progress
from swan_jax.train._run_mesh import RunMesh, to_host
from swan_jax.train._shapes import check_widths, not_taken
from swan_jax.train._splits import SPLIT_AXIS, Split, num_splits, prepare_splits
from swan_jax.train._state import (
    HOST_FIELDS,
    RunState,
    advance_bookkeeping,
    epochs_run,
    fresh_state,
    init_program,
    mark_diverged,
    record_epoch,
)
from swan_jax.train._step import predict_function, step_function
from swan_jax.train._trackers import Trackers


@dataclasses.dataclass
class _Log:
    """The per-epoch history (deterministic values) and timings, across sessions."""

    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    timings: list[dict[str, float]] = dataclasses.field(default_factory=list)
    past_wall: float = 0.0  # seconds of earlier sessions of a resumed run
    saved_epochs: int = 0
    # epochs trained since the last checkpoint, whose history lines wait for the next save
    # (history.jsonl never runs ahead of the newest checkpoint)
    pending: list[tuple[dict[str, Any], dict[str, float]]] = dataclasses.field(
        default_factory=list)
    last_save: float = dataclasses.field(default_factory=time.perf_counter)


class _Program:
    """What stays fixed during a training call."""

    def __init__(self, model_fn: ModelFn, splits: Mapping[str, Split], cfg: TrainConfig,
                 grid: Sequence[Hyper]):
        self.model_fn, self.cfg = model_fn, cfg
        self.data, self.split_mask = prepare_splits(splits, cfg.task_level)
        self.runs, self.hp = stack_hparams(grid, cfg.seeds, cfg)
        _check_split_axis(num_splits(splits), self.hp, cfg.metric)
        self.mode = metric_mode(cfg.metric)
        mesh = RunMesh(len(self.runs), what=cfg.description) if cfg.shard_runs else None
        self.place = Placement(cfg.data_parallel, runs=mesh)
        self.batch_size = _capped_batch_size(cfg, len(self.data["train"]))
        self.shard_size = math.ceil(self.batch_size / self.place.num_shards)
        self.budget = budget_for(list(self.data.values()), self.shard_size)
        self.example = jax.tree_util.tree_map(
            jnp.asarray, next(iterate_batches(self.data["train"], self.shard_size, self.budget)))
        self.setup = Setup(self.data, self.batch_size, self.budget, self.place,
                           step_function(model_fn, cfg, self.place, split_mask=self.split_mask),
                           predict_function(model_fn, self.place), metric=cfg.metric,
                           level=cfg.task_level, split_mask=self.split_mask,
                           data_seed=cfg.data_seed, **self._evaluation_batches())
        # `choose_pipeline`'s DevicePipeline or HostPipeline, after the memory check
        # (`_initial_state`); None before
        self.pipeline: Any = None
        # `plain_phis` of the model as the init's trace built it (`_initial_state`):
        # whether a checkpoint of an older formation resumes (`ProgramFolder.restore`)
        self.phis: tuple[bool, ...] = ()

    def _evaluation_batches(self) -> dict[str, Any]:
        """Evaluation's batch size (`eval_batch_size`: no split pads a whole training
        batch) and a budget every such batch fits (`fill_quantile=1`), with the training
        layout's slot width; the training ones when batches are sharded over devices."""
        evaluated = [d for k, d in self.data.items() if k != "train"]
        if self.place.sharded or not evaluated:
            return {}
        size = eval_batch_size([len(d) for d in evaluated], self.batch_size)
        budget = budget_for(evaluated, size, fill_quantile=1.0,
                            slot_width=self.budget.slot_width)
        return {"eval_batch_size": size, "eval_budget": budget}

    def evaluate(self, params, hp, split: str) -> tuple[list[float], np.ndarray]:
        return self.pipeline.evaluate(params, hp, split)

    def has_split(self, split: str) -> bool:
        return split in self.data

    def diverged(self, state: RunState, bad: Mapping[Any, int | None], what: str, epoch: int,
                 folder: ProgramFolder) -> RunState:
        """Raise `TrainingDiverged`, or (`stop_run`) stop the runs in `bad` {run: step}."""
        if not bad:
            return state
        if self.cfg.on_divergence == "raise":
            run, step = next(iter(bad.items()))
            raise TrainingDiverged(divergence_message(
                what, epoch, step, run, self.runs,
                self.cfg.checkpoint_dir if folder.saves else None))
        return mark_diverged(state, np.isin(np.arange(state.num_runs), list(bad)))


def _check_split_axis(count: int, hp, metric) -> None:
    """Several splits' node masks go with a `"split"` hyper-parameter naming each run's
    (`_splits`), host-scored metrics only; one split's go without it."""
    if count == 1 and SPLIT_AXIS not in hp:
        return
    if SPLIT_AXIS not in hp:
        raise ValueError(f"the NodeSplits hold {count} splits: give the grid a {SPLIT_AXIS!r} "
                         f"axis (0 .. {count - 1}) naming each run's split")
    chosen = np.asarray(hp[SPLIT_AXIS])
    if count == 1 or chosen.min() < 0 or chosen.max() >= count or np.any(chosen % 1):
        raise ValueError(f"grid axis {SPLIT_AXIS!r} must name mask columns 0 .. {count - 1} "
                         f"of the NodeSplits (`node_mask [rows, splits]`), got "
                         f"{sorted(set(chosen.tolist()))}")
    key = metric_key(metric)
    if key in DEVICE_METRICS or (isinstance(key, Metric) and key.on_device):
        raise ValueError(f"metric {getattr(key, 'name', key)!r} is reduced on the device, "
                         f"one mask for every run: several splits in one program are scored "
                         f"on the host (a host metric, or one split per program)")


def train_epoch(pipeline, state: RunState, hp, epoch: int, on_steps
                ) -> tuple[RunState, np.ndarray]:
    """Every step of `epoch` for every active run: the new state and losses `[steps, runs]`
    (NaN where a step's loss or gradient was not finite; that run kept its state)."""
    return pipeline.train_epoch(state, hp, epoch, on_steps)


def _capped_batch_size(cfg: TrainConfig, train_graphs: int) -> int:
    if cfg.batch_size <= train_graphs:
        return cfg.batch_size
    print(f"{cfg.description}: batch size {cfg.batch_size} exceeds the {train_graphs} "
          f"training graph(s); using {train_graphs}", flush=True)
    return train_graphs


def _initial_state(prog: _Program) -> tuple[RunState, int]:
    """Budgets checked on shapes (nothing compiled yet), then every run initialised."""
    cfg, seeds = prog.cfg, [s for _, s in prog.runs]
    read: set[str] = set()  # the grid keys the model reads while it is initialised
    outputs: list = []  # the model's output shape, from the same trace
    phis: list = []  # ... and its SWAN blocks' `plain_phi` (booleans, no tracer kept)
    init, init_args = init_program(lambda hp: _noted(phis, prog.model_fn(_Reads(hp, read))),
                                   cfg, prog.example.graph, seeds, prog.hp, outputs=outputs)
    with not_taken(prog.example.graph):  # an encoder of another feature width: one line
        shapes = jax.eval_shape(init, *init_args)  # traced once: the call below reuses it
    target, _ = batch_targets(prog.example, cfg.task_level, split_mask=prog.split_mask)
    check_widths(cfg.loss, cfg.task_level, outputs[0], tuple(np.shape(target)))
    _check_grid_keys_read(prog, shapes[0], read)
    prog.phis = phis[0]
    num_params = tree_size(shapes[0]) // len(seeds)
    if cfg.max_params is not None and num_params > cfg.max_params and not cfg.allow_more_params:
        raise ValueError(f"the model has {num_params:,} parameters, over the budget of "
                         f"{cfg.max_params:,}; shrink it or pass allow_more_params")
    _check_metric(prog, shapes[0])
    if cfg.check_memory:
        _memory.check_step_memory(_step_estimate(prog, shapes), _memory.free_memory_bytes(),
                                  prog.batch_size, prog.budget)
    params, opt_state = init(*init_args)
    prog.hp = prog.place.state(prog.hp)
    prog.pipeline = choose_pipeline(cfg.pipeline, prog.setup, _memory.free_memory_bytes())
    return fresh_state(params, opt_state, init_plateau(cfg, len(prog.runs)), prog.mode), num_params


def _step_estimate(prog: _Program, shapes) -> int:
    """The training step's estimated bytes (`_memory.step_bytes`) from the runs' shapes."""
    step_batch = next(prog.place.batches(prog.data["train"], prog.batch_size, prog.budget))
    mesh = prog.place.runs  # with shard_runs, a device holds its share of the runs
    params, opt_state, hp = (tree if mesh is None else mesh.share(tree)
                             for tree in (*shapes, prog.hp))
    return _memory.step_bytes(prog.model_fn, prog.cfg, prog.place, params, opt_state, hp,
                              step_batch, split_mask=prog.split_mask)


def step_memory(model_fn: ModelFn, splits: Mapping[str, Split], cfg: TrainConfig,
                grid: Sequence[Hyper]) -> tuple[int, int]:
    """Estimated bytes of one training step of `train(model_fn, splits, cfg, grid)`, as
    `(total, shared)`: the memory check's own figure (`_memory.step_bytes`), from shapes
    alone (nothing is initialised or compiled), and its part every run shares (the
    batch). The rest grows with the runs (grid points x seeds): a one-run estimate sizes a
    program (`swan_jax.experiments.packing`; what the runs share beside the batch, e.g.
    operators of the graph alone, is counted per run: the figure errs high)."""
    prog = _Program(model_fn, splits, cfg, grid)
    seeds = [s for _, s in prog.runs]
    init, init_args = init_program(prog.model_fn, cfg, prog.example.graph, seeds, prog.hp)
    step_batch = next(prog.place.batches(prog.data["train"], prog.batch_size, prog.budget))
    return _step_estimate(prog, jax.eval_shape(init, *init_args)), tree_bytes(step_batch)


def open_program(model_fn: ModelFn, splits: Mapping[str, Split], cfg: TrainConfig,
                 grid: Sequence[Hyper] = ({},)) -> tuple[_Program, RunState]:
    """What `train(model_fn, splits, cfg, grid)` sets up before its first epoch, without
    the epochs: the program (its `pipeline`, whose `train_epoch(state, hp, epoch,
    on_steps)` and `evaluate(params, hp, split)` are an epoch's parts; `data`, `hp`,
    `batch_size`, `budget`) and every run's initial state. For timing the parts alone
    (`benchmarks/epoch_anatomy.py`); nothing is saved."""
    prog = _Program(model_fn, splits, cfg, grid)
    state, _ = _initial_state(prog)
    return prog, state


class _Reads(Mapping):
    """A grid point's hyper-parameters that note which keys are read."""

    def __init__(self, hp: Mapping[str, Any], read: set[str]):
        self._hp, self._read = hp, read

    def __getitem__(self, key: str) -> Any:
        self._read.add(key)
        return self._hp[key]

    def __iter__(self):
        return iter(self._hp)

    def __len__(self) -> int:
        return len(self._hp)


def _noted(phis: list, module: Any) -> Any:
    phis.append(plain_phis(module))
    return module


def _flatten_reads(reads: _Reads):
    """A model that maps over its hp as a pytree reads every key (a plain dict back)."""
    reads._read.update(reads._hp)
    keys = sorted(reads._hp)
    return [reads._hp[k] for k in keys], keys


def _unflatten_reads(keys: list[str], values: list[Any]) -> Any:
    return dict(zip(keys, values, strict=True))  # a plain dict, not a `_Reads`


jax.tree_util.register_pytree_node(_Reads, _flatten_reads, _unflatten_reads)


def _check_grid_keys_read(prog: _Program, params, read: set[str]) -> None:
    """Refuse a grid key nothing reads (recorded in every run's `hparams`, it would
    change nothing): neither `train` (`TRAIN_READS`) nor the model, in its construction,
    its initialisation or (checked only when a key is left: a trace, no compile) a
    forward pass, nor a caller's `optimizer(hp)`."""
    keys = {k for point, _ in prog.runs for k in point}
    # The split axis is train's too: it picks each run's mask column (splits together).
    left = keys - read - set(TRAIN_READS) - {SPLIT_AXIS}
    if not left:
        return
    one = functools.partial(jax.tree_util.tree_map,
                            lambda s: jax.ShapeDtypeStruct(s.shape[1:], s.dtype))

    def forward(p, h):
        h = _Reads(h, read)
        if callable(prog.cfg.optimizer) and not isinstance(prog.cfg.optimizer,
                                                           optax.GradientTransformation):
            prog.cfg.optimizer(h)
        return prog.model_fn(h).apply(p, prog.example.graph)

    jax.eval_shape(forward, one(params), one(prog.hp))
    left -= read
    if left:
        names = ", ".join(map(repr, sorted(left)))
        raise SettingError("grid", f"key(s) {names} are read by nothing: model_fn(hp) never "
                                   f"reads them and train reads only "
                                   f"{', '.join(TRAIN_READS)}; drop them from the grid, or "
                                   f"read them in model_fn", sorted(left))


def _check_metric(prog: _Program, params) -> None:
    """A caller's `Metric` tried on the first training batch's shapes (one run's
    predictions, by `jax.eval_shape`) before anything compiles."""
    metric = prog.setup.metric
    if not isinstance(metric, Metric):
        return

    def one(tree):
        return jax.tree_util.tree_map(lambda s: jax.ShapeDtypeStruct(s.shape[1:], s.dtype),
                                      tree)

    pred = jax.eval_shape(lambda p, h: prog.model_fn(h).apply(p, prog.example.graph),
                          one(params), one(prog.hp))
    target, mask = batch_targets(prog.example, prog.cfg.task_level, split_mask=prog.split_mask)
    check_output(metric, pred, np.asarray(target), np.asarray(mask))


def _resume(folder: ProgramFolder, state: RunState, log: _Log, pipeline,
            phis: tuple[bool, ...]) -> tuple[RunState, int]:
    """The newest checkpoint's state and its epoch count (0 and `state` without one). The
    splits' metric denominators come back too, so that a fused run's first block needs no
    evaluation to learn them (`EpochBlocks._best_numerators`): one compilation fewer, and
    the very denominators the uninterrupted run used."""
    restored = folder.restore(state, phis)
    if restored is None:
        return state, 0
    state, meta = restored
    if hasattr(pipeline, "denominators"):
        pipeline.denominators.update(meta.get("denominators", {}))
    log.history, log.past_wall = meta["history"], meta.get("wall_time", 0.0)
    log.timings = meta.get("timings", [{} for _ in log.history])
    log.saved_epochs = meta["epoch"]
    print(f"{folder.cfg.description}: resuming after epoch {meta['epoch']} of "
          f"{folder.cfg.epochs} from {folder.path}", flush=True)
    return state, meta["epoch"]


def _epoch_record(epoch: int, losses: np.ndarray, scores: dict[str, list[float]], lr,
                  seconds: float) -> dict[str, Any]:
    """An epoch's history record, from its losses `[steps, runs]` (each run's mean in one
    NumPy call: per run, 32 runs cost half a millisecond an epoch, a fused GPU epoch's
    twentieth), its scores per split and learning rates `[runs]`."""
    return {"epoch": epoch, "train_loss": np.mean(losses, axis=0).tolist(),
            "val": scores["val"], **({"test": scores["test"]} if "test" in scores else {}),
            "lr": to_host(lr).astype(np.float64).tolist(), "seconds": seconds}


def _evaluated_splits(prog: _Program) -> tuple[str, ...]:
    """The splits an epoch scores: validation, and test when tracked."""
    return tuple(s for s in ("val", "test") if prog.has_split(s)
                 and (s == "val" or prog.cfg.track_test))


def _epoch(prog: _Program, state: RunState, epoch: int, folder: ProgramFolder,
           progress: Progress):
    """Train one epoch, stop diverged runs, evaluate, update early stopping and plateau."""
    cfg, started = prog.cfg, time.perf_counter()
    rates = epoch_learning_rates(cfg, prog.hp, state.plateau, epoch)
    hp = prog.hp if rates is None else {**prog.hp, "learning_rate": rates}
    bar = progress.step_bar(epoch, prog.pipeline.steps(epoch))
    try:
        state, losses = train_epoch(prog.pipeline, state, hp, epoch, bar)
    finally:
        bar.close()
    state = prog.diverged(state, loss_divergence(losses, state),
                          "training loss or gradient", epoch, folder)
    trained = time.perf_counter()
    scores = {}
    for split in _evaluated_splits(prog):
        scores[split], finite = prog.evaluate(state.params, hp, split)
        bad = {r: None for r in np.flatnonzero(~finite & ~state.stopped)}
        state = prog.diverged(state, bad, f"predictions on the {split} split", epoch, folder)
    active = ~state.stopped
    state = record_epoch(state, scores["val"], epoch, prog.mode, cfg.patience)
    if state.plateau is not None:
        state = dataclasses.replace(state, plateau=step_plateau(
            cfg, state.plateau, np.asarray(scores["val"]), active, prog.mode))
    record = _epoch_record(epoch, losses, scores, hp["learning_rate"],
                           time.perf_counter() - started)
    timing = {"train_seconds": trained - started,
              "eval_seconds": time.perf_counter() - trained, "steps": len(losses)}
    return state, record, timing


def _after_epochs(prog: _Program, state: RunState, done: Sequence[tuple[dict, dict, RunState]],
                  log: _Log, folder: ProgramFolder, progress: Progress, trackers: Trackers,
                  started: float) -> None:
    """Record the epochs just completed (one, or a fused block's: `(record, timing, the
    bookkeeping after it)`), call the user's hook and the trackers, checkpoint when due,
    report them. Every record is in the log before a hook runs, so that a hook's Ctrl-C
    saves `state` (the last of them) with its whole history."""
    for record, timing, _ in done:
        log.history.append(record)
        log.timings.append(timing)
        log.pending.append((record, timing))
    for record, _, _ in done:
        if prog.cfg.on_epoch_end is not None:
            prog.cfg.on_epoch_end(record["epoch"], record)
        trackers.epoch_done(record)
    progress.epochs_done([(record, after) for record, _, after in done])
    epoch, timing = len(log.history), {
        "train_seconds": sum(t["train_seconds"] for _, t, _ in done),
        "eval_seconds": sum(t["eval_seconds"] for _, t, _ in done)}
    if _save_due(prog.cfg, log, epoch, state, timing):
        _save(prog, state, log, folder, started)
    if _past_deadline(prog.cfg, epoch, state, timing):
        raise TrainingInterrupted(log.saved_epochs,
                                  prog.cfg.checkpoint_dir if folder.saves else None)


def _block(prog: _Program, blocks: EpochBlocks, state: RunState, epoch: int, n: int
           ) -> tuple[RunState, list[tuple[dict, dict, RunState]], bool]:
    """Up to `n` epochs in one device call (`_fused`): the state after them, each epoch's
    `(record, timing, bookkeeping)`, and whether the block halted before a diverging
    epoch. No epoch (and the state unchanged) when the host's replay of early stopping
    disagrees with the device or a solver fails: the loop then runs epochs one by one."""
    cfg = prog.cfg
    try:
        block = blocks.run(state, prog.hp, epoch, n)
    except SolverError:  # rerun one epoch per call: the error then names its epoch
        blocks.disabled = True
        return state, [], False
    host, done = state, []
    for i in range(block.epochs):
        scores = {k: finish_sums(num[i], den[i], finite[i], blocks.metric)[0]
                  for k, (num, den, finite) in block.scores.items()}
        host, improved = advance_bookkeeping(host, scores["val"], epoch + i, prog.mode,
                                             cfg.patience)
        if not np.array_equal(improved, block.improved[i]):
            print(f"{cfg.description}: early stopping on the device disagreed with the host "
                  f"at epoch {epoch + i}; training one epoch per call from here", flush=True)
            blocks.disabled = True
            return state, [], False
        losses = block.losses[i][block.ok[i]]
        record = _epoch_record(epoch + i, losses, scores, block.rates[i],
                               block.seconds / block.epochs)
        timing = {"train_seconds": block.seconds / block.epochs, "eval_seconds": 0.0,
                  "steps": len(losses), "epochs_per_call": block.epochs}
        done.append((record, timing, host))
    fields = {k: getattr(host, k) for k in HOST_FIELDS}
    return dataclasses.replace(block.state, **fields), done, block.halted


def _save_due(cfg: TrainConfig, log: _Log, epoch: int, state: RunState, timing) -> bool:
    """Every epoch with `checkpoint_seconds=0`; else when that long has passed since the
    last save, at the last epoch, when every run has stopped, or before the deadline."""
    return (cfg.checkpoint_seconds == 0 or epoch >= cfg.epochs or bool(state.stopped.all())
            or time.perf_counter() - log.last_save >= cfg.checkpoint_seconds
            or _past_deadline(cfg, epoch, state, timing))


def _past_deadline(cfg: TrainConfig, epoch: int, state: RunState, timing) -> bool:
    """Another epoch would end past `cfg.deadline` (and there is another to run)."""
    if cfg.deadline is None or epoch >= cfg.epochs or state.stopped.all():
        return False
    last = timing["train_seconds"] + timing["eval_seconds"]
    return time.time() + 1.5 * last > cfg.deadline


def _save_completed(prog: _Program, state: RunState, log: _Log, folder: ProgramFolder,
                    started: float) -> None:
    """On the way out of an error or Ctrl-C: save the last completed epoch if it is not yet
    (`state` is that epoch's: nothing donates it)."""
    if folder.saves and log.saved_epochs < len(log.history):
        _save(prog, state, log, folder, started)


def _save(prog: _Program, state: RunState, log: _Log, folder: ProgramFolder,
          started: float) -> None:
    """Checkpoint the state after the newest epoch and append its pending history lines,
    a Ctrl-C or SIGTERM held until both are written (`interrupts.held`)."""
    with held():
        _save_now(prog, state, log, folder, started)


def _save_now(prog: _Program, state: RunState, log: _Log, folder: ProgramFolder,
              started: float) -> None:
    epoch = len(log.history)
    folder.save(epoch, state, {"epoch": epoch, "history": log.history, "timings": log.timings,
                               "wall_time": log.past_wall + time.perf_counter() - started,
                               "denominators": dict(getattr(prog.pipeline, "denominators",
                                                            {}))})
    if folder.saves:
        log.saved_epochs = epoch
    for record, timing in log.pending:
        folder.append_history(record, timing)
    log.pending.clear()
    log.last_save = time.perf_counter()


def _scores_at_best(state: RunState, history: Sequence[Mapping[str, Any]], split: str
                    ) -> list[float] | None:
    """Per run, `split`'s score as its best epoch recorded it, or None unless every run
    has a best epoch whose record scored `split`. The record scored the very parameters
    `best_params` keeps (`record_epoch` copies them after that evaluation), so a final
    evaluation would repeat it: one more compilation where epochs ran fused (1.8 s on the
    2-core CPU for transfer line k = 10's 64 runs) and a pass over the split."""
    by_epoch = {record["epoch"]: record for record in history}
    records = [by_epoch.get(int(e)) for e in state.best_epoch]
    found = [record for record in records if record is not None]
    if len(found) < len(records) or any(split not in record for record in found):
        return None
    return [float(record[split][r]) for r, record in enumerate(found)]


def _result(prog: _Program, state: RunState, log: _Log, num_params: int,
            started: float) -> TrainResult:
    """Per run: best validation metric and epoch, validation and test at the best params
    (from the best epoch's record where it has them, else evaluated now)."""
    n = state.num_runs

    def at_best(split: str) -> list[float]:
        recorded = _scores_at_best(state, log.history, split)
        return recorded if recorded is not None else prog.evaluate(
            state.best_params, prog.hp, split)[0]

    test = at_best("test") if prog.has_split("test") else [math.nan] * n
    val_best = at_best("val")
    ran = epochs_run(state, len(log.history))
    records = [{"seed": seed, "hparams": point, "best_val": float(state.best_metric[r]),
                "val_at_best": val_best[r], "best_epoch": int(state.best_epoch[r]),
                "test": test[r], "diverged": bool(state.diverged[r]), "epochs_run": ran[r]}
               for r, (point, seed) in enumerate(prog.runs)]
    return TrainResult(runs=records, history=log.history, num_params=num_params,
                       wall_time=log.past_wall + time.perf_counter() - started,
                       epochs_completed=len(log.history), best_params=state.best_params,
                       timings=log.timings)


def train(
    model_fn: ModelFn,
    splits: Mapping[str, Split],
    cfg: TrainConfig,
    grid: Sequence[Hyper] = ({},),
    *,
    fingerprint_extra: Mapping[str, Any] | None = None,
    describe: Mapping[str, Any] | None = None,
) -> TrainResult:
    """Train every (grid point, seed) run of one model family as one vmapped program.

    Args:
      model_fn: hyper-parameters (numeric values of one grid point, possibly traced)
        -> Flax module mapping a padded `GraphsTuple` to predictions `[rows, T]`
        (node rows or graph rows, per `cfg.task_level`).
      splits: "train", "val" and optionally "test": `GraphDataset`s, or `NodeSplit`s
        (the nodes of each split on shared graphs).
      cfg: the `TrainConfig`.
      grid: numeric hyper-parameters per grid point (a traceable choice by name, e.g.
        `adjacency`, reaches `model_fn` as its code: `settings.traced_value`); all points
        share array shapes. `learning_rate`, `weight_decay` and `grad_clip` here
        override `cfg`'s.
      fingerprint_extra: anything else that identifies the run (checked on resume).
      describe: JSON-able description written to the folder's `run.json` (how to
        rebuild the model: a sweep stores its experiment, configuration and cell).

    Returns:
      `TrainResult` with, per run, the best validation metric, its epoch, the test
      metric at the best parameters, and the number of epochs run.

    Raises:
      TrainingDiverged: a run's loss, gradient or predictions became non-finite
        (`on_divergence="raise"`). TrainingInterrupted: Ctrl-C; says which epochs are
        checkpointed. StepTooLarge: the step's estimated memory exceeds free memory.
        SolverError: an adaptive solver ran out of steps or failed (its message first,
        then the program, the epoch and the checkpoint kept).
    """
    started = time.perf_counter()
    trackers = Trackers(cfg.trackers, cfg.checkpoint_dir)  # refused before any compute
    prog = _Program(model_fn, splits, cfg, grid)
    folder = ProgramFolder(cfg, accepted_fingerprints(cfg, prog.runs, fingerprint_extra))
    folder.check_fresh()
    state, num_params = _initial_state(prog)
    log = _Log()
    state, start_epoch = _resume(folder, state, log, prog.pipeline, prog.phis)
    folder.describe(prog.runs, num_params, describe)
    folder.write_history(log.history, log.timings)
    state = dataclasses.replace(state, **prog.place.state(state.device_part()))
    trackers.start(log.history, start_epoch)
    progress = Progress(cfg, start_epoch)
    blocks = (EpochBlocks(prog.pipeline, cfg, _evaluated_splits(prog))
              if can_fuse(cfg, prog.pipeline) else None)
    try:
        with clear_errors():  # the solver's own sentence first, not equinox's stack note
            epoch, alone = start_epoch, False
            while epoch < cfg.epochs and not state.stopped.all():
                # `state` stays the last completed epoch's until `_epoch` or `_block`
                # returns (nothing donates it), so Ctrl-C can still save it
                n = 0 if blocks is None or alone else blocks.length(epoch)
                done: list = []
                alone = False
                if n and blocks is not None:  # (n = 0 without blocks)
                    new, done, halted = _block(prog, blocks, state, epoch, n)
                    alone = halted and bool(done)  # the diverging epoch is the next one
                if not done:
                    new, record, timing = _epoch(prog, state, epoch, folder, progress)
                    done = [(record, timing, new)]
                state = new
                _after_epochs(prog, state, done, log, folder, progress, trackers, started)
                epoch += len(done)
    except TrainingInterrupted:
        raise
    except KeyboardInterrupt:
        _save_completed(prog, state, log, folder, started)
        raise TrainingInterrupted(log.saved_epochs,
                                  cfg.checkpoint_dir if folder.saves else None) from None
    except SolverError as err:
        _save_completed(prog, state, log, folder, started)
        kept = (f"epochs up to {log.saved_epochs} are checkpointed in {cfg.checkpoint_dir}"
                if folder.saves and log.saved_epochs else "no epoch was checkpointed")
        raise err.with_note(f"{cfg.description}: in epoch {len(log.history) + 1} of "
                            f"{cfg.epochs}; {kept}") from None
    except TrainingDiverged:
        _save_completed(prog, state, log, folder, started)
        raise
    finally:
        progress.close()
        trackers.close()
        folder.close()
    try:  # every epoch is saved: an interrupt now waits for the scores, then ends the run
        with held():
            return _result(prog, state, log, num_params, started)
    except KeyboardInterrupt:
        raise TrainingInterrupted(log.saved_epochs,
                                  cfg.checkpoint_dir if folder.saves else None) from None
