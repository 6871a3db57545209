"""How an epoch reaches the device: two pipelines with one interface and the same batches.

`DevicePipeline` places every split on the device once (`swan_jax.data.device`); the
host only shuffles graph ids and packs them into budgets (`[steps, n_graph - 1]` int32 per
epoch), and an epoch is a few jitted calls, each a `lax.scan` over up to `MAX_CHUNK` steps
that gathers its batch on the device and trains on it. Losses stay on the device until
the epoch ends. Evaluating a split is one call: a scan over its fixed batches that reduces
the metric on the device where it can (`DEVICE_METRICS`, or a caller's `Metric` with
`on_device=True`, applied to the split's stacked predictions in the same call) and
otherwise returns the predictions once.

`HostPipeline` builds batches with NumPy as before, but in a background thread that also
copies them to the device, two steps ahead of the step that runs (double buffering). It
serves `data_parallel` training and splits too large to place; a one-graph data set's
batch is built and copied once, not every epoch.
"""

from __future__ import annotations

import contextlib
import functools
import math
import queue
import threading
from collections.abc import Callable, Generator, Iterator, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from swan_jax.data.batching import Budget, pack
from swan_jax.data.dataset import GraphDataset
from swan_jax.data.device import (
    DeviceData,
    assemble,
    data_bytes,
    epoch_ids,
    host_data,
    same_shapes,
)
from swan_jax.train._evaluate import (
    DEVICE_METRICS,
    evaluate,
    finish_scores,
    finish_sums,
    metric_key,
    metric_sums,
    reduce_scores,
    score_batches,
)
from swan_jax.train._metric import Metric
from swan_jax.train._placement import Placement, batch_targets
from swan_jax.train._run_mesh import to_host
from swan_jax.train._splits import SPLIT_AXIS
from swan_jax.train._state import RunState

MAX_CHUNK = 64  # steps per device call: the step bar moves at least this often
CHUNK_SAMPLE = 8  # epochs whose step counts set a run's steps per call (packing varies)
PLACE_SHARE = 0.25  # "auto" places the splits when they take at most this share of free memory


class Setup:
    """What both pipelines need: the splits, the budget and the step and prediction."""

    def __init__(self, data: Mapping[str, GraphDataset], batch_size: int, budget: Budget,
                 place: Placement, step_fn: Callable, predict_fn: Callable, *,
                 metric: str | Metric, level: str, split_mask: bool, data_seed: int,
                 eval_batch_size: int | None = None, eval_budget: Budget | None = None):
        """`eval_batch_size`, `eval_budget`: the evaluated splits' batches (default: the
        training ones); same slot width as `budget` (the placed arrays serve both)."""
        self.data, self.batch_size, self.budget, self.place = data, batch_size, budget, place
        self.eval_batch_size = eval_batch_size or batch_size
        self.eval_budget = eval_budget or budget
        if self.eval_budget.slot_width != budget.slot_width:
            raise ValueError(f"eval_budget has slot width {self.eval_budget.slot_width}, the "
                             f"training budget {budget.slot_width}: they must agree")
        self.step_fn, self.predict_fn = step_fn, predict_fn
        # a built-in by name (its own code path), a caller's `Metric` as itself
        self.metric, self.level, self.split_mask = metric_key(metric), level, split_mask
        self.data_seed = data_seed

    def rng(self, epoch: int) -> np.random.Generator:
        return np.random.default_rng([self.data_seed, epoch])


def choose_pipeline(kind: str, setup: Setup, free_bytes: int | None):
    """The pipeline `kind` ("auto", "device", "host") names for `setup`.

    Raises ValueError for "device" with `data_parallel` (the host pipeline shards).
    """
    if kind == "device" and setup.place.sharded:
        raise ValueError("pipeline 'device' does not shard batches over devices; use "
                         "pipeline 'host' (or 'auto') with data_parallel")
    if kind == "host" or (kind == "auto" and setup.place.sharded):
        return HostPipeline(setup)
    arrays = {k: host_data(d, setup.budget) for k, d in setup.data.items()}  # built once
    need = sum(data_bytes(a) for a in arrays.values())
    if kind == "auto" and free_bytes is not None and need > PLACE_SHARE * free_bytes:
        return HostPipeline(setup)
    return DevicePipeline(setup, arrays)


class _Completed:
    """Reports an epoch's training calls to `on_steps` as they complete, not as they are
    dispatched (JAX returns at once, and a step bar then stood at its end while the
    device worked on, for minutes in a CPU's Peptides-func epoch): after dispatching a
    call it waits for the one before, so one call is always queued behind the running one
    and the device never waits for the host.

    Why not from inside the compiled program (a host callback per step)? The progress
    would change the program that trains, on every platform and in every mode; waiting
    for results leaves it as it was, so the numbers stay bit for bit those of any other
    report (quiet, bars, lines) and of the fused epochs' tests. Its steps are as fine as
    the calls: up to `MAX_CHUNK` steps each (Peptides-func: 3 calls of 57 steps)."""

    def __init__(self, on_steps: Callable[[int], None]):
        self.on_steps = on_steps
        self.pending: tuple[jax.Array, int] | None = None

    def dispatched(self, result: jax.Array, steps: int) -> None:
        """A call with `steps` real steps was dispatched; its `result` is ready when it
        is done."""
        self.wait_all()
        self.pending = (result, steps)

    def wait_all(self) -> None:
        if self.pending is not None:
            result, steps = self.pending
            self.pending = None
            jax.block_until_ready(result)
            self.on_steps(steps)


def _losses(chunks: list[tuple[jax.Array, np.ndarray]]) -> np.ndarray:
    """`[steps, runs]` losses of an epoch's chunks (padding steps dropped)."""
    return np.concatenate([to_host(loss)[ok] for loss, ok in chunks])


class DevicePipeline:
    """Every split on the device; an epoch is `ceil(steps / chunk)` scanned calls."""

    name = "device"

    def __init__(self, setup: Setup, arrays: Mapping[str, DeviceData] | None = None):
        """`arrays`: each split's `host_data`, when the caller built them already."""
        self.setup = setup
        arrays = arrays or {k: host_data(d, setup.budget) for k, d in setup.data.items()}
        # The evaluated splits share one shape (arrays and step count): one compiled
        # evaluation serves them all, padding steps skipped.
        evaluated = [k for k in setup.data if k != "train"]
        arrays = {**arrays, **dict(zip(evaluated, same_shapes([arrays[k] for k in evaluated]),
                                       strict=True))}
        self.placed = {k: setup.place.data(a) for k, a in arrays.items()}
        self.eval_ids = _padded_steps({k: epoch_ids(setup.data[k], setup.eval_budget,
                                                    setup.eval_batch_size) for k in evaluated})
        self.bytes = sum(data_bytes(d) for d in self.placed.values())
        self._ids: dict[int, np.ndarray] = {}
        self.chunk: int | None = None
        self.denominators: dict[str, float] = {}  # each split's metric denominator, once seen
        # Nothing is donated: the state of the last completed epoch must survive a Ctrl-C
        # inside the next one (the loop saves it); parameters are small next to a batch.
        self._train = jax.jit(functools.partial(_train_chunk, setup.step_fn, setup.budget))
        metric = setup.metric
        self.device_metric = isinstance(metric, Metric) and metric.on_device
        if isinstance(metric, Metric) and self.device_metric:
            self._eval = jax.jit(functools.partial(
                _eval_scores, setup.predict_fn, setup.eval_budget, setup.level, setup.split_mask,
                metric))
        else:
            self._eval = jax.jit(functools.partial(
                _eval_split, setup.predict_fn, setup.eval_budget, setup.level, setup.split_mask,
                metric if metric in DEVICE_METRICS else None))

    def pack(self, epoch: int) -> np.ndarray:
        """The graph ids of every step of `epoch` `[steps, n_graph - 1]` (not cached)."""
        return epoch_ids(self.setup.data["train"], self.setup.budget, self.setup.batch_size,
                         self.setup.rng(epoch))

    def epoch_ids(self, epoch: int) -> np.ndarray:
        if epoch not in self._ids:
            self._ids = {epoch: self.pack(epoch)}
        return self._ids[epoch]

    def steps(self, epoch: int) -> int:
        return len(self.epoch_ids(epoch))

    def chunk_size(self) -> int:
        """Steps per training call, fixed for the run, not for the call (a resumed call
        compiles what the first one did: the same bits): the most steps among the first
        `CHUNK_SAMPLE` epochs, cut into calls of at most `MAX_CHUNK` steps."""
        if self.chunk is None:
            steps = max(len(self.pack(e)) for e in range(CHUNK_SAMPLE))
            self.chunk = math.ceil(steps / math.ceil(steps / MAX_CHUNK))
        return self.chunk

    def train_epoch(self, state: RunState, hp, epoch: int, on_steps: Callable[[int], None]
                    ) -> tuple[RunState, np.ndarray]:
        ids = self.epoch_ids(epoch)
        chunk = self.chunk_size()
        calls = math.ceil(len(ids) / chunk)
        padded = np.full((calls * chunk, ids.shape[1]), ids.max(initial=0), np.int32)
        padded[: len(ids)] = ids
        ok = np.arange(len(padded)) < len(ids)
        active = jnp.asarray(~state.stopped)
        params, opt_state, chunks = state.params, state.opt_state, []
        done = _Completed(on_steps)
        for c in range(calls):
            part = slice(c * chunk, (c + 1) * chunk)
            params, opt_state, loss = self._train(params, opt_state, hp, self.placed["train"],
                                                  padded[part], ok[part], active)
            chunks.append((loss, ok[part]))
            done.dispatched(loss, int(ok[part].sum()))
        self.epoch_ids(epoch + 1)  # pack the next epoch while the device trains this one
        done.wait_all()
        state = state.replace(params=params, opt_state=opt_state)
        return state, _losses(chunks)

    def evaluate(self, params, hp, split: str) -> tuple[list[float], np.ndarray]:
        out = self._eval(params, hp, self.placed[split], *self.eval_ids[split])
        if self.device_metric:
            return finish_scores(*out)
        if self.setup.metric in DEVICE_METRICS:
            numerator, denominator, finite = (to_host(x) for x in out)
            self.denominators[split] = float(denominator)
            return finish_sums(numerator, denominator, finite, self.setup.metric)
        pred, target, mask = (to_host(x) for x in out)
        return score_batches(pred, target, mask, [None] * len(pred), self.setup.metric)


# `assemble` as one jitted function of the whole process (it is pure library code): its
# trace is made once per data shapes and budget and reused by every later training and
# evaluation program, which only call it (XLA inlines the call).
_assemble = jax.jit(assemble, static_argnums=2)


# How a scanned call passes over its padding steps: None chooses by platform ("cond" on a
# CPU, "mask" elsewhere; see `_train_chunk`), "cond" or "mask" forces one (tests).
PADDING_STEPS: str | None = None


def _by_platform(cond: Callable, mask: Callable, *args):
    """`cond(*args)` or `mask(*args)` as `PADDING_STEPS` says."""
    if PADDING_STEPS is None:
        return jax.lax.platform_dependent(*args, cpu=cond, default=mask)
    return {"cond": cond, "mask": mask}[PADDING_STEPS](*args)


def _train_chunk(step_fn, budget: Budget, params, opt_state, hp, data: DeviceData,
                 ids, ok, active):
    """`len(ids)` steps in one scan; padding steps (`ok` False) leave the state as it was
    and give NaN losses.

    On a CPU a padding step skips the step (`lax.cond`). On a GPU it runs the step with
    every run stopped (`active` False: the step keeps the state): a conditional whose
    predicate is data reads it back to the host, once per step, while a padding step
    (0-2 per epoch) costs one step. Real steps are the same program either way.
    """
    def body(carry, step):
        step_ids, real = step

        def train(args):
            return step_fn(*args[:2], hp, _assemble(data, step_ids, budget), active)

        def skip(args):
            return args[0], args[1], jnp.full(active.shape, jnp.nan, jnp.float32)

        def branch(carry, real):
            return jax.lax.cond(real, train, skip, carry)

        def masked(carry, real):
            p, o, loss = step_fn(*carry, hp, _assemble(data, step_ids, budget),
                                 active & real)
            return p, o, jnp.where(real, loss, jnp.nan)

        p, o, loss = _by_platform(branch, masked, carry, real)
        return (p, o), loss.astype(jnp.float32)

    (params, opt_state), losses = jax.lax.scan(body, (params, opt_state), (ids, ok))
    return params, opt_state, losses


def _padded_steps(ids: Mapping[str, np.ndarray]) -> dict[str, tuple[jax.Array, jax.Array]]:
    """Each split's evaluation steps `[steps, n_graph - 1]` padded to the longest split's
    count with filler ids (empty steps), and which steps are real `[steps]`."""
    steps = max((len(i) for i in ids.values()), default=0)
    out = {}
    for split, own in ids.items():
        filler = own.max(initial=0) if own.size else 0
        padded = np.full((steps,) + own.shape[1:], filler, np.int32)
        padded[: len(own)] = own
        out[split] = (jnp.asarray(padded), jnp.asarray(np.arange(steps) < len(own)))
    return out


def _eval_split(predict_fn, budget: Budget, level: str, split_mask: bool, metric: str | None,
                params, hp, data: DeviceData, ids, real):
    """One scan over a split's batches: with `metric`, its sums over the real batches
    `(numerator [runs], denominator [], finite [runs])`, added in step order in the scan's
    carry (the fused epochs reduce the same sums in the same order: `_fused`); without,
    the predictions, targets and masks per batch. Padding steps (`real` False) are
    skipped (on a GPU computed and replaced, see `_train_chunk`) and count for nothing."""
    @jax.jit  # one function object: `skip`'s shapes reuse the trace `cond` makes of it
    def one(step_ids):
        batch = _assemble(data, step_ids, budget)
        pred = predict_fn(params, hp, batch)
        target, mask = batch_targets(batch, level, split_mask=split_mask,
                                     select=hp.get(SPLIT_AXIS))
        if metric is None:
            return pred, target, mask
        finite = jnp.all(jnp.isfinite(pred) | ~mask[None, :, None], axis=(1, 2))
        numerator, denominator = metric_sums(pred, target, mask, batch.graph.n_node, metric)
        return numerator, denominator, finite

    def skip(step_ids):  # no real graph: masked out, or nothing summed and finite
        shapes = jax.eval_shape(one, step_ids)
        zeros = [jnp.zeros(s.shape, s.dtype) for s in shapes]
        return (*zeros[:2], jnp.ones(shapes[2].shape, shapes[2].dtype)) if metric else \
            tuple(zeros)

    def branch(step_ids, real):
        return jax.lax.cond(real, one, skip, step_ids)

    def masked(step_ids, real):  # on a GPU, as in `_train_chunk`: no conditional
        return tuple(jnp.where(real, a, b) for a, b in zip(one(step_ids), skip(step_ids),
                                                           strict=True))

    def body(_, step):
        return None, _by_platform(branch, masked, *step)

    per_step = jax.lax.scan(body, None, (ids, real))[1]
    if metric is None:
        return per_step

    def add(total, step):  # in step order: the same sums wherever this is traced
        return (total[0] + step[0], total[1] + step[1], total[2] & step[2]), None

    start = (jnp.zeros_like(per_step[0][0]), jnp.zeros_like(per_step[1][0]),
             jnp.ones_like(per_step[2][0]))
    return jax.lax.scan(add, start, per_step)[0]


def _eval_scores(predict_fn, budget: Budget, level: str, split_mask: bool, metric: Metric,
                 params, hp, data: DeviceData, ids, real):
    """A caller's device `Metric` over a split: `(values [runs], finite [runs])`, reduced
    from the scan's predictions where they are (padding steps masked out)."""
    pred, target, mask = _eval_split(predict_fn, budget, level, split_mask, None, params, hp,
                                     data, ids, real)
    return reduce_scores(metric, pred, target, mask)


class HostPipeline:
    """NumPy batches built and copied in a background thread, two steps ahead."""

    name = "host"
    bytes = 0

    def __init__(self, setup: Setup):
        self.setup = setup
        place = setup.place
        self.eval_batches = {
            k: [place.batch(b) for b in place.batches(d, setup.eval_batch_size,
                                                      setup.eval_budget)]
            for k, d in setup.data.items() if k != "train"}
        self._train = jax.jit(setup.step_fn)  # no donation: see `DevicePipeline`
        self._predict = jax.jit(setup.predict_fn)
        self._cached: list | None = None  # a one-group epoch's batches

    def steps(self, epoch: int) -> int:
        """Steps of `epoch`, counted by packing alone (no batch is built)."""
        s, shards = self.setup, self.setup.place.num_shards
        data = s.data["train"]
        groups = pack(data, s.rng(epoch).permutation(len(data)),
                      math.ceil(s.batch_size / shards), s.budget)
        return math.ceil(len(groups) / shards)

    def batches(self, epoch: int) -> Generator:
        """The epoch's device batches; a data set of one graph is copied only once."""
        s = self.setup
        if len(s.data["train"]) == 1:
            if self._cached is None:
                self._cached = [s.place.batch(b) for b in s.place.batches(
                    s.data["train"], s.batch_size, s.budget, s.rng(epoch))]
            return (batch for batch in self._cached)  # a generator: `close()` as below
        source = s.place.batches(s.data["train"], s.batch_size, s.budget, s.rng(epoch))
        return _prefetch(map(s.place.batch, source), depth=2)

    def train_epoch(self, state: RunState, hp, epoch: int, on_steps: Callable[[int], None]
                    ) -> tuple[RunState, np.ndarray]:
        active = jnp.asarray(~state.stopped)
        params, opt_state, losses = state.params, state.opt_state, []
        done = _Completed(on_steps)
        with contextlib.closing(self.batches(epoch)) as batches:
            for batch in batches:
                params, opt_state, loss = self._train(params, opt_state, hp, batch, active)
                losses.append(loss)
                done.dispatched(loss, 1)
        done.wait_all()
        state = state.replace(params=params, opt_state=opt_state)
        return state, np.stack([to_host(x) for x in losses])

    def evaluate(self, params, hp, split: str) -> tuple[list[float], np.ndarray]:
        s = self.setup
        return evaluate(self._predict, params, hp, self.eval_batches[split], s.metric,
                        s.level, sharded=s.place.sharded, split_mask=s.split_mask)


_DONE = object()


PREFETCH_JOIN_SECONDS = 30.0  # how long closing waits for the producer's item in hand


def _prefetch(source: Iterator, depth: int) -> Generator:
    """`source`'s items, produced by a background thread up to `depth` ahead (errors are
    re-raised in the consumer). Closing the generator (`close()`, as `train_epoch` does
    on any way out, a Ctrl-C included) stops the thread and joins it: a thread left
    copying a batch to the device while the interpreter exits races JAX's teardown."""
    items: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce():
        try:
            for item in source:
                while not stop.is_set():
                    try:
                        items.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            items.put(_DONE)
        except BaseException as err:  # handed to the consumer
            items.put(err)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        while (item := items.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join(PREFETCH_JOIN_SECONDS)
