"""Epoch checkpoints with orbax: atomic saves, newest two kept, JSON metadata beside."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp


class CheckpointStore:
    """`save(epoch, state, meta)` / `restore(like) -> (state, meta)` in one directory.

    Orbax writes each step into a temporary directory and renames it when complete, so
    a run killed mid-save leaves the previous checkpoint intact.
    """

    def __init__(self, directory: str | Path, max_to_keep: int = 2):
        self.directory = Path(directory).absolute()
        self._manager = ocp.CheckpointManager(
            self.directory,
            # Saves are synchronous: the epoch waits for them anyway, and orbax's async
            # path only adds "waiting for previous save" warnings.
            options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True,
                                                 enable_async_checkpointing=False),
        )

    def latest_epoch(self) -> int | None:
        return self._manager.latest_step()

    def save(self, epoch: int, state: Any, meta: dict[str, Any]) -> None:
        self._manager.save(epoch, args=ocp.args.Composite(
            state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)))
        self._manager.wait_until_finished()

    def restore(self, like: Any, epoch: int | None = None) -> tuple[Any, dict[str, Any]]:
        """Restore the state shaped like `like` (a pytree of arrays) and its metadata."""
        epoch = self.latest_epoch() if epoch is None else epoch
        if epoch is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, like)
        restored = self._manager.restore(epoch, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()))
        return restored["state"], restored["meta"]

    def close(self) -> None:
        self._manager.close()


def load_run_variables(directory: str | Path, run: int = 0, key: str = "best_params",
                       epoch: int | None = None) -> Any:
    """Flax variables of run `run` from a program folder (no template needed).

    The store holds `{"params", "opt_state", "best_params", ...}` stacked over the runs
    of a vmapped program; this restores the newest (or `epoch`'s) checkpoint and takes
    run `run` of `key`.
    """
    import jax.numpy as jnp

    with ocp.CheckpointManager(Path(directory).absolute()) as manager:
        epoch = manager.latest_step() if epoch is None else epoch
        if epoch is None:
            raise FileNotFoundError(f"no checkpoint in {directory}")
        restored = manager.restore(epoch, args=ocp.args.Composite(
            state=ocp.args.StandardRestore()))
    stacked = restored["state"][key]
    runs = jax.tree_util.tree_leaves(stacked)[0].shape[0]
    if not 0 <= run < runs:
        raise IndexError(f"run {run} is out of range: {directory} holds runs 0..{runs - 1}")
    return jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf[run]), stacked)
