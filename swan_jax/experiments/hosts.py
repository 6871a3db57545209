"""A sweep across processes: `jax.distributed.initialize()` before anything, once.

With `distributed=True` (`--distributed`) every process of a multi-host job runs the
same command. JAX finds its peers itself on SLURM (and the other clusters it detects);
elsewhere the coordinator comes from `JAX_COORDINATOR_ADDRESS` (host:port of process
0) and this process's place from `SWAN_NUM_PROCESSES` and `SWAN_PROCESS_ID`. Then
`jax.devices()` lists every process's devices, `shard_runs` puts each process's runs on
its own devices (`swan_jax.train._run_mesh`), and only process 0 takes the folder locks
and writes files (`writes_files`); every process reads the gathered scores, so all make
the same decisions.

On the CPU backend the processes talk through gloo (JAX's default CPU collectives).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import jax

from swan_jax.train import RunsDoNotDivide, check_divides, writes_files

__all__ = ["RunsDoNotDivide", "check_runs", "join", "only_on_first", "writes_files",
           "wait_for_all"]


def join(distributed: bool) -> None:
    """Initialise JAX's distributed runtime once (no-op without `distributed`)."""
    if not distributed or jax.distributed.is_initialized():
        return
    count, index = os.environ.get("SWAN_NUM_PROCESSES"), os.environ.get("SWAN_PROCESS_ID")
    jax.distributed.initialize(num_processes=None if count is None else int(count),
                               process_id=None if index is None else int(index))


@contextlib.contextmanager
def only_on_first(context) -> Iterator[None]:
    """`context` (a lock) entered by process 0 alone; the others run without it."""
    with context if writes_files() else contextlib.nullcontext():
        yield


def wait_for_all(name: str) -> None:
    """A barrier across processes (nothing with one process)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def check_runs(shard_runs: bool, programs, seeds: int) -> None:
    """Before any training: every program's runs divide over the devices (`shard_runs`)."""
    if not shard_runs:
        return
    for program in programs:
        check_divides(len(program.grid) * seeds, program.name)
