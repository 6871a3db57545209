"""Flax wrappers: encoder -> SWAN block or baseline -> readout on padded batches."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest

import swan_jax as sj
from tests.graphs import random_undirected


def padded_batch(seed=0, width=2):
    rng = np.random.default_rng(seed)
    graphs = [random_undirected(rng, n) for n in (5, 6, 4)]
    batch = jraph.batch(graphs)
    n = int(batch.n_node.sum())
    batch = batch._replace(nodes=jnp.asarray(rng.normal(size=(n, width)), jnp.float32))
    padded = jraph.pad_with_graphs(batch, n_node=n + 5, n_edge=int(batch.n_edge.sum()) + 7,
                                   n_graph=5)
    return batch, padded, n


def model(processor, out=3, graph_level=True):
    readout = sj.GraphReadout((8, out)) if graph_level else sj.NodeReadout((8, out))
    return sj.Model(sj.LinearEncoder(8), processor, readout)


PROCESSORS = {
    **{v: sj.SWANBlock(sj.SWANConfig(variant=v, num_layers=3)) for v in sj.VARIANTS},
    **{k: sj.MPNNStack(k, 8, 3) for k in sj.BASELINE_LAYERS},
    **{f"graphcon-{c}": sj.GraphCONBlock(num_layers=3, epsilon=0.5, coupling=c)
       for c in sj.models.GRAPHCON_COUPLINGS},
}


@pytest.mark.parametrize("name", list(PROCESSORS))
@pytest.mark.parametrize("graph_level", [True, False])
def test_padding_does_not_reach_real_graphs(name, graph_level):
    batch, padded, n = padded_batch()
    net = model(PROCESSORS[name], graph_level=graph_level)
    params = net.init(jax.random.PRNGKey(0), padded)
    out = net.apply(params, padded)
    noisy = padded._replace(nodes=jnp.asarray(padded.nodes).at[n:].set(100.0))
    out_noisy = net.apply(params, noisy)
    real = slice(0, 3) if graph_level else slice(0, n)
    assert out.shape[0] == (5 if graph_level else n + 5)
    np.testing.assert_array_equal(out[real], out_noisy[real])
    np.testing.assert_allclose(out[real], net.apply(params, batch)[real], rtol=1e-5, atol=1e-6)
    assert np.all(np.isfinite(out))


def test_seeds_vmap_through_init_and_apply():
    _, padded, _ = padded_batch()
    net = model(PROCESSORS["swan"])
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    stacked = jax.vmap(net.init, in_axes=(0, None))(keys, padded)
    outs = jax.jit(jax.vmap(net.apply, in_axes=(0, None)))(stacked, padded)
    for i in range(4):
        single = net.apply(net.init(keys[i], padded), padded)
        np.testing.assert_allclose(outs[i], single, rtol=1e-5, atol=1e-6)
    assert not np.allclose(outs[0], outs[1])


def test_pooling_of_an_empty_graph_is_zero_not_inf():
    graph = jraph.GraphsTuple(nodes=jnp.ones((3, 2)), edges=None, senders=jnp.array([0]),
                              receivers=jnp.array([1]), n_node=jnp.array([3, 0]),
                              n_edge=jnp.array([1, 0]), globals=None)
    pooled = sj.pool_nodes(graph, graph.nodes, ("sum", "max", "mean"))
    np.testing.assert_array_equal(pooled[1], 0.0)
    np.testing.assert_allclose(pooled[0], [3, 3, 1, 1, 1, 1])


def test_unknown_baseline_and_pooling_are_named():
    _, padded, _ = padded_batch()
    with pytest.raises(ValueError, match="unknown baseline 'gnn'; valid baselines: gcn, gin"):
        model(sj.MPNNStack("gnn", 8, 2)).init(jax.random.PRNGKey(0), padded)
    with pytest.raises(ValueError, match="unknown pooling 'median'"):
        sj.pool_nodes(padded, padded.nodes, ("median",))


def test_parameters_only_initialises_the_same_parameters_without_solving(monkeypatch):
    import swan_jax.models as models

    _, padded, _ = padded_batch()
    key = jax.random.PRNGKey(3)
    for name in ("swan", "swan-learn"):
        m = model(PROCESSORS[name])
        out, plain = m.init_with_output(key, padded)
        # Outside the context, init runs the model: its output is the model's.
        np.testing.assert_array_equal(out, m.apply(plain, padded))
        with monkeypatch.context() as patch:
            patch.setattr(models, "solve", lambda *a, **k: pytest.fail("the init solved"))
            with models.parameters_only():
                fast = m.init(key, padded)
        assert jax.tree_util.tree_structure(fast) == jax.tree_util.tree_structure(plain)
        for a, b in zip(jax.tree_util.tree_leaves(fast), jax.tree_util.tree_leaves(plain),
                        strict=True):
            np.testing.assert_array_equal(a, b)
