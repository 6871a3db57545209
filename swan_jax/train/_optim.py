"""Per-run hyper-parameters and the optimiser built from them (traced, so vmapped).

The optimiser is named (`adam`, `adamw`), or the caller's own (`TrainConfig.optimizer`):
a function of the run's `hp`, or one fixed `optax.GradientTransformation`.

The learning rate of epoch `e` is `hp["learning_rate"] * schedule(e) * plateau scale`:
the schedule is evaluated on the host once per epoch (LRGB and GraphGPS step their
schedulers per epoch), the plateau scale is an `optax.contrib.reduce_on_plateau` state per
run, driven by the validation metric. Both reach the step as a traced `[runs]` learning
rate, so a grid of learning rates still trains as one program.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from swan_jax.settings import SettingError, check, field_settings, grid_axes, traced_value
from swan_jax.train._config import Hyper, TrainConfig, fixed_optimizer_needs

Array = jax.Array


# What `train` itself reads of a grid point (every other key is the model's).
TRAIN_READS = ("learning_rate", "weight_decay", "grad_clip")


def declared_axes() -> dict[str, tuple]:
    """The grid axes the library declares (the command line's too): name -> (type hint,
    `Setting`), `TrainConfig`'s and the model configurations' (`settings.grid_source`:
    `epsilon`, ...; a traced choice, `adjacency`, is checked by `settings.traced_value`)."""
    own = {name: (hint, spec) for name, (_, hint, spec) in field_settings(TrainConfig).items()
           if spec.grid}
    return {name: (hint, spec) for name, (hint, spec) in {**grid_axes(), **own}.items()
            if spec.codes is None}


def check_grid(grid: Any) -> None:
    """A non-empty sequence of grid points (mappings), each value of a declared axis
    (`epsilon`, `learning_rate`, ...) in that axis's range, checked as the command line
    checks it: `SettingError` naming the point, the key and the value."""
    if isinstance(grid, Mapping) or not isinstance(grid, Sequence) or isinstance(grid, str):
        raise SettingError("grid", f"must be a list of grid points (dicts of hyper-parameters),"
                                   f" got {type(grid).__name__}", grid)
    if not grid:
        raise SettingError("grid", "is empty: give at least one grid point, e.g. [{}] (the "
                                   "default) or [{'learning_rate': 1e-3}]", grid)
    axes = declared_axes()
    for i, point in enumerate(grid):
        if not isinstance(point, Mapping):
            raise SettingError("grid", f"point {i} must be a dict of hyper-parameters, got "
                                       f"{point!r}", point)
        for key, value in point.items():
            if key in axes and isinstance(value, numbers.Number | str):
                hint, spec = axes[key]
                try:
                    check(key, value, hint, spec)
                except SettingError as err:
                    err.where = f"grid point {i}"
                    raise


def stack_hparams(grid: Sequence[Hyper], seeds: Sequence[int], cfg: TrainConfig):
    """Runs `[(grid point, seed), ...]` and their numeric hyper-parameters `{name: [runs]}`
    (learning rate and weight decay default to `cfg`'s, `grad_clip` too when set; a
    named choice such as `adjacency` by its code, `settings.traced_value`). The grid is
    checked first (`check_grid`)."""
    check_grid(grid)
    keys = sorted({k for point in grid for k in point})
    for i, point in enumerate(grid):
        missing = [k for k in keys if k not in point]
        if missing:
            raise ValueError(f"grid point {i} lacks {missing}: every point needs the same keys")
    if isinstance(cfg.optimizer, optax.GradientTransformation):
        fixed_optimizer_needs(cfg, dict.fromkeys(keys))
    runs = [(dict(point), seed) for point in grid for seed in seeds]
    hp = {k: np.asarray([traced_value(k, p[k]) for p, _ in runs], np.float32) for k in keys}
    hp.setdefault("learning_rate", np.full(len(runs), cfg.learning_rate, np.float32))
    hp.setdefault("weight_decay", np.full(len(runs), cfg.weight_decay, np.float32))
    if cfg.grad_clip is not None:
        hp.setdefault("grad_clip", np.full(len(runs), cfg.grad_clip, np.float32))
    return runs, {k: jnp.asarray(v) for k, v in hp.items()}


def make_tx(cfg: TrainConfig, hp: Hyper) -> optax.GradientTransformation:
    """The optimiser of one run (its `hp` may be traced): the named one, the caller's
    `cfg.optimizer(hp)`, or the caller's fixed transformation; clipped first when
    `hp` has `grad_clip`."""
    if isinstance(cfg.optimizer, optax.GradientTransformation):
        tx = cfg.optimizer
    elif callable(cfg.optimizer):
        tx = cfg.optimizer(hp)
        if not isinstance(tx, optax.GradientTransformation):
            raise TypeError(f"optimizer(hp) must return an optax.GradientTransformation, "
                            f"got {type(tx).__name__}")
    elif cfg.optimizer == "adamw":
        tx = optax.adamw(hp["learning_rate"], weight_decay=hp["weight_decay"])
    else:  # Adam with L2 weight decay added to the gradient (PyTorch's Adam(weight_decay=...))
        tx = optax.chain(optax.add_decayed_weights(hp["weight_decay"]),
                         optax.adam(hp["learning_rate"]))
    if "grad_clip" in hp:
        tx = optax.chain(optax.clip_by_global_norm(hp["grad_clip"]), tx)
    return tx


def schedule_scale(cfg: TrainConfig, epoch: int) -> float:
    """The schedule's learning-rate multiplier for `epoch` (plateau scaling aside)."""
    if cfg.schedule != "cosine":
        return 1.0
    warm = cfg.warmup_epochs
    fn = optax.warmup_cosine_decay_schedule(init_value=1.0 / (warm + 1), peak_value=1.0,
                                            warmup_steps=warm, decay_steps=cfg.epochs)
    return float(fn(epoch))


def plateau(cfg: TrainConfig) -> optax.GradientTransformationExtraArgs:
    """Reduce-on-plateau on the validation metric (an absolute threshold, so the sign
    flip that turns a maximised metric into a minimised value keeps its meaning)."""
    return _reduce_on_plateau(_plateau_settings(cfg))


def _plateau_settings(cfg: TrainConfig) -> tuple:
    """`(factor, patience, threshold, min_scale)`: hashable, a static argument."""
    return (cfg.plateau_factor, cfg.plateau_patience, cfg.plateau_threshold,
            cfg.min_lr_scale)


def _reduce_on_plateau(settings: tuple) -> optax.GradientTransformationExtraArgs:
    factor, patience, threshold, min_scale = settings
    return optax.contrib.reduce_on_plateau(factor=factor, patience=patience, rtol=0.0,
                                           atol=threshold, min_scale=min_scale)


def init_plateau(cfg: TrainConfig, num_runs: int):
    """One plateau state per run (leading `[runs]` axis), or None without the schedule."""
    if cfg.schedule != "plateau":
        return None
    one = plateau(cfg).init(jnp.zeros((), jnp.float32))
    return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (num_runs,) + x.shape), one)


def step_plateau(cfg: TrainConfig, state, metric: np.ndarray, active: np.ndarray, mode: str):
    """Feed each active run's validation metric to its plateau state."""
    value = jnp.asarray(metric if mode == "min" else -np.asarray(metric), jnp.float32)
    return _plateau_update(state, value, jnp.asarray(active), _plateau_settings(cfg))


# One compiled program per schedule setting: op by op, each epoch's update ran about 50
# small operations (each compiled on its first epoch, then dispatched one by one).
@functools.partial(jax.jit, static_argnums=3)
def _plateau_update(state, value: Array, keep: Array, settings: tuple):
    tx = _reduce_on_plateau(settings)

    def one(s, v):
        return tx.update(jnp.zeros(()), s, value=v)[1]

    new = jax.vmap(one)(state, jnp.where(jnp.isfinite(value), value, jnp.inf))
    return jax.tree_util.tree_map(
        lambda a, b: jnp.where(keep.reshape((-1,) + (1,) * (a.ndim - 1)), a, b), new, state)


def epoch_learning_rates(cfg: TrainConfig, hp: Mapping[str, Array], plateau_state,
                         epoch: int) -> Array | None:
    """Per-run learning rates of `epoch`, or None when they are the constant `hp` ones."""
    scale = schedule_scale(cfg, epoch)
    if plateau_state is None and scale == 1.0:
        return None
    rates = hp["learning_rate"] * jnp.float32(scale)
    if plateau_state is not None:
        rates = rates * plateau_state.scale
    return rates
