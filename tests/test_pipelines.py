"""The device pipeline builds the host pipeline's batches and trains to the same numbers;
checkpoints are saved on a time budget, a deadline stops cleanly, Ctrl-C keeps every
completed epoch."""

from __future__ import annotations

import functools
import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import swan_jax.train._pipeline as pipeline_module
from swan_jax.compiles import CompileCounter
from swan_jax.data.batching import budget_for, eval_batch_size, iterate_batches
from swan_jax.data.dataset import GraphDataset
from swan_jax.data.device import assemble, epoch_ids, place_dataset
from swan_jax.train import NodeSplit, TrainConfig, TrainingInterrupted, _loop, train
from swan_jax.train._pipeline import _prefetch
from tests.train_script import GRID, line_swap_dataset, model_fn, splits


def random_dataset(rng: np.random.Generator, num_graphs: int) -> GraphDataset:
    """Directed multi-edges, self-loops, isolated nodes, and a hub every 7th graph (overflow
    rows at a small slot width)."""
    parts = []
    for g in range(num_graphs):
        n = 40 if g % 7 == 0 else int(rng.integers(1, 20))
        if g % 7 == 0:  # a hub: node 0 talks with everyone, plus a few random edges
            spokes = np.arange(1, n)
            s = np.concatenate([np.zeros(n - 1, int), spokes, rng.integers(0, n, 6)])
            r = np.concatenate([spokes, np.zeros(n - 1, int), rng.integers(0, n, 6)])
        else:
            m = int(rng.integers(0, 3 * n))
            s, r = rng.integers(0, n, m), rng.integers(0, n, m)
        parts.append((n, s, r))
    nodes = sum(n for n, _, _ in parts)
    edges = sum(len(s) for _, s, _ in parts)
    return GraphDataset(
        nodes=rng.normal(size=(nodes, 3)).astype(np.float32),
        edges=rng.normal(size=(edges, 2)).astype(np.float32),
        senders=np.concatenate([s for _, s, _ in parts]).astype(np.int32),
        receivers=np.concatenate([r for _, _, r in parts]).astype(np.int32),
        n_node=np.array([n for n, _, _ in parts], np.int32),
        n_edge=np.array([len(s) for _, s, _ in parts], np.int32),
        node_targets=rng.normal(size=(nodes, 2)).astype(np.float32),
        graph_targets=rng.normal(size=(num_graphs, 1)).astype(np.float32))


@pytest.mark.parametrize("slot_width, batch_size", [(2, 1), (2, 5), (3, 64), (None, 5)])
def test_device_batches_equal_host_batches_field_by_field(slot_width, batch_size):
    data = random_dataset(np.random.default_rng(slot_width or 0), 30)
    budget = budget_for(data, batch_size, slot_width=slot_width,
                        prepared=slot_width is not None)
    placed = place_dataset(data, budget)
    build = jax.jit(functools.partial(assemble, budget=budget))
    ids = epoch_ids(data, budget, batch_size, np.random.default_rng(7))
    host = list(iterate_batches(data, batch_size, budget, np.random.default_rng(7)))
    assert len(ids) == len(host)
    assert budget.slot_width is None or any(b.graph.num_overflow for b in host)
    for step, want in zip(ids, host, strict=True):
        got = build(placed, jnp.asarray(step))
        assert type(got.graph) is type(want.graph)
        for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(want),
                                jax.tree_util.tree_leaves(got), strict=True):
            b = np.asarray(b)
            assert (a.dtype, a.shape) == (b.dtype, b.shape), jax.tree_util.keystr(path)
            np.testing.assert_array_equal(a, b, err_msg=jax.tree_util.keystr(path))


def test_assembling_a_batch_on_the_device_uses_no_scatter():
    data = random_dataset(np.random.default_rng(1), 12)
    budget = budget_for(data, 4, slot_width=2)
    ids = jnp.asarray(epoch_ids(data, budget, 4)[0])
    hlo = jax.jit(functools.partial(assemble, budget=budget)).lower(
        place_dataset(data, budget), ids).as_text()
    assert "scatter" not in hlo


def _both(data, cfg: TrainConfig, grid):
    out = {}
    for pipeline in ("device", "host"):
        out[pipeline] = train(model_fn, data, TrainConfig(**{**cfg.__dict__,
                                                             "pipeline": pipeline}), grid)
    return out["device"], out["host"]


def test_device_and_host_pipelines_train_the_same_runs():
    cfg = TrainConfig(epochs=3, batch_size=4, seeds=(0, 1), progress=False)
    device, host = _both(splits(line_swap_dataset()), cfg, GRID)
    for a, b in zip(device.history, host.history, strict=True):
        np.testing.assert_allclose(a["train_loss"], b["train_loss"], rtol=1e-5)
        np.testing.assert_allclose(a["val"], b["val"], rtol=1e-5)
    for a, b in zip(jax.tree_util.tree_leaves(device.best_params),
                    jax.tree_util.tree_leaves(host.best_params), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
    assert [r["best_epoch"] for r in device.runs] == [r["best_epoch"] for r in host.runs]


def test_pipelines_agree_on_node_splits_of_one_graph_and_host_metrics():
    whole = line_swap_dataset(num_graphs=1, num_nodes=40)
    nodes = np.arange(40)
    masks = {name: (nodes % 3 == i) for i, name in enumerate(("train", "val", "test"))}
    data = {name: NodeSplit(whole, mask) for name, mask in masks.items()}
    cfg = TrainConfig(epochs=3, batch_size=1, progress=False, metric="mae")
    device, host = _both(data, cfg, GRID[:1])
    np.testing.assert_allclose([h["val"] for h in device.history],
                               [h["val"] for h in host.history], rtol=1e-5)
    np.testing.assert_allclose([r["test"] for r in device.runs],
                               [r["test"] for r in host.runs], rtol=1e-5)


def test_validation_and_test_share_one_compiled_evaluation():
    """Splits of other sizes (3 and 6 graphs: other array shapes, other step counts) are
    padded to one shape, their padding steps skipped: one evaluation program, and the
    host pipeline's numbers."""
    data = line_swap_dataset(num_graphs=21)
    parts = {"train": data.subset(range(12)), "val": data.subset(range(12, 15)),
             "test": data.subset(range(15, 21))}
    cfg = TrainConfig(epochs=2, batch_size=2, progress=False)  # one epoch per call
    assembled = []  # who traced a device batch assembly: the training chunk, the evaluation
    real_assemble = pipeline_module._assemble

    def counting(*args, **kwargs):
        assembled.append(sys._getframe(1).f_code.co_name)
        return real_assemble(*args, **kwargs)

    with CompileCounter() as counter, pytest.MonkeyPatch.context() as mp:
        mp.setattr(pipeline_module, "_assemble", counting)
        device, host = _both(parts, cfg, GRID[:1])
    assert counter.compiled.count("jit(_eval_split)") == 1, counter.compiled
    # ... traced once: the padding steps' zeros take their shapes from that same trace
    assert assembled.count("one") == 1, assembled
    np.testing.assert_allclose([h["val"] for h in device.history],
                               [h["val"] for h in host.history], rtol=1e-5)
    np.testing.assert_allclose([r["test"] for r in device.runs],
                               [r["test"] for r in host.runs], rtol=1e-5)


def test_evaluation_batches_fit_the_evaluated_splits_not_the_training_batch():
    """Splits of 3 and 6 graphs with a training batch of 12 are evaluated in batches of
    3 (one step and two, no padded slots) instead of a 12-graph batch each, with the same
    numbers as evaluation in training batches."""
    assert eval_batch_size([160, 320], 512) == 160  # GraphProp's CPU protocol
    assert eval_batch_size([2331, 2331], 64) == 63  # LRGB: 37 steps either way
    assert eval_batch_size([5, 7], 2) == 2 and eval_batch_size([], 8) == 1
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        eval_batch_size([3], 0)
    data = line_swap_dataset(num_graphs=21)
    parts = {"train": data.subset(range(12)), "val": data.subset(range(12, 15)),
             "test": data.subset(range(15, 21))}
    cfg = TrainConfig(epochs=2, batch_size=12, progress=False, pipeline="device")
    prog = _loop._Program(model_fn, parts, cfg, GRID[:1])
    _loop._initial_state(prog)
    filler = {k: len(parts[k]) for k in ("val", "test")}
    real = {}  # graphs per evaluation step that runs (padding steps are skipped)
    for k, (ids, ok) in prog.pipeline.eval_ids.items():
        real[k] = [int((step < filler[k]).sum()) for step in np.asarray(ids)[np.asarray(ok)]]
    assert prog.setup.eval_batch_size == 3 and real == {"val": [3], "test": [3, 3]}
    sized = train(model_fn, parts, cfg, GRID[:1])
    with pytest.MonkeyPatch.context() as mp:  # evaluation in training batches, as before
        mp.setattr(_loop._Program, "_evaluation_batches", lambda self: {})
        whole = train(model_fn, parts, cfg, GRID[:1])
    np.testing.assert_allclose([h["val"] for h in sized.history],
                               [h["val"] for h in whole.history], rtol=1e-6)
    np.testing.assert_allclose([r["test"] for r in sized.runs],
                               [r["test"] for r in whole.runs], rtol=1e-6)


def test_the_device_pipeline_compiles_only_in_the_first_epoch():
    compiles = []
    with CompileCounter() as counter:
        cfg = TrainConfig(epochs=3, batch_size=3, progress=False, pipeline="device",
                          on_epoch_end=lambda e, r: compiles.append(counter.compiles))
        train(model_fn, splits(line_swap_dataset()), cfg, GRID[:1])
    assert compiles[0] > 0 and compiles[2] == compiles[0]


def test_checkpoints_follow_the_time_budget_and_history_never_runs_ahead(tmp_path):
    cfg = TrainConfig(epochs=3, batch_size=4, progress=False, checkpoint_dir=str(tmp_path),
                      checkpoint_seconds=1e9)
    train(model_fn, splits(line_swap_dataset()), cfg, GRID[:1])
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.isdigit()) == ["3"]
    lines = (tmp_path / "history.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [0, 1, 2]


def test_a_deadline_stops_after_a_save_and_resume_finishes_the_same_run(tmp_path):
    data = splits(line_swap_dataset())
    cfg = TrainConfig(epochs=3, batch_size=4, progress=False, checkpoint_dir=str(tmp_path),
                      checkpoint_seconds=1e9, deadline=time.time())
    with pytest.raises(TrainingInterrupted) as err:
        train(model_fn, data, cfg, GRID[:1])
    assert err.value.epochs_done == 1 and (tmp_path / "1").exists()
    resumed = train(model_fn, data, TrainConfig(**{**cfg.__dict__, "deadline": None,
                                                   "resume": True}), GRID[:1])
    whole = train(model_fn, data, TrainConfig(epochs=3, batch_size=4, progress=False),
                  GRID[:1])
    assert resumed.runs == whole.runs


def test_ctrl_c_saves_the_last_completed_epoch_between_time_budgeted_saves(tmp_path,
                                                                           monkeypatch):
    from swan_jax.train import _loop

    real, calls = _loop.train_epoch, []

    def ctrl_c_in_the_third_epoch(pipeline, state, hp, epoch, on_steps):
        calls.append(epoch)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(pipeline, state, hp, epoch, on_steps)

    monkeypatch.setattr(_loop, "train_epoch", ctrl_c_in_the_third_epoch)
    cfg = TrainConfig(epochs=4, batch_size=4, progress=False, checkpoint_dir=str(tmp_path),
                      checkpoint_seconds=1e9)  # one epoch per call; fused: tests/test_fused.py
    with pytest.raises(TrainingInterrupted) as err:
        train(model_fn, splits(line_swap_dataset()), cfg, GRID[:1])
    assert err.value.epochs_done == 2
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.isdigit()) == ["2"]


def test_prefetching_hands_over_items_in_order_and_reraises_errors():
    def source():
        yield from range(5)
        raise ValueError("bad batch 5")

    got = []
    with pytest.raises(ValueError, match="bad batch 5"):
        for item in _prefetch(source(), depth=2):
            got.append(item)
    assert got == [0, 1, 2, 3, 4]


def test_steps_per_call_are_fixed_for_the_run_not_for_the_call():
    """Packing graphs of many sizes gives epochs of 9 to 11 steps: the steps per call
    come from the run's first epochs, so a call resumed later compiles the same programs
    (and ends with the same bits) as the first call."""
    data = random_dataset(np.random.default_rng(0), 60)
    data.node_targets = data.node_targets[:, :1]  # the model's one output column
    parts = {"train": data.subset(range(40)), "val": data.subset(range(40, 50)),
             "test": data.subset(range(50, 60))}
    cfg = TrainConfig(epochs=2, batch_size=6, progress=False, pipeline="device")
    prog = _loop._Program(model_fn, parts, cfg, GRID[:1])
    state, _ = _loop._initial_state(prog)
    steps = [len(prog.pipeline.pack(e)) for e in range(12)]
    assert len(set(steps)) > 1 and steps[11] < max(steps[:8])  # packing varies
    prog.pipeline.train_epoch(state, prog.hp, 11, lambda n: None)  # a call resumed there
    assert prog.pipeline.chunk == max(steps[:8])
