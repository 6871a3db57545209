"""The layout of a program's vmapped runs on this device: all at once, or one at a time.

A program's step and prediction are `jax.vmap` over its `[R]` runs, which share their
batch. `in_blocks(fn, runs, B)` computes the vmapped `fn` as `jax.lax.map` over
`[R / B, B, ...]` blocks of the run-leading arguments, one block of `B` vmapped runs
after another; without `B`, the layout is chosen per device (`by_device`): on a CPU, a
program whose runs share a batch of at least `CPU_ONE_AT_A_TIME_BYTES` computes its runs
one at a time (`B` = 1), elsewhere all at once. On the 2-core CPU a GraphProp program of
8 vmapped runs cost 1.16-1.18x a lone run per run in CPU time, in blocks of 2 0.99x, one
at a time 0.90x (docs/benchmarks-log.md, "A grid on a CPU"): the 8 runs' activations
(`[8, N, d]` per array, 9.5 MB at GraphProp's batch) leave the caches a lone run's fit.
Each run is then the lone run's width-1 program: its numbers are the lone run's
(GraphProp's 8 runs, 2 epochs: bit for bit; the tests' toy model: 1 ulp in one Adam
entry, as XLA simplifies a division inside the loop otherwise), where all vmapped they
differ from it by the width's rounding (XLA folds the product of the shared operand with
every run's weights into one matrix product whose blocking follows its size:
`benchmarks/run_width_bits.py`).

On a CPU stopped runs are skipped (`Stoppable`: a training step's runs stop early or on
divergence, in a program of at least `MIN_SKIP_EPOCHS` epochs). Under a vmap a stopped
run costs a training run's step (Figure 3's GPS cells spent 19-24% of their epochs on
stopped runs). One at a time, each run's step is a `lax.cond` on its `active` flag. All
at once, the program computes every run while more than half of them train, then the
training ones one at a time. Vmapped, Figure 3's ring k = 5 GPS epoch of 4 runs costs
2.6x one run's alone, so with 1 of 4 stopped, skipping it was 0.83x as fast; with 2
stopped 1.26-1.36x, with 3 2.35-2.57x (`benchmarks/stopped_runs.py`;
docs/benchmarks-log.md, "Stopped runs skipped on a CPU"). Elsewhere the runs stay
vmapped: a GPU computes them in parallel, and a conditional there reads its predicate
back to the host.

The training loop uses the device's layout alone (`Placement.over_runs`; with
`shard_runs` inside each device's share); an explicit `B` is for callers that compare
layouts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

# On a CPU, runs sharing a batch of at least this many bytes are computed one at a time
# (`by_device`). GraphProp's batch of 512 graphs is about 3 MB; the test suite's batches
# and transfer's tiny graphs stay below and keep one vmapped program.
CPU_ONE_AT_A_TIME_BYTES = 1 << 20
# Whether a CPU skips stopped runs (`Stoppable`); False computes them, as before (the
# tests compare the two).
SKIP_STOPPED = True
# A program of fewer epochs computes its stopped runs: all at once, the skip compiles the
# step a second time (a tiny 2-epoch program's compile 3.2 -> 4.5 s), which only a long
# run repays.
MIN_SKIP_EPOCHS = 50


class Stoppable(NamedTuple):
    """Runs that may stop: argument `active` of the vmapped function is each run's flag
    `[R]` (False: stopped), and `idle(*args)` gives a stopped run's outputs without
    computing it (a training step's: its state as it was, a NaN loss)."""

    active: int
    idle: Callable


def in_blocks(fn: Callable, runs: Sequence[bool], block: int | None = None) -> Callable:
    """`fn` (vmapped over runs: the arguments flagged in `runs` lead with `[R]`, every
    output does) computed `block` runs at a time: `jax.lax.map` over the run-leading
    arguments reshaped to `[R / block, block, ...]`, the others shared by every block;
    the outputs reshaped back to `[R, ...]`. `block` None: as the device suits
    (`by_device`)."""
    if block is None:
        return by_device(fn, runs)
    return _blocked(fn, runs, block)


def by_device(fn: Callable, runs: Sequence[bool], *,
              stoppable: Stoppable | None = None) -> Callable:
    """`fn` in the layout this device computes fastest, chosen when traced: one run at a
    time on a CPU where the runs share at least `CPU_ONE_AT_A_TIME_BYTES` (see the module
    docstring), else `fn` itself (all runs vmapped at once; a lone run always). On a CPU,
    with `stoppable`, stopped runs are skipped (module docstring)."""
    def chosen(*args: Any) -> Any:
        shared = sum(int(math.prod(leaf.shape)) * jnp.dtype(leaf.dtype).itemsize
                     for a, r in zip(args, runs, strict=True) if not r
                     for leaf in jax.tree_util.tree_leaves(a))
        several = _runs_of(args, runs) > 1 and jax.default_backend() == "cpu"
        skips = stoppable if SKIP_STOPPED else None
        if several and shared >= CPU_ONE_AT_A_TIME_BYTES:
            return _blocked(fn, runs, 1, skips)(*args)
        if several and skips is not None:
            active = args[skips.active]
            most_train = 2 * jnp.sum(active) > active.shape[0]
            return jax.lax.cond(most_train, fn, _blocked(fn, runs, 1, skips), *args)
        return fn(*args)

    return chosen


def _blocked(fn: Callable, runs: Sequence[bool], block: int,
             stoppable: Stoppable | None = None) -> Callable:
    """`in_blocks` with a block size; with `stoppable`, a block whose runs have all
    stopped gives `stoppable.idle`'s outputs (in `fn`'s dtypes) without computing."""

    def blocked(*args: Any) -> Any:
        count = _runs_of(args, runs)
        if count % block:
            raise ValueError(f"{count} runs do not split into blocks of {block}")

        def split(a):
            return a.reshape((count // block, block) + a.shape[1:])

        stacked = tuple(jax.tree_util.tree_map(split, a) for a, r in zip(args, runs,
                                                                         strict=True) if r)

        def one(parts):
            it = iter(parts)
            own = tuple(next(it) if r else a for a, r in zip(args, runs, strict=True))
            if stoppable is None:
                return fn(*own)
            return jax.lax.cond(jnp.any(own[stoppable.active]), fn, _idle(fn, stoppable),
                                *own)

        out = jax.lax.map(one, stacked)
        return jax.tree_util.tree_map(lambda a: a.reshape((count,) + a.shape[2:]), out)

    return blocked


def _idle(fn: Callable, stoppable: Stoppable) -> Callable:
    """`stoppable.idle` cast to `fn`'s output dtypes (both branches of a `lax.cond` must
    agree; a loss may be float64 under x64)."""
    def idle(*args: Any) -> Any:
        return jax.tree_util.tree_map(lambda out, like: jnp.asarray(out, like.dtype),
                                      stoppable.idle(*args), jax.eval_shape(fn, *args))

    return idle


def _runs_of(args: Sequence[Any], runs: Sequence[bool]) -> int:
    """The leading `[R]` of the run-leading arguments."""
    leaves = [leaf for a, r in zip(args, runs, strict=True) if r
              for leaf in jax.tree_util.tree_leaves(a)]
    if not leaves:
        raise ValueError("in_blocks needs at least one run-leading argument")
    return int(leaves[0].shape[0])
