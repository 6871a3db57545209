"""Several epochs in one device call: the device pipeline's short epochs without a host
round trip between them.

Where an epoch is a few steps (transfer: 2, GraphProp: 10), its device work takes
milliseconds and the loop's fixed costs (three calls, a copy of the losses and scores to
the host, the host's early-stopping update) take as long again. `EpochBlocks` runs as
many epochs as take about `BLOCK_SECONDS` (at most `MAX_EPOCHS_PER_CALL`) in one
`lax.while_loop`: each trains its steps (the pipeline's own scanned chunk), evaluates
validation and test (the pipeline's own sums, added in the same order), and updates
early stopping on the device.

What stays the same:

- The batches, the early-stopping rule and the divergence rules are the per-epoch loop's.
  Its numbers agree to float tolerance: XLA compiles the block's loop as another
  program, which may round differently in the last bit.
- Every block is the same compiled program (buffers of `MAX_EPOCHS_PER_CALL` epochs, the
  epoch count an argument), so where blocks start and end (the timing, the deadline, an
  interruption and `resume`) changes no number: bit for bit.
- Early stopping compares the validation numerator (a sum of errors, `metric_sums`) with
  the run's best. The host's metric is that numerator over a denominator that is the same
  every epoch (the split's rows or graph weights), in float64 and, for the log10 metrics,
  through a log: a strictly increasing map of a float32, so the comparisons agree. The
  best numerator is recovered from the host's float64 best metric exactly
  (`numerator_of`). The host replays the bookkeeping from the returned scores
  (`advance_bookkeeping`) and checks the device's decisions; a disagreement discards the
  block, and the loop goes on one epoch per call.
- An epoch whose loss, gradient or predictions are not finite for a run still training
  is not committed: the block ends before it, and the loop runs that epoch alone, so that
  the divergence rules and their messages are exactly the per-epoch loop's. A solver
  error inside a block has the loop run those epochs again one per call, so that the
  error names its epoch.
- A block ends at an epoch boundary: checkpoints, the deadline and the hooks see whole
  epochs (`on_epoch_end` and the trackers get each epoch's record after its block).

Blocks are used only where that equivalence holds: the device pipeline, one training
call per epoch, a metric the device reduces (`DEVICE_METRICS`), no plateau schedule
(its update reads the float64 metric), and saves not due every epoch; and where they
pay: runs of at least `MIN_FUSED_EPOCHS` epochs.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from swan_jax.train._config import TrainConfig
from swan_jax.train._evaluate import DEVICE_METRICS
from swan_jax.train._optim import epoch_learning_rates
from swan_jax.train._pipeline import DevicePipeline, _eval_split, _train_chunk
from swan_jax.train._run_mesh import to_host
from swan_jax.train._state import RunState, select_runs

BLOCK_SECONDS = 2.0  # a block's target wall time: progress, saves and deadlines keep pace
# The buffers of a block hold this many epochs, however many it runs: one compiled
# program, so that where the blocks start and end changes no number.
MAX_EPOCHS_PER_CALL = 64
NO_PATIENCE = 2**30
# A run of fewer epochs runs one per call. The block is one more program to
# compile (its loop holds training and evaluation; the evaluation alone is compiled for
# the final scores anyway): about 1-2 s more, which a GPU's 30 ms saved per epoch (40 to
# 11 ms on transfer line k = 10) repays after about 50 epochs, a CPU's later.
MIN_FUSED_EPOCHS = 50


def can_fuse(cfg: TrainConfig, pipeline) -> bool:
    """Whether this training call may run several epochs per device call. It depends on
    the configuration, not on where a resumed run starts: a resumed run fuses its epochs
    as the uninterrupted one does, and ends with its bits."""
    return (cfg.epochs >= MIN_FUSED_EPOCHS
            and isinstance(pipeline, DevicePipeline)
            and pipeline.setup.metric in DEVICE_METRICS and cfg.schedule != "plateau"
            and cfg.checkpoint_seconds > 0)


def numerator_of(metric: str, value: float, denominator: float) -> np.float32:
    """The float32 numerator whose score (`finish_sums`) is `value`: exact, since the
    float64 score's relative error (a division, for log10 a logarithm and its inverse:
    under 1e-14) is far below half a float32 ulp (3e-8)."""
    if not math.isfinite(value):
        return np.float32(np.inf)
    mean = 10.0 ** value if "log10" in metric else value
    return np.float32(mean * max(denominator, 1e-30))


@dataclasses.dataclass
class Block:
    """What one block returns: `epochs` committed epochs (the arrays lead with `[epochs]`)
    and whether it stopped before a diverging epoch (`halted`)."""

    state: RunState
    epochs: int
    halted: bool
    losses: np.ndarray  # [epochs, chunk, runs]; NaN on padding steps
    ok: np.ndarray  # [epochs, chunk] real steps
    scores: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # split: num, den, finite
    improved: np.ndarray  # [epochs, runs] the device's decisions
    rates: np.ndarray  # [epochs, runs] learning rates
    seconds: float


class EpochBlocks:
    """The compiled block of one training call and the choice of each block's length."""

    def __init__(self, pipeline: DevicePipeline, cfg: TrainConfig, splits: tuple[str, ...]):
        self.pipeline, self.cfg, self.splits = pipeline, cfg, splits
        # `can_fuse`: a metric of DEVICE_METRICS, by its name
        self.metric: str = str(pipeline.setup.metric)
        self.size = MAX_EPOCHS_PER_CALL  # the buffers' static length, the most per block
        self.pace: float | None = None  # seconds per epoch of the last block
        self.disabled = False
        self._ids: dict[int, np.ndarray] = {}  # packed epochs not yet trained
        # the evaluated splits (one shape: `DevicePipeline`) stacked, so that one traced
        # evaluation serves them all
        self._evals = jax.tree_util.tree_map(
            lambda *x: jnp.stack(x), *[(pipeline.placed[k], *pipeline.eval_ids[k])
                                       for k in splits])
        s = pipeline.setup
        self._block = jax.jit(functools.partial(
            _epochs, functools.partial(_train_chunk, s.step_fn, s.budget),
            functools.partial(_eval_split, s.predict_fn, s.eval_budget, s.level,
                              s.split_mask, self.metric),
            cfg.patience or NO_PATIENCE))

    def _epoch_ids(self, epoch: int) -> np.ndarray:
        if epoch not in self._ids:
            self._ids[epoch] = self.pipeline.pack(epoch)
        return self._ids[epoch]

    def length(self, epoch: int) -> int:
        """Epochs of the next block (0: run `epoch` alone): at most `MAX_EPOCHS_PER_CALL`,
        the epochs left, what fits in `BLOCK_SECONDS` and before the deadline; one epoch
        until a block has been timed; none past an epoch longer than one training call."""
        if self.disabled:
            return 0
        n = min(self.size, self.cfg.epochs - epoch)
        if self.pace is None:
            n = 1
        else:
            n = min(n, max(1, int(BLOCK_SECONDS / max(self.pace, 1e-6))))
            if self.cfg.deadline is not None:
                n = min(n, max(1, int((self.cfg.deadline - time.time()) / (1.5 * self.pace))))
        chunk = self.pipeline.chunk_size()  # the per-epoch loop's, fixed for the run
        for i in range(n):
            if len(self._epoch_ids(epoch + i)) > chunk:
                return i
        return n

    def run(self, state: RunState, hp, epoch: int, n: int) -> Block:
        """Train epochs `epoch .. epoch + n - 1` (fewer when the block halts or every run
        stops) in one device call; `state` is left as it was."""
        started, size = time.perf_counter(), self.size
        epochs = [epoch + min(i, n - 1) for i in range(size)]  # padding repeats the last
        ids = np.stack([self._padded(e) for e in epochs])
        ok = np.stack([np.arange(len(ids[0])) < len(self._epoch_ids(e)) for e in epochs])
        ok &= (np.arange(size) < n)[:, None]
        rates = np.stack([self._rates(hp, e) for e in epochs])
        carry = (state.params, state.opt_state, state.best_params,
                 jnp.asarray(self._best_numerators(state, hp)),
                 jnp.asarray(state.best_epoch >= 0), jnp.asarray(state.bad_epochs, jnp.int32),
                 jnp.asarray(state.stopped))
        pipe = self.pipeline
        result = self._block(carry, hp, jnp.asarray(rates), pipe.placed["train"], self._evals,
                             jnp.asarray(ids), jnp.asarray(ok), jnp.int32(n))
        self._ids = {e: i for e, i in self._ids.items() if e >= epoch + n}
        for e in range(epoch + n, min(epoch + n + size, self.cfg.epochs)):
            self._epoch_ids(e)  # the next block's ids, packed while the device trains
        carry, count, halted, out = result
        count = int(count)
        losses, improved, stacked = jax.tree_util.tree_map(lambda x: to_host(x)[:count], out)
        scores = {k: tuple(x[:, j] for x in stacked) for j, k in enumerate(self.splits)}
        seconds = time.perf_counter() - started
        if count:
            self.pace = seconds / count
            pipe.denominators.update({k: float(v[1][0]) for k, v in scores.items()})
        if count < n:  # halted or stopped: those epochs are packed again when they come
            self._ids = {}
        params, opt_state, best_params = carry[:3]
        return Block(state.replace(params=params, opt_state=opt_state, best_params=best_params),
                     count, bool(halted), losses, ok[:count], scores, improved, rates[:count],
                     seconds)

    def _padded(self, epoch: int) -> np.ndarray:
        ids = self._epoch_ids(epoch)
        out = np.full((self.pipeline.chunk_size(), ids.shape[1]), ids.max(initial=0), np.int32)
        out[: len(ids)] = ids
        return out

    def _rates(self, hp, epoch: int) -> np.ndarray:
        rates = epoch_learning_rates(self.cfg, hp, None, epoch)
        return to_host(hp["learning_rate"] if rates is None else rates).astype(np.float32)

    def _best_numerators(self, state: RunState, hp) -> np.ndarray:
        """Each run's best validation numerator (float32), from the host's best metric."""
        if not (state.best_epoch >= 0).any():
            return np.full(state.num_runs, np.inf, np.float32)
        pipe = self.pipeline
        if "val" not in pipe.denominators:  # a resumed run: one evaluation tells it
            pipe.evaluate(state.params, hp, "val")
        den = pipe.denominators["val"]
        return np.asarray([numerator_of(self.metric, float(v), den)
                           for v in state.best_metric], np.float32)


def _epochs(train_chunk, eval_split, patience: int, carry, hp, rates, train_data, evals,
            ids, ok, n):
    """Up to `n` epochs in a `while_loop`; see the module's docstring.

    `carry`: (params, opt_state, best_params, best numerator [runs] f32, seen [runs],
    bad epochs [runs] i32, stopped [runs]); `rates [size, runs]`; `ids [size, chunk, G]`,
    `ok [size, chunk]`; `evals`: the evaluated splits' (data, ids, real) stacked on a
    leading `[splits]` axis, validation first. Returns the carry, the epochs committed,
    whether a diverging epoch halted the block, and per epoch the losses
    `[size, chunk, runs]`, the improved runs `[size, runs]` and the splits'
    `(numerator [size, splits, runs], denominator [size, splits], finite [size, splits,
    runs])`.
    """
    @jax.jit  # one function object: the buffers' shapes below reuse the loop's trace
    def one_epoch(i, carry):
        params, opt_state, best_params, best, seen, bad, stopped = carry
        active = ~stopped
        h = {**hp, "learning_rate": rates[i]}
        params, opt_state, losses = train_chunk(params, opt_state, h, train_data, ids[i],
                                                ok[i], active)
        scores = jax.lax.map(lambda split: eval_split(params, h, *split), evals)
        diverged = jnp.any(active & jnp.any(ok[i][:, None] & ~jnp.isfinite(losses), axis=0))
        diverged |= jnp.any(active & ~scores[2])
        numerator = scores[0][0]
        improved = active & (~seen | (numerator < best))
        bad = jnp.where(improved, 0, jnp.where(active, bad + 1, bad))
        stopped = stopped | (active & ~improved & (bad >= patience))
        new = (params, opt_state, select_runs(improved, params, best_params),
               jnp.where(improved, numerator, best), seen | improved, bad, stopped)
        return new, (losses, improved, scores), diverged

    def body(loop):
        i, _, carry, out = loop
        new, written, diverged = one_epoch(i, carry)
        # a diverging epoch is not committed: the loop runs it alone, with its messages
        carry = jax.tree_util.tree_map(lambda a, b: jnp.where(diverged, b, a), new, carry)
        out = jax.tree_util.tree_map(lambda buf, x: buf.at[i].set(x), out, written)
        return i + jnp.where(diverged, 0, 1), diverged, carry, out

    def cond(loop):
        i, halted, carry, _ = loop
        return (i < n) & ~halted & ~jnp.all(carry[6])

    shapes = jax.eval_shape(one_epoch, jax.ShapeDtypeStruct((), jnp.int32), carry)[1]
    out = jax.tree_util.tree_map(lambda s: jnp.zeros((ids.shape[0],) + s.shape, s.dtype),
                                 shapes)
    count, halted, carry, out = jax.lax.while_loop(
        cond, body, (jnp.int32(0), jnp.bool_(False), carry, out))
    return carry, count, halted, out
