"""Refuse a step that cannot fit in memory, before compiling it.

The estimate traces (never compiles) the vmapped backward pass: the residuals JAX keeps
for it (`jax.vjp`'s saved activations, found by `jax.eval_shape`), plus parameters,
gradients, optimiser states and best parameters of every run, plus the batch. XLA can
fuse some residuals away, so this errs high; it is meant to catch batch sizes that are
wrong by orders of magnitude, not to budget the last gigabyte.
"""

from __future__ import annotations

import math
from pathlib import Path

import jax

from swan_jax.losses import get_batch_loss
from swan_jax.pytrees import tree_bytes
from swan_jax.settings import HINT, Hint, HintedError
from swan_jax.train._config import ModelFn, TrainConfig
from swan_jax.train._placement import Placement, batch_targets
from swan_jax.train._splits import SPLIT_AXIS


class StepTooLarge(HintedError, MemoryError):
    """A training step's estimated memory exceeds what the device has free. Its hints:
    the `batch_size` it had, then a `batch_size` that fits or a smaller `hidden`."""


def free_memory_bytes() -> int | None:
    """Free memory of the first device (accelerator statistics, else the host's
    MemAvailable), or None when unknown."""
    stats = jax.local_devices()[0].memory_stats()  # this process's (multi-host: its own)
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def step_bytes(model_fn: ModelFn, cfg: TrainConfig, place: Placement, params, opt_state, hp,
               batch, *, split_mask: bool = False) -> int:
    """Estimated bytes of one vmapped training step (nothing is compiled): every run's
    activations, parameters and optimiser states (where a CPU computes the runs one at
    a time, `_run_blocks.by_device`, the figure errs high)."""
    loss_fn = get_batch_loss(cfg.loss)

    def residuals(p, h):
        def objective(q):
            pred = place.model_apply(model_fn)(q, h, batch.graph)
            target, mask = batch_targets(batch, cfg.task_level, sharded=place.sharded,
                                         split_mask=split_mask, select=h.get(SPLIT_AXIS))
            return loss_fn(pred, target, mask, batch.graph.n_node.reshape(-1))

        return jax.vjp(objective, p)[1]

    saved = jax.eval_shape(jax.vmap(residuals), params, hp)
    # params + gradients + updates + best params, the optimiser state, the batch
    return tree_bytes(saved) + 4 * tree_bytes(params) + tree_bytes(opt_state) + tree_bytes(batch)


def check_step_memory(estimate: int, free: int | None, batch_size: int, budget) -> None:
    """Raise `StepTooLarge` naming the budget and a batch size that fits, if it does not."""
    if free is None or estimate <= free:
        return
    fits = max(1, math.floor(batch_size * 0.8 * free / estimate))
    way_out = (Hint("batch_size", fits, "{switch} should fit") if fits < batch_size else
               Hint("hidden", None, "lower {switch} or the number of runs (seeds x grid "
                                    "points)"))
    raise StepTooLarge(
        f"a training step needs about {estimate / 2**30:.1f} GiB (batch budget {budget}, "
        f"{HINT}) but only {free / 2**30:.1f} GiB are free; {HINT}",
        Hint("batch_size", batch_size), way_out)
