"""The two jitted programs of a training call: one optimiser step and one prediction, both
over every run at once (`jax.vmap` over the leading `[runs]` axis; the batch is shared),
in the device's layout of the runs (`_run_blocks.by_device`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from swan_jax.data.batching import Batch
from swan_jax.losses import get_batch_loss
from swan_jax.train._config import ModelFn, TrainConfig
from swan_jax.train._optim import make_tx
from swan_jax.train._placement import Placement, batch_targets
from swan_jax.train._run_blocks import MIN_SKIP_EPOCHS, Stoppable
from swan_jax.train._splits import SPLIT_AXIS


def make_train_step(model_fn: ModelFn, cfg: TrainConfig, place: Placement | None = None, *,
                    split_mask: bool = False):
    """The jitted step of every run at once (the host pipeline runs it; benchmarks time it).

    See `step_function` for the signature; `params` and `opt_state` are donated.
    """
    return jax.jit(step_function(model_fn, cfg, place, split_mask=split_mask),
                   donate_argnums=(0, 1))


def step_function(model_fn: ModelFn, cfg: TrainConfig, place: Placement | None = None, *,
                  split_mask: bool = False):
    """The (unjitted) step of every run at once, for `make_train_step` and for the device
    pipeline's scanned epoch.

    `(params, opt_state, hp, batch, active) -> (params, opt_state, loss)`, all but `batch`
    with a leading `[runs]` axis. A stopped run
    (`active` False) or a non-finite loss or gradient leaves that run's state unchanged;
    the loss comes back NaN for a non-finite step and for a stopped run (whose step a CPU
    skips in a long program: `_run_blocks.Stoppable`). `hp["learning_rate"]` may change from
    call to call (schedules): it is an argument, not a constant.
    """
    place = Placement(cfg.data_parallel) if place is None else place
    loss_fn = get_batch_loss(cfg.loss)

    def step_one(p, o, h, batch: Batch, active):
        def objective(q):
            pred = place.model_apply(model_fn)(q, h, batch.graph)
            target, mask = batch_targets(batch, cfg.task_level, sharded=place.sharded,
                                         split_mask=split_mask, select=h.get(SPLIT_AXIS))
            return loss_fn(pred, target, mask, batch.graph.n_node.reshape(-1))

        loss, grads = jax.value_and_grad(objective)(p)
        finite = jnp.isfinite(loss) & all_finite(grads)
        updates, new_o = make_tx(cfg, h).update(grads, o, p)
        new_p = optax.apply_updates(p, updates)
        keep = active & finite  # stopped runs and non-finite steps leave the state as it was
        new_p = jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), new_p, p)
        new_o = jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), new_o, o)
        return new_p, new_o, jnp.where(keep, loss, jnp.nan)

    def idle(p, o, h, batch: Batch, active):
        return p, o, jnp.full(active.shape, jnp.nan)

    # Runs stop early (patience) or on divergence (stop_run); else every run trains to the
    # end, and a skip would only add a branch to compile (as in a short program).
    stops = ((cfg.patience is not None or cfg.on_divergence == "stop_run")
             and cfg.epochs >= MIN_SKIP_EPOCHS)
    return place.over_runs(jax.vmap(step_one, in_axes=(0, 0, 0, None, 0)),
                           (True, True, True, False, True),
                           stoppable=Stoppable(4, idle) if stops else None)


def all_finite(tree) -> jax.Array:
    """Whether every value of `tree` is finite.

    On a GPU one reduction over all leaves joined (one per leaf was 23 reductions per
    SWAN-learn step, each its own kernel: docs/benchmarks-log.md, "Operations per training
    step", counted by `python -m benchmarks.step_ops`).
    On a CPU one per leaf, as before: joined, XLA fuses the gradients' producers otherwise,
    and the trained numbers moved in their last bits (measured on Peptides-func).
    """
    leaves = jax.tree_util.tree_leaves(tree)
    if not leaves:
        return jnp.asarray(True)
    return jax.lax.platform_dependent(leaves, cpu=_per_leaf_finite, default=_joined_finite)


def _per_leaf_finite(leaves):
    return jnp.all(jnp.asarray([jnp.all(jnp.isfinite(g)) for g in leaves]))


def _joined_finite(leaves):
    return jnp.all(jnp.isfinite(jnp.concatenate([jnp.ravel(g) for g in leaves])))


def make_predict(model_fn: ModelFn, place: Placement):
    """Jitted `(params [runs], hp [runs], batch) -> predictions [runs, rows, T]`."""
    return jax.jit(predict_function(model_fn, place))


def predict_function(model_fn: ModelFn, place: Placement):
    """The (unjitted) prediction of every run: `(params, hp, batch) -> [runs, rows, T]`."""
    def predict_one(p, h, batch: Batch):
        return place.model_apply(model_fn)(p, h, batch.graph)

    return place.over_runs(jax.vmap(predict_one, in_axes=(0, 0, None)), (True, True, False))
