"""Epoch checkpoints with orbax: atomic saves, newest two kept, JSON metadata beside.

A save that fails (a full disk, a quota, an I/O error) and a checkpoint that cannot be
read back end as one line naming the folder and what to do (`CheckpointError`), not as
orbax's tracebacks from its writer threads: the previous checkpoints stay as they were.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from swan_jax.models.formation import read_saved, saved_format
from swan_jax.runs.interrupts import held
from swan_jax.runs.io import RESUME, OutputWriteError, failure_reason
from swan_jax.settings import HINT, Hint, HintedError

# What a checkpoint fault suggests, by setting (a command line spells them as its flags).
OTHER_DIR = Hint("checkpoint_dir", None)
OVERWRITE = Hint("overwrite", True)


class CheckpointError(HintedError, RuntimeError):
    """A checkpoint could not be written or read (one line: the folder, what to do; its
    hints name the settings that help: `resume`, `overwrite`, `checkpoint_dir`)."""


class CheckpointWriteError(CheckpointError, OutputWriteError):
    """Saving a checkpoint failed; the earlier checkpoints are intact."""


class CheckpointUnreadable(CheckpointError):
    """A checkpoint on disk is truncated or corrupt."""


class _Drop(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


@contextlib.contextmanager
def _quiet_orbax() -> Iterator[None]:
    """Silence orbax's absl log while it saves or restores: a failure in its writer
    threads is logged there with a traceback per thread before it is raised to us, and
    we raise it as one line instead."""
    logger, drop = logging.getLogger("absl"), _Drop()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


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
        """Write epoch `epoch`; raise `CheckpointWriteError` (one line) if it fails."""
        try:
            with held(), _quiet_orbax():  # an interrupt waits for the whole checkpoint
                self._manager.save(epoch, args=ocp.args.Composite(
                    state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)))
                self._manager.wait_until_finished()
        except Exception as err:  # noqa: BLE001 - orbax wraps OS errors in ValueError
            _settle_background()
            self._discard_partial(epoch)
            with _quiet_orbax():  # orbax >= 0.11 warns that `read` is deprecated
                kept = [e for e in self._manager.all_steps(read=True) if e != epoch]
            resume = (Hint("resume", True, f"{{switch}} continues from epoch {max(kept)}, "
                                           f"kept in {self.directory / str(max(kept))}")
                      if kept else None)
            raise CheckpointWriteError(
                f"could not write the checkpoint of epoch {epoch} to "
                f"{self.directory / str(epoch)} ({failure_reason(err)}): free space there "
                f"(or choose another {HINT}) and run the same command again; "
                + (HINT if kept else "no earlier checkpoint is kept, so the program starts "
                                     "again"), OTHER_DIR, resume) from None

    def _discard_partial(self, epoch: int) -> None:
        """Remove orbax's temporary folder of a failed save (it holds the space we need)."""
        for partial in self.directory.glob(f"{epoch}.orbax-checkpoint-tmp*"):
            shutil.rmtree(partial, ignore_errors=True)

    def restore(self, like: Any, epoch: int | None = None) -> tuple[Any, dict[str, Any]]:
        """Restore the state shaped like `like` (a pytree of arrays) and its metadata.

        Raises `CheckpointUnreadable` (one line) for a truncated or corrupt checkpoint.
        """
        epoch = self.latest_epoch() if epoch is None else epoch
        if epoch is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, like)
        with _readable(self.directory, epoch, self._manager.all_steps()):
            restored = self._manager.restore(epoch, args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()))
            if not isinstance(restored["meta"], dict):
                raise ValueError("its metadata is not a JSON object")
        return restored["state"], restored["meta"]

    def close(self) -> None:
        with _quiet_orbax(), contextlib.suppress(Exception):  # after a failed save too
            self._manager.close()
        _settle_background()


# How long a failed save's orbax threads get to end (they end as soon as the writes they
# wait for have failed: well under a second on a full disk).
SETTLE_SECONDS = 30.0


def _settle_background(timeout: float = SETTLE_SECONDS) -> None:
    """Wait, quietly, for orbax's writer threads of a failed save to end.

    A save that fails (a full disk) raises in the main thread while orbax's background
    threads (`write_metadata_after_commits`, the array writers) still wait on the failed
    writes; left running, they log their failure after `_quiet_orbax` has ended, or at
    the interpreter's exit ("cannot schedule new futures after interpreter shutdown",
    34 lines). Joined here, inside `_quiet_orbax`, they end before the error is raised."""
    import threading
    import time

    deadline = time.monotonic() + timeout
    with _quiet_orbax():
        for thread in threading.enumerate():
            if thread is threading.current_thread() or not type(thread).__module__.startswith(
                    "orbax"):
                continue
            # orbax's threads re-raise their own failure from `join`: it is the save's
            with contextlib.suppress(Exception):
                thread.join(max(deadline - time.monotonic(), 0.0))


@contextlib.contextmanager
def _readable(directory: Path, epoch: int, steps) -> Iterator[None]:
    """Turn any failure to read checkpoint `epoch` into one `CheckpointUnreadable` line."""
    try:
        with _quiet_orbax():
            yield
    except Exception as err:  # noqa: BLE001 - orbax, tensorstore and JSON all fail differently
        older = sorted(e for e in steps if e < epoch)
        instead = (f"delete that folder to resume from epoch {older[-1]}" if older else
                   "delete that folder")
        raise CheckpointUnreadable(
            f"the checkpoint {directory / str(epoch)} cannot be read "
            f"({failure_reason(err)}); it is truncated or corrupt: {instead}, or pass "
            f"{HINT} (without {HINT}) to start the program again", OVERWRITE,
            RESUME) from None


def load_run_variables(directory: str | Path, run: int = 0, key: str = "best_params",
                       epoch: int | None = None, *, model: Any = None) -> Any:
    """Flax variables of run `run` from a program folder (no template needed).

    The store holds `{"params", "opt_state", "best_params", ...}` stacked over the runs
    of a vmapped program; this restores the newest (or `epoch`'s) checkpoint and takes
    run `run` of `key`.

    A checkpoint saved by swan-jax 0.1.0 (`fingerprint_format` below 3), whose field
    formed `V - V^T` and `Z + Z^T` from the full raw matrices, holds SWAN parameters that
    today's field reads as another function: given `model` (the Flax module it trained),
    they are converted to compute that function exactly (`swan_jax.models.formation`);
    without it, one line (`OldFormation`) says so. Other checkpoints load unchanged.
    """
    import jax.numpy as jnp

    with ocp.CheckpointManager(Path(directory).absolute()) as manager:
        epoch = manager.latest_step() if epoch is None else epoch
        if epoch is None:
            raise FileNotFoundError(f"no checkpoint in {directory}")
        with _readable(Path(directory).absolute(), epoch, manager.all_steps()):
            restored = manager.restore(epoch, args=ocp.args.Composite(
                state=ocp.args.StandardRestore(), meta=ocp.args.JsonRestore()))
    stacked = restored["state"][key]
    runs = jax.tree_util.tree_leaves(stacked)[0].shape[0]
    if not 0 <= run < runs:
        raise IndexError(f"run {run} is out of range: {directory} holds runs 0..{runs - 1}")
    variables = jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf[run]), stacked)
    return read_saved(variables, written_format=saved_format(restored["meta"]),
                      model=model, key=key, where=f"the checkpoint {Path(directory) / str(epoch)}")
