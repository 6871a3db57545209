"""The state of every run of a program as ONE pytree, and the early-stopping update.

Arrays that train live on the device with a leading `[runs]` axis (`params`,
`opt_state`, `best_params`, and the reduce-on-plateau state when that schedule is on).
The per-run bookkeeping (best validation metric, its epoch, epochs without improvement,
stopped, diverged) stays on the host as NumPy arrays: it decides Python control flow and
is written to the checkpoint's JSON exactly (float64).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import flax.struct
import jax
import jax.numpy as jnp
import jraph
import numpy as np

from swan_jax.models import parameters_only
from swan_jax.train._config import ModelFn, TrainConfig
from swan_jax.train._optim import make_tx

Array = jax.Array

DEVICE_FIELDS = ("params", "opt_state", "best_params", "plateau")
HOST_FIELDS = ("best_metric", "best_epoch", "bad_epochs", "stopped", "diverged")


@flax.struct.dataclass
class RunState:
    """Every run's training state; leaves lead with `[runs]`."""

    if TYPE_CHECKING:  # flax.struct.dataclass adds it; type checkers do not see it
        def replace(self, **changes: Any) -> RunState: ...

    params: Any
    opt_state: Any
    best_params: Any
    plateau: Any  # optax ReduceLROnPlateauState per run, or None
    best_metric: np.ndarray  # float64: the best validation metric so far
    best_epoch: np.ndarray  # int: its epoch, -1 before the first
    bad_epochs: np.ndarray  # int: epochs since the last improvement
    stopped: np.ndarray  # bool: out of patience, or diverged
    diverged: np.ndarray  # bool

    @property
    def num_runs(self) -> int:
        return len(self.stopped)

    def device_part(self) -> dict[str, Any]:
        """What orbax saves (`best_params` keeps its name: analysis tools read it)."""
        out = {k: getattr(self, k) for k in DEVICE_FIELDS}
        return out if self.plateau is not None else {k: v for k, v in out.items()
                                                     if k != "plateau"}

    def host_part(self) -> dict[str, list]:
        """The bookkeeping as JSON lists (exact: Python floats are float64)."""
        return {k: getattr(self, k).tolist() for k in HOST_FIELDS}

    def with_parts(self, device: Mapping[str, Any], host: Mapping[str, list]) -> RunState:
        kinds = {"best_metric": np.float64, "best_epoch": np.int64, "bad_epochs": np.int64,
                 "stopped": bool, "diverged": bool}
        return dataclasses.replace(
            self, **dict(device), **{k: np.asarray(host[k], kinds[k]) for k in HOST_FIELDS})


def init_program(model_fn: ModelFn, cfg: TrainConfig, graph: jraph.GraphsTuple,
                 seeds: Sequence[int], hp: Mapping[str, Array], *,
                 outputs: list | None = None) -> tuple[Callable, tuple]:
    """The jitted initialisation of every run and its arguments: `fn(*args)` gives what
    `init_runs` gives. One function object, so that `jax.eval_shape(fn, *args)` before
    the call shares its trace with the call (Flax's `init` traces the whole forward
    pass, the ODE solve included). `outputs`: a list the trace appends one run's output
    shape to (the model's predictions on `graph`; the solve is skipped, its output has
    its input's shape), for the checks before compiling (`_shapes`)."""
    def init_one(key, h):
        with parameters_only():  # the init's output is unused: no ODE solve is traced
            out, params = model_fn(h).init_with_output(key, graph)
        if outputs is not None:  # static shapes, recorded while tracing
            outputs.append(tuple(out.shape) if hasattr(out, "shape") else type(out))
        return params, make_tx(cfg, h).init(params)

    keys = jnp.stack([jax.random.PRNGKey(seed) for seed in seeds])
    return jax.jit(jax.vmap(init_one)), (keys, hp)


def init_runs(model_fn: ModelFn, cfg: TrainConfig, graph: jraph.GraphsTuple,
              seeds: Sequence[int], hp: Mapping[str, Array]):
    """Parameters and optimiser states of every run, stacked on a leading `[runs]` axis."""
    fn, args = init_program(model_fn, cfg, graph, seeds, hp)
    return fn(*args)


def fresh_state(params, opt_state, plateau, mode: str) -> RunState:
    """The state before the first epoch: best = the initial parameters, nothing seen."""
    runs = jax.tree_util.tree_leaves(params)[0].shape[0]
    return RunState(
        params=params, opt_state=opt_state,
        best_params=jax.tree_util.tree_map(jnp.copy, params), plateau=plateau,
        best_metric=np.full(runs, math.inf if mode == "min" else -math.inf),
        best_epoch=np.full(runs, -1), bad_epochs=np.zeros(runs, np.int64),
        stopped=np.zeros(runs, bool), diverged=np.zeros(runs, bool))


def select_runs(mask: Array, new: Any, old: Any) -> Any:
    """Per run (leading axis), `new` where `mask` else `old`."""
    return jax.tree_util.tree_map(
        lambda a, b: jnp.where(mask.reshape((-1,) + (1,) * (a.ndim - 1)), a, b), new, old)


_keep_best = jax.jit(select_runs)  # not donated: a Ctrl-C may still save the old state


def improved_runs(state: RunState, metric: Sequence[float], mode: str) -> np.ndarray:
    """Runs still training whose validation metric beat their best (or is their first)."""
    values = np.asarray(metric, np.float64)
    better = values < state.best_metric if mode == "min" else values > state.best_metric
    return ~state.stopped & ((state.best_epoch < 0) | better)


def advance_bookkeeping(state: RunState, metric: Sequence[float], epoch: int, mode: str,
                        patience: int | None) -> tuple[RunState, np.ndarray]:
    """The host half of `record_epoch`: best metric and epoch, patience and stops
    (`best_params` untouched), and which runs improved `[runs]`."""
    improved = improved_runs(state, metric, mode)
    live = ~state.stopped
    bad = np.where(improved, 0, np.where(live, state.bad_epochs + 1, state.bad_epochs))
    out_of_patience = live & ~improved & (patience is not None) & (bad >= (patience or 0))
    return dataclasses.replace(
        state, best_metric=np.where(improved, np.asarray(metric, np.float64), state.best_metric),
        best_epoch=np.where(improved, epoch, state.best_epoch), bad_epochs=bad,
        stopped=state.stopped | out_of_patience), improved


def record_epoch(state: RunState, metric: Sequence[float], epoch: int, mode: str,
                 patience: int | None) -> RunState:
    """Keep improved runs' parameters as their best; count patience; stop the exhausted."""
    new, improved = advance_bookkeeping(state, metric, epoch, mode, patience)
    return dataclasses.replace(
        new, best_params=_keep_best(jnp.asarray(improved), state.params, state.best_params))


def mark_diverged(state: RunState, runs: np.ndarray) -> RunState:
    return dataclasses.replace(state, stopped=state.stopped | runs,
                               diverged=state.diverged | runs)


def epochs_run(state: RunState, epochs_completed: int) -> list[int]:
    """Per run: epochs until early stopping, else every epoch the program ran."""
    early = state.stopped & ~state.diverged
    return [int(state.best_epoch[r] + 1 + state.bad_epochs[r]) if early[r]
            else epochs_completed for r in range(state.num_runs)]
