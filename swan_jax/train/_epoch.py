"""The divergence checks that follow an epoch, and the message every divergence gives."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from swan_jax.train._state import RunState

Run = tuple[Mapping[str, Any], int]  # (grid point, seed)


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
            f"{divergence_causes(what, epoch, step)}")


def divergence_causes(what: str, epoch: int, step: int | None) -> str:
    """The likely causes, most likely first: before any update (epoch 0, step 0) the
    learning rate cannot be one of them (`epoch` counts from 0, as the message does)."""
    data = ("the data (NaN or infinite features or targets), the loss itself (a log or a "
            "division by zero: a loss of one's own, or NaN targets with an elementwise "
            "loss)")
    if epoch == 0 and step == 0 and what.startswith("training"):
        return (f"The loss or its gradient was already non-finite on the first batch, before "
                f"any update, so the learning rate is not the cause: check {data}, or the "
                f"model's first output (epsilon, gamma, the solver).")
    if what.startswith("training"):
        return (f"Likely causes: the loss returning NaN on some batch ({data}); or "
                f"training that diverged: lower the learning rate or epsilon, or raise "
                f"gamma.")
    return ("Likely causes: parameters that diverged (lower the learning rate or "
            "epsilon, or raise gamma), or NaN or infinite features in that split.")


def loss_divergence(losses: np.ndarray, state: RunState) -> dict[int, int]:
    """{run: first bad step} of the still-active runs whose training loss went non-finite."""
    out = {}
    for r in range(losses.shape[1]):
        bad = ~np.isfinite(losses[:, r])
        if not state.stopped[r] and bad.any():
            out[r] = int(np.flatnonzero(bad)[0])
    return out
