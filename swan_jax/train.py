"""The one training loop every experiment uses.

Runs = (grid point, seed) pairs. All runs of one call train as ONE jitted, vmapped
program: parameters, optimiser states and numeric hyper-parameters (learning rate,
weight decay, and the model's `beta`, `gamma`, `epsilon`, ...) carry a leading run
axis; the batches are shared. Early stopping is per run: a run that has run out of
patience keeps its best parameters frozen while the others go on, which gives the same
numbers as stopping it alone. Every epoch is checkpointed with orbax; `resume=True`
continues bit-identically (CPU, fixed seeds) from the newest checkpoint.

`data_parallel=True` splits every step's graphs over all devices (`jax.sharding`: a
one-axis mesh "batch", one padded sub-batch per device, parameters replicated); the
loss is the masked mean over every device's rows, so the step is the single-device
step on the same graphs. It also works across hosts after `jax.distributed.initialize()`
(every process builds the same step and hands over only its own devices' sub-batches).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
import numpy as np
import optax

from swan_jax.data.batching import (
    Batch,
    Budget,
    budget_for,
    iterate_batches,
    iterate_sharded_batches,
)
from swan_jax.data.dataset import GraphDataset
from swan_jax.field import tree_size as count_params
from swan_jax.losses import get_loss

Array = jax.Array
Hyper = Mapping[str, Any]
ModelFn = Callable[[Hyper], nn.Module]

OPTIMIZERS = ("adam", "adamw")
TASK_LEVELS = ("node", "graph")


class TrainingDiverged(RuntimeError):
    """A run's loss or gradient became non-finite."""


def _mse(pred, target):
    return float(np.mean((pred - target) ** 2))


def _metric_fns() -> dict[str, tuple[Callable[[np.ndarray, np.ndarray], float], str]]:
    def official(name):
        def fn(pred, target):
            from swan_jax import metrics  # sklearn-backed, imported on first use

            if name == "mae":
                return float(metrics.mean_absolute_error(target, pred))
            if name == "ap":
                return float(metrics.average_precision(target, pred))
            return float(metrics.macro_f1(target.reshape(-1), pred))

        return fn

    return {
        "mse": (_mse, "min"),
        "log10_mse": (lambda p, t: math.log10(max(_mse(p, t), 1e-30)), "min"),
        "mae": (official("mae"), "min"),
        "ap": (official("ap"), "max"),
        "f1": (official("f1"), "max"),
    }


METRICS = ("mse", "log10_mse", "mae", "ap", "f1")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """How to train (one per experiment run; the model comes from a `ModelFn`).

    `learning_rate` / `weight_decay` are defaults that a grid point may override.
    `patience=None` disables early stopping. `on_divergence="stop_run"` stops only the
    diverging run of a grid instead of raising. `data_parallel` spreads each step's
    graphs over every device (see the module docstring). `on_epoch_end(epoch, record)`
    is called after each epoch with its history record (for progress hooks, profilers).
    """

    epochs: int = 100
    patience: int | None = None
    batch_size: int = 32
    optimizer: str = "adam"
    learning_rate: float = 1e-3
    weight_decay: float = 0.0
    loss: str = "mse"
    metric: str = "mse"
    task_level: str = "node"
    seeds: tuple[int, ...] = (0,)
    data_seed: int = 0
    checkpoint_dir: str | None = None
    resume: bool = False
    max_params: int | None = 500_000
    allow_more_params: bool = False
    on_divergence: str = "raise"
    data_parallel: bool = False
    progress: bool = True
    description: str = "train"
    on_epoch_end: Callable[[int, dict[str, Any]], None] | None = dataclasses.field(
        default=None, compare=False)

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {self.epochs}")
        if not self.seeds:
            raise ValueError("seeds must name at least one seed (got an empty list)")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct, got {list(self.seeds)}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"patience must be >= 1 or None, got {self.patience}")
        for name, value, valid in (("optimizer", self.optimizer, OPTIMIZERS),
                                   ("metric", self.metric, METRICS),
                                   ("task level", self.task_level, TASK_LEVELS),
                                   ("on_divergence", self.on_divergence, ("raise", "stop_run"))):
            if value not in valid:
                raise ValueError(f"unknown {name} {value!r}; valid: {', '.join(valid)}")
        get_loss(self.loss)


@dataclasses.dataclass
class TrainResult:
    """What `train` returns: one record per run plus the per-epoch history."""

    runs: list[dict[str, Any]]
    history: list[dict[str, Any]]
    num_params: int
    wall_time: float
    epochs_completed: int
    best_params: Any = None  # stacked over runs


def stack_hparams(grid: Sequence[Hyper], seeds: Sequence[int], cfg: TrainConfig):
    """Runs `[(grid point, seed), ...]` and their numeric hyper-parameters `{name: [runs]}`
    (learning rate and weight decay default to `cfg`'s)."""
    keys = sorted({k for point in grid for k in point})
    for i, point in enumerate(grid):
        missing = [k for k in keys if k not in point]
        if missing:
            raise ValueError(f"grid point {i} lacks {missing}: every point needs the same keys")
    runs = [(dict(point), seed) for point in grid for seed in seeds]
    hp = {k: np.asarray([float(p[k]) for p, _ in runs], np.float32) for k in keys}
    hp.setdefault("learning_rate", np.full(len(runs), cfg.learning_rate, np.float32))
    hp.setdefault("weight_decay", np.full(len(runs), cfg.weight_decay, np.float32))
    return runs, {k: jnp.asarray(v) for k, v in hp.items()}


def _make_tx(cfg: TrainConfig, hp: Hyper) -> optax.GradientTransformation:
    if cfg.optimizer == "adamw":
        return optax.adamw(hp["learning_rate"], weight_decay=hp["weight_decay"])
    # Adam with L2 weight decay added to the gradient (PyTorch's Adam(weight_decay=...)).
    return optax.chain(optax.add_decayed_weights(hp["weight_decay"]),
                       optax.adam(hp["learning_rate"]))


def _flatten_shards(x):
    """`[D, R, ...] -> [D * R, ...]`: the rows of every device's sub-batch, in order."""
    return x.reshape((-1,) + x.shape[2:])


def _targets(batch: Batch, level: str, sharded: bool = False):
    target, mask = ((batch.node_targets, batch.node_mask) if level == "node"
                    else (batch.graph_targets, batch.graph_mask))
    if sharded:
        return _flatten_shards(target), _flatten_shards(mask)
    return target, mask


class _Placement:
    """Where arrays live: the default device, or a `batch` mesh over every device."""

    def __init__(self, data_parallel: bool):
        self.sharded = data_parallel
        self.num_shards = jax.device_count() if data_parallel else 1
        if data_parallel:
            mesh = jax.sharding.Mesh(np.asarray(jax.devices()), ("batch",))
            self.replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
            self.split = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))

    def batches(self, data: GraphDataset, batch_size: int, budget: Budget, rng=None):
        if not self.sharded:
            return iterate_batches(data, batch_size, budget, rng)
        return iterate_sharded_batches(data, batch_size, budget, self.num_shards, rng)

    def batch(self, batch: Batch) -> Batch:
        if not self.sharded:
            return jax.tree_util.tree_map(jnp.asarray, batch)
        # Each process materialises only its own devices' sub-batches (multi-host safe).
        return jax.tree_util.tree_map(
            lambda a: jax.make_array_from_callback(a.shape, self.split, lambda i: a[i]), batch)

    def state(self, tree):
        return tree if not self.sharded else jax.device_put(tree, self.replicated)

    def apply(self, module: nn.Module, params, graph: jraph.GraphsTuple):
        """Predictions `[rows, T]`; sharded: every sub-batch's rows, device by device."""
        if not self.sharded:
            return module.apply(params, graph)
        return _flatten_shards(jax.vmap(module.apply, in_axes=(None, 0))(params, graph))


def _to_device(batch: Batch) -> Batch:
    return jax.tree_util.tree_map(jnp.asarray, batch)


def _fingerprint(cfg: TrainConfig, runs, extra: Mapping[str, Any] | None) -> str:
    keep = {k: v for k, v in dataclasses.asdict(cfg).items()
            if k not in ("checkpoint_dir", "resume", "progress", "epochs", "description",
                         "on_epoch_end")}
    if cfg.data_parallel:  # the device count decides which graphs share a step
        keep["devices"] = jax.device_count()
    blob = json.dumps({"cfg": keep, "runs": runs, "extra": extra or {}}, sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def select_runs(mask: Array, new: Any, old: Any) -> Any:
    """Per run (leading axis), `new` where `mask` else `old`."""
    return jax.tree_util.tree_map(
        lambda a, b: jnp.where(mask.reshape((-1,) + (1,) * (a.ndim - 1)), a, b), new, old)


def init_runs(model_fn: ModelFn, cfg: TrainConfig, graph: jraph.GraphsTuple,
              seeds: Sequence[int], hp: Mapping[str, Array]):
    """Parameters and optimiser states of every run, stacked on a leading `[runs]` axis."""
    def init_one(key, h):
        params = model_fn(h).init(key, graph)
        return params, _make_tx(cfg, h).init(params)

    keys = jnp.stack([jax.random.PRNGKey(seed) for seed in seeds])
    return jax.jit(jax.vmap(init_one))(keys, hp)


def make_train_step(model_fn: ModelFn, cfg: TrainConfig, place: _Placement | None = None):
    """The jitted step of every run at once (what `train` runs; the benchmarks time it).

    `(params, opt_state, hp, batch, active) -> (params, opt_state, loss)`, all but `batch`
    with a leading `[runs]` axis; `params` and `opt_state` are donated. A stopped run
    (`active` False) or a non-finite loss or gradient leaves that run's state unchanged;
    the loss comes back NaN for a non-finite step.
    """
    place = _Placement(cfg.data_parallel) if place is None else place
    loss_fn = get_loss(cfg.loss)

    def step_one(p, o, h, batch: Batch, active):
        def objective(q):
            pred = place.apply(model_fn(h), q, batch.graph)
            target, mask = _targets(batch, cfg.task_level, place.sharded)
            return loss_fn(pred, target, mask)

        loss, grads = jax.value_and_grad(objective)(p)
        finite = jnp.isfinite(loss) & jnp.all(jnp.asarray(
            [jnp.all(jnp.isfinite(g)) for g in jax.tree_util.tree_leaves(grads)]))
        updates, new_o = _make_tx(cfg, h).update(grads, o, p)
        new_p = optax.apply_updates(p, updates)
        keep = active & finite  # stopped runs and non-finite steps leave the state as it was
        new_p = jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), new_p, p)
        new_o = jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), new_o, o)
        return new_p, new_o, jnp.where(finite, loss, jnp.nan)

    return jax.jit(jax.vmap(step_one, in_axes=(0, 0, 0, None, 0)), donate_argnums=(0, 1))


def train(
    model_fn: ModelFn,
    splits: Mapping[str, GraphDataset],
    cfg: TrainConfig,
    grid: Sequence[Hyper] = ({},),
    *,
    fingerprint_extra: Mapping[str, Any] | None = None,
) -> TrainResult:
    """Train every (grid point, seed) run of one model family as one vmapped program.

    Args:
      model_fn: hyper-parameters (numeric values of one grid point, possibly traced)
        -> Flax module mapping a padded `GraphsTuple` to predictions `[rows, T]`
        (node rows or graph rows, per `cfg.task_level`).
      splits: "train", "val" and optionally "test" `GraphDataset`s.
      cfg: the `TrainConfig`.
      grid: numeric hyper-parameters per grid point; all points share array shapes.
        `learning_rate` and `weight_decay` here override `cfg`'s.
      fingerprint_extra: anything else that identifies the run (checked on resume).

    Returns:
      `TrainResult` with, per run, the best validation metric, its epoch, the test
      metric at the best parameters, and the number of epochs run.
    """
    for split in ("train", "val"):
        if split not in splits:
            raise ValueError(f"splits lack {split!r} (got {sorted(splits)})")
    for name, data in splits.items():
        targets = data.node_targets if cfg.task_level == "node" else data.graph_targets
        if targets is None:
            raise ValueError(f"split {name!r} has no {cfg.task_level}-level targets")
    start_time = time.perf_counter()
    runs, hp = stack_hparams(grid, cfg.seeds, cfg)
    n_runs = len(runs)
    metric_fn, mode = _metric_fns()[cfg.metric]
    better = (lambda a, b: a < b) if mode == "min" else (lambda a, b: a > b)
    place = _Placement(cfg.data_parallel)
    shard_size = math.ceil(cfg.batch_size / place.num_shards)  # graphs per device
    budget: Budget = budget_for(list(splits.values()), shard_size)
    eval_batches = {
        name: [place.batch(b) for b in place.batches(data, cfg.batch_size, budget)]
        for name, data in splits.items() if name != "train"
    }
    example = _to_device(next(iterate_batches(splits["train"], shard_size, budget)))

    params, opt_state = init_runs(model_fn, cfg, example.graph, [s for _, s in runs], hp)
    hp = place.state(hp)
    num_params = count_params(jax.tree_util.tree_map(lambda x: x[0], params))
    if cfg.max_params is not None and num_params > cfg.max_params and not cfg.allow_more_params:
        raise ValueError(f"the model has {num_params:,} parameters, over the budget of "
                         f"{cfg.max_params:,}; shrink it or pass allow_more_params")

    train_step = make_train_step(model_fn, cfg, place)

    def predict_one(p, h, batch: Batch):
        return place.apply(model_fn(h), p, batch.graph)

    predict = jax.jit(jax.vmap(predict_one, in_axes=(0, 0, None)))
    keep_best = jax.jit(select_runs, donate_argnums=(2,))

    def evaluate(p, split: str) -> list[float]:
        preds, targets = [], []
        for batch in eval_batches[split]:
            target, mask = _targets(batch, cfg.task_level, place.sharded)
            real = np.asarray(mask)
            preds.append(np.asarray(predict(p, hp, batch))[:, real])
            targets.append(np.asarray(target)[real])
        pred, target = np.concatenate(preds, axis=1), np.concatenate(targets)
        return [metric_fn(pred[r], target) for r in range(n_runs)]

    fingerprint = _fingerprint(cfg, runs, fingerprint_extra)
    best_params = jax.tree_util.tree_map(jnp.copy, params)
    best_val = [math.inf if mode == "min" else -math.inf] * n_runs
    best_epoch, bad_epochs = [-1] * n_runs, [0] * n_runs
    stopped, diverged = [False] * n_runs, [False] * n_runs
    history: list[dict[str, Any]] = []
    start_epoch = 0
    manager = None
    if cfg.checkpoint_dir is not None:
        from swan_jax.checkpoint import CheckpointStore

        manager = CheckpointStore(cfg.checkpoint_dir)
        if cfg.resume and manager.latest_epoch() is not None:
            state, meta = manager.restore(
                {"params": params, "opt_state": opt_state, "best_params": best_params})
            if meta["fingerprint"] != fingerprint:
                raise ValueError(f"checkpoint in {cfg.checkpoint_dir} belongs to another "
                                 f"configuration (fingerprint {meta['fingerprint']} != "
                                 f"{fingerprint}); use a fresh directory or drop --resume")
            params, opt_state = state["params"], state["opt_state"]
            best_params = state["best_params"]
            best_val, best_epoch = meta["best_val"], meta["best_epoch"]
            bad_epochs, stopped = meta["bad_epochs"], meta["stopped"]
            diverged, history = meta["diverged"], meta["history"]
            start_epoch = meta["epoch"]
        elif not cfg.resume and manager.latest_epoch() is not None:
            raise ValueError(f"{cfg.checkpoint_dir} already holds checkpoints: pass resume "
                             f"(--resume) to continue, or choose another directory")

    params, opt_state, best_params = place.state((params, opt_state, best_params))
    bar, steps_per_epoch = None, None  # the step count is known after the first epoch
    if cfg.progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=cfg.epochs, initial=start_epoch, desc=cfg.description, unit="epoch",
                   dynamic_ncols=True)
    epoch = start_epoch
    for epoch in range(start_epoch, cfg.epochs):
        if all(stopped):
            break
        epoch_start = time.perf_counter()
        active = jnp.asarray([not s for s in stopped])
        rng = np.random.default_rng([cfg.data_seed, epoch])
        losses = []
        batches = place.batches(splits["train"], cfg.batch_size, budget, rng)
        if bar is not None:  # steps within the epoch: long epochs show they are moving
            batches = tqdm(batches, total=steps_per_epoch, desc=f"epoch {epoch + 1}",
                           unit="step", leave=False, dynamic_ncols=True)
        for batch in batches:
            params, opt_state, loss = train_step(params, opt_state, hp, place.batch(batch), active)
            losses.append(loss)
        steps_per_epoch = len(losses)
        losses = np.stack([np.asarray(x) for x in losses])  # [steps, runs]
        for r in range(n_runs):
            bad = ~np.isfinite(losses[:, r])
            if stopped[r] or not bad.any():
                continue
            point, seed = runs[r]
            message = (f"non-finite training loss or gradient at epoch {epoch}, step "
                       f"{int(np.flatnonzero(bad)[0])} for run {r} (seed {seed}, {point}); "
                       + (f"the last good checkpoint (epoch {epoch - 1}) is kept in "
                          f"{cfg.checkpoint_dir}" if manager else "no checkpoint directory")
                       + ". Lower the learning rate or epsilon, or raise gamma.")
            if cfg.on_divergence == "raise":
                if bar is not None:
                    bar.close()
                raise TrainingDiverged(message)
            stopped[r] = diverged[r] = True
        val = evaluate(params, "val")
        improved = [not stopped[r] and (best_epoch[r] < 0 or better(val[r], best_val[r]))
                    for r in range(n_runs)]
        best_params = keep_best(jnp.asarray(improved), params, best_params)
        for r in range(n_runs):
            if stopped[r]:
                continue
            if improved[r]:
                best_val[r], best_epoch[r], bad_epochs[r] = val[r], epoch, 0
            else:
                bad_epochs[r] += 1
                if cfg.patience is not None and bad_epochs[r] >= cfg.patience:
                    stopped[r] = True
        train_loss = [float(np.mean(losses[:, r])) for r in range(n_runs)]
        history.append({"epoch": epoch, "train_loss": train_loss, "val": val,
                        "seconds": time.perf_counter() - epoch_start})
        if cfg.on_epoch_end is not None:
            cfg.on_epoch_end(epoch, history[-1])
        if manager is not None:
            meta = {"epoch": epoch + 1, "fingerprint": fingerprint, "best_val": best_val,
                    "best_epoch": best_epoch, "bad_epochs": bad_epochs, "stopped": stopped,
                    "diverged": diverged, "history": history}
            manager.save(epoch + 1, {"params": params, "opt_state": opt_state,
                                     "best_params": best_params}, meta)
        if bar is not None:
            live = [r for r in range(n_runs) if not diverged[r]] or list(range(n_runs))
            bar.set_postfix(loss=f"{np.mean([train_loss[r] for r in live]):.4g}",
                            val=f"{np.mean([val[r] for r in live]):.4g}",
                            best=f"{np.mean([best_val[r] for r in live]):.4g}",
                            active=sum(not s for s in stopped))
            bar.update(1)
    if bar is not None:
        bar.close()
    if manager is not None:
        manager.close()
    test = evaluate(best_params, "test") if "test" in eval_batches else [math.nan] * n_runs
    val_best = evaluate(best_params, "val")
    records = []
    for r, (point, seed) in enumerate(runs):
        records.append({
            "seed": seed, "hparams": point, "best_val": best_val[r], "val_at_best": val_best[r],
            "best_epoch": best_epoch[r], "test": test[r], "diverged": diverged[r],
            "epochs_run": (best_epoch[r] + 1 + bad_epochs[r]) if stopped[r] and not diverged[r]
            else len(history),
        })
    return TrainResult(runs=records, history=history, num_params=num_params,
                       wall_time=time.perf_counter() - start_time,
                       epochs_completed=len(history), best_params=best_params)


def save_json_atomic(path: str | Path, payload: Any, overwrite: bool = False) -> None:
    """Write JSON via a temporary file and a rename; refuse to replace unless `overwrite`."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; pass --overwrite to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=_json_default))
    tmp.replace(path)


def _json_default(value: Any):
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    return str(value)
