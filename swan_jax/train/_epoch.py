"""One epoch of training, and the divergence checks that follow it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from swan_jax.train._state import RunState

Run = tuple[Mapping[str, Any], int]  # (grid point, seed)


def run_epoch(step, state: RunState, hp, batches: Iterable, to_device: Callable
              ) -> tuple[RunState, np.ndarray]:
    """Every step of one epoch for every active run: the new state and losses `[steps, runs]`.

    A run's loss is NaN on a step whose loss or gradient was not finite (its state was
    kept as it was before that step).
    """
    active = jnp.asarray(~state.stopped)
    params, opt_state, losses = state.params, state.opt_state, []
    for batch in batches:
        params, opt_state, loss = step(params, opt_state, hp, to_device(batch), active)
        losses.append(loss)
    losses = np.stack([np.asarray(x) for x in losses])
    return dataclasses.replace(state, params=params, opt_state=opt_state), losses


def divergence_message(what: str, epoch: int, step: int | None, run: int,
                       runs: Sequence[Run], checkpoint_dir: str | None) -> str:
    """The one message every kind of divergence gives (what, where, what is kept, what to do).

    `checkpoint_dir` None: the run keeps no checkpoints.
    """
    point, seed = runs[run]
    where = f"epoch {epoch}" + ("" if step is None else f", step {step}")
    kept = (f"the last good checkpoint (epoch {epoch - 1}) is kept in {checkpoint_dir}"
            if checkpoint_dir else "no checkpoint directory")
    return (f"non-finite {what} at {where} for run {run} (seed {seed}, {point}); {kept}. "
            f"Lower the learning rate or epsilon, or raise gamma.")


def loss_divergence(losses: np.ndarray, state: RunState) -> dict[int, int]:
    """{run: first bad step} of the still-active runs whose training loss went non-finite."""
    out = {}
    for r in range(losses.shape[1]):
        bad = ~np.isfinite(losses[:, r])
        if not state.stopped[r] and bad.any():
            out[r] = int(np.flatnonzero(bad)[0])
    return out
