"""`graph_mean_mse`: per-graph node means of the squared error, then the mean over graphs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from swan_jax.data.batching import budget_for, iterate_batches
from swan_jax.data.dataset import GraphDataset
from swan_jax.data.graphprop import per_graph_squared_error
from swan_jax.losses import PER_GRAPH_LOSSES, graph_mean_mse, mse


def test_by_hand_weights_graphs_not_nodes():
    # Graph A: 3 nodes, errors 1, 1, 4 -> mean 2; graph B: 1 node, error 6 -> 6.
    pred = jnp.asarray([[1.0], [1.0], [2.0], [6.0]])
    target = jnp.zeros((4, 1))
    mask = jnp.ones(4, bool)
    n_node = jnp.asarray([3, 1])
    # squared errors: 1, 1, 4, 36 -> per graph 2 and 36 -> 19 (node mean: 42 / 4 = 10.5)
    assert float(graph_mean_mse(pred, target, mask, n_node)) == pytest.approx(19.0)
    assert float(mse(pred, target, mask)) == pytest.approx(10.5)
    assert PER_GRAPH_LOSSES["graph_mean_mse"] is graph_mean_mse


def test_padding_rows_and_empty_graphs_count_nowhere():
    pred = jnp.asarray([[1.0], [3.0], [100.0], [100.0]])
    target = jnp.zeros((4, 1))
    # Graph 0: rows 0-1; graph 1: empty; graph 2 (padding): rows 2-3, masked out.
    mask = jnp.asarray([True, True, False, False])
    n_node = jnp.asarray([2, 0, 2])
    assert float(graph_mean_mse(pred, target, mask, n_node)) == pytest.approx(5.0)
    nothing = graph_mean_mse(pred, target, jnp.zeros(4, bool), n_node)
    assert float(nothing) == 0.0


def test_matches_numpy_on_padded_batches_and_under_jit_and_grad():
    rng = np.random.default_rng(0)
    sizes = rng.integers(2, 9, size=11)
    graphs = [{"nodes": rng.random((n, 2)).astype(np.float32),
               "senders": np.zeros(0, np.int32), "receivers": np.zeros(0, np.int32),
               "node_targets": rng.random((n, 1)).astype(np.float32)} for n in sizes]
    data = GraphDataset.from_graphs(graphs)
    budget = budget_for(data, 4)
    for batch in iterate_batches(data, 4, budget):
        pred = jnp.asarray(rng.random(batch.node_targets.shape), jnp.float32)
        real = np.asarray(batch.node_mask)
        n_real = np.asarray(batch.graph.n_node)[np.asarray(batch.graph_mask)]
        want = np.nanmean(per_graph_squared_error(np.asarray(pred)[real],
                                                  batch.node_targets[real], n_real))
        got = jax.jit(graph_mean_mse)(pred, jnp.asarray(batch.node_targets),
                                      jnp.asarray(batch.node_mask),
                                      jnp.asarray(batch.graph.n_node))
        assert float(got) == pytest.approx(float(want), rel=1e-5)
        grad = jax.grad(graph_mean_mse)(pred, jnp.asarray(batch.node_targets),
                                        jnp.asarray(batch.node_mask),
                                        jnp.asarray(batch.graph.n_node))
        assert np.all(np.asarray(grad)[~real] == 0.0) and np.any(np.asarray(grad)[real] != 0)


def test_sharded_layout_flattens_shards_in_order():
    # Two shards of 3 rows each, flattened: the loss over [D * R] rows with the shards'
    # n_node flattened equals the mean over all graphs of both shards.
    pred = jnp.asarray([[1.0], [2.0], [0.0], [3.0], [0.0], [0.0]])
    target = jnp.zeros((6, 1))
    mask = jnp.asarray([True, True, False, True, True, False])
    n_node = jnp.asarray([[2, 1], [1, 2]]).reshape(-1)  # shard 0: (2, pad 1); shard 1: (1, 2)
    # graphs: (1, 4) -> 2.5; shard-1 graph 0: (9) -> 9; shard-1 graph 1: (0, pad) -> 0
    assert float(graph_mean_mse(pred, target, mask, n_node)) == pytest.approx((2.5 + 9 + 0) / 3)


def test_graph_mean_score_of_a_constant_equals_the_reference_row(tmp_path):
    """The evaluation's `graph_mean_log10_mse` over padded batches equals the constant
    predictor's reference score (numpy, per graph), and differs from the node mean."""
    import jax.numpy as jnp

    from swan_jax.data import graphprop
    from swan_jax.data.batching import budget_for, iterate_batches
    from swan_jax.train._evaluate import evaluate

    splits = graphprop.load_graphprop(
        "eccentricity", labels="paper", cache_dir=tmp_path, per_size={"train": 4, "val": 2,
                                                                     "test": 5},
        nodes={s: (6, 9, 13) for s in ("train", "val", "test")})
    reference = graphprop.constant_predictor_scores(splits, "eccentricity")
    test = splits["test"]
    budget = budget_for([test], 4)
    batches = list(iterate_batches(test, 4, budget))

    def predict(params, hp, batch):  # two "runs": the fitted constant and zero
        rows = batch.graph.nodes.shape[0]
        return jnp.stack([jnp.full((rows, 1), reference["constant"]), jnp.zeros((rows, 1))])

    [score, zero], finite = evaluate(predict, None, None, batches, "graph_mean_log10_mse",
                                     "node")
    assert finite.all()
    assert abs(score - reference["test"]) < 1e-6  # the constant rounded to float32
    [node_mean, _], _ = evaluate(predict, None, None, batches, "log10_mse", "node")
    assert abs(node_mean - score) > 1e-6  # graphs of 6, 9, 13 nodes weigh differently
