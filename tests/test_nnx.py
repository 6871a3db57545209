"""The `flax.nnx` SWAN block computes what the linen block computes for the same weights."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest
from flax import nnx

import swan_jax as sj
from swan_jax.models import nnx as swan_nnx


def _graph() -> jraph.GraphsTuple:
    """Two graphs: a directed 4-cycle with a chord, and a 3-node path (both directions)."""
    senders = jnp.array([0, 1, 2, 3, 0, 4, 5, 5, 6])
    receivers = jnp.array([1, 2, 3, 0, 2, 5, 4, 6, 5])
    return jraph.GraphsTuple(nodes=jnp.ones((7, 2)), edges=None, senders=senders,
                             receivers=receivers, n_node=jnp.array([4, 3]),
                             n_edge=jnp.array([5, 4]), globals=None)


CASES = [
    sj.SWANConfig(num_layers=3),
    sj.SWANConfig(variant="swan-learn", num_layers=2, beta=-0.5, adjacency="adj"),
    sj.SWANConfig(variant="adgn", num_layers=4, weight_sharing=False, activation="relu"),
    sj.SWANConfig(variant="swan-learn-ne", num_layers=2, weight_sharing=False),
]


@pytest.mark.parametrize("cfg", CASES, ids=lambda c: f"{c.variant}-{c.weight_sharing}")
@pytest.mark.parametrize("solver", ["euler", "heun"])
def test_nnx_and_linen_blocks_agree(cfg, solver):
    graph, x = _graph(), jax.random.normal(jax.random.key(1), (7, 5))
    linen = sj.SWANBlock(cfg, solver=solver)
    variables = linen.init(jax.random.key(0), graph, x)
    block = swan_nnx.SWANBlock.from_linen(linen, variables)
    np.testing.assert_array_equal(block(graph, x), linen.apply(variables, graph, x))
    # Gradients with respect to the input and the weights agree too.
    g_linen = jax.grad(lambda v, y: jnp.sum(linen.apply(v, graph, y) ** 2), (0, 1))(
        variables, x)
    g_nnx = nnx.grad(lambda b, y: jnp.sum(b(graph, y) ** 2), argnums=(0, 1))(block, x)
    np.testing.assert_allclose(g_nnx[1], g_linen[1], rtol=1e-6, atol=1e-7)
    for name, grad in g_linen[0]["params"]["field"].items():
        np.testing.assert_allclose(g_nnx[0]["field"][name][...], grad, rtol=1e-6, atol=1e-7)


def test_prepared_graph_and_jit():
    graph, x = _graph(), jax.random.normal(jax.random.key(2), (7, 4))
    cfg = sj.SWANConfig(num_layers=2)
    linen = sj.SWANBlock(cfg)
    variables = linen.init(jax.random.key(3), graph, x)
    block = swan_nnx.SWANBlock.from_linen(linen, variables)
    prepared = sj.prepare_graph(graph)
    out = nnx.jit(lambda b, g, y: b(g, y))(block, prepared, x)
    np.testing.assert_allclose(out, linen.apply(variables, graph, x), rtol=1e-6, atol=1e-6)


def test_round_trip_to_linen_variables():
    cfg = sj.SWANConfig(variant="swan-learn", num_layers=2)
    block = swan_nnx.SWANBlock(6, cfg, rngs=nnx.Rngs(7))
    graph, x = _graph(), jax.random.normal(jax.random.key(4), (7, 6))
    variables = swan_nnx.to_linen_variables(block)
    shapes = jax.tree_util.tree_map(jnp.shape, sj.SWANBlock(cfg).init(
        jax.random.key(0), graph, x))
    assert jax.tree_util.tree_map(jnp.shape, variables) == shapes
    np.testing.assert_array_equal(sj.SWANBlock(cfg).apply(variables, graph, x), block(graph, x))


def test_a_trained_models_field_converts(tmp_path):
    """`from_linen` takes a whole model's field dict (as `swan_field_params` finds it)."""
    from swan_jax.analysis import swan_field_params

    cfg = sj.SWANConfig(num_layers=2)
    model = sj.Model(sj.LinearEncoder(4), sj.SWANBlock(cfg), sj.NodeReadout((1,)))
    graph = _graph()
    variables = model.init(jax.random.key(0), graph)
    block = swan_nnx.SWANBlock.from_linen(model.processor, swan_field_params(variables))
    x = model.apply(variables, graph, method=lambda m, g: m.encoder(g))
    ref = model.apply(variables, graph, method=lambda m, g: m.processor(g, m.encoder(g)))
    np.testing.assert_array_equal(block(graph, x), ref)


def test_bad_inputs_are_refused():
    cfg = sj.SWANConfig(num_layers=2)
    block = swan_nnx.SWANBlock(4, cfg, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="hidden=4"):
        block(_graph(), jnp.ones((7, 3)))
    with pytest.raises(ValueError, match="needs"):
        swan_nnx.SWANBlock.from_linen(sj.SWANBlock(sj.SWANConfig(variant="swan-learn")),
                                      swan_nnx.to_linen_variables(block))
    with pytest.raises(KeyError, match="no SWAN field"):
        swan_nnx.linen_field({"params": {"dense": {}}})
    with pytest.raises(ValueError, match="hidden must be"):
        swan_nnx.SWANBlock(0, cfg, rngs=nnx.Rngs(0))
