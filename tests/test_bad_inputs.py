"""Bad inputs to the core and to `GraphDataset` raise ValueErrors that name the problem.

The cases of `test_core.test_bad_inputs_raise_value_errors_that_name_the_problem` (index out
of range, wrong n_node, width, NaN, row count) are not repeated here.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest

import swan_jax as sj
from swan_jax.data import GraphDataset
from tests.graphs import graph_from_edges, random_undirected


def ok_inputs(variant: str = "swan"):
    """A 5-node graph, its config, parameters (d = 3) and float32 features."""
    rng = np.random.default_rng(21)
    graph = random_undirected(rng, 5)
    cfg = sj.SWANConfig(variant=variant)
    params = sj.init_params(jax.random.PRNGKey(0), 3, cfg)
    return graph, cfg, params, jnp.asarray(rng.normal(size=(5, 3)), jnp.float32)


# --- graph and features, through vector_field and solve ----------------------------


@pytest.mark.parametrize("change,message", [
    (lambda g, x: (g._replace(senders=g.senders.astype(jnp.float32)), x),
     r"graph\.senders must hold integers, got dtype float32"),
    (lambda g, x: (g._replace(receivers=g.receivers > 0), x),
     r"graph\.receivers must hold integers, got dtype bool"),
    (lambda g, x: (g._replace(n_node=g.n_node.astype(jnp.float32)), x),
     r"graph\.n_node must hold integers, got dtype float32"),
    (lambda g, x: (g._replace(n_node=g.n_node[None]), x),
     r"graph\.n_node must be 1-D, got shape \(1, 1\)"),
    (lambda g, x: (g._replace(senders=g.senders[:-1]), x),
     r"graph\.senders has 5 edges but graph\.receivers has 6"),
    (lambda g, x: (g._replace(n_edge=jnp.asarray([3])), x),
     r"sum\(graph\.n_edge\) = 3 but graph has 6 edges"),
    (lambda g, x: (g._replace(n_edge=jnp.asarray([6, 0])), x),
     r"graph\.n_edge has 2 graphs but graph\.n_node has 1"),
    (lambda g, x: (g._replace(nodes=jnp.zeros((4, 2))), x),
     r"sum\(graph\.n_node\) = 5 but graph\.nodes has 4 rows"),
    (lambda g, x: (g, x.astype(jnp.int32)), r"x must be a float array, got dtype int32"),
    (lambda g, x: (g, x.astype(jnp.complex64)), r"x must be a float array, got dtype complex64"),
    (lambda g, x: (g, x[:, 0]), r"x must be 2-D \[num_nodes, d\], got shape \(5,\)"),
    (lambda g, x: (g, x.at[2, 0].set(jnp.inf)), r"x has a non-finite value \(inf\) at row 2, "
                                                r"column 0"),
    (lambda g, x: (g, x.at[4, 2].set(-jnp.inf)), r"x has a non-finite value \(-inf\) at row 4, "
                                                 r"column 2"),
    (lambda g, x: (g, x.at[0, 1].set(jnp.nan)), r"x has a non-finite value \(nan\) at row 0, "
                                                r"column 1"),
])
def test_wrong_dtypes_shapes_and_non_finite_features_are_named(change, message):
    graph, cfg, params, x = ok_inputs()
    graph, x = change(graph, x)
    with pytest.raises(ValueError, match=message):
        sj.vector_field(params, graph, x, cfg)
    with pytest.raises(ValueError, match=message):
        sj.solve(params, graph, x, cfg)


def test_edges_crossing_between_graphs_of_a_batch_are_refused():
    # Two triangles; an edge listed with graph 0 that points into graph 1 would silently
    # mix the graphs (their readouts pool separately).
    g = jraph.batch([graph_from_edges([0, 1, 2], [1, 2, 0], 3)] * 2)
    crossed = g._replace(receivers=g.receivers.at[1].set(4))
    with pytest.raises(ValueError, match=r"graph\.receivers\[1\] = 4 is not a node of graph 0 "
                                         r"\(nodes 0\.\.2\), which edge 1 belongs to by "
                                         r"graph\.n_edge: edges must not cross graphs"):
        sj.validate_graph(crossed)
    # An edge assigned to a graph without nodes.
    empty_owner = g._replace(n_node=jnp.asarray([3, 3, 0]), n_edge=jnp.asarray([3, 2, 1]))
    with pytest.raises(ValueError, match=r"senders\[5\] = 5 is not a node of graph 2 \(no nodes\)"):
        sj.validate_graph(empty_owner)


def test_padded_batches_keep_every_edge_inside_its_graph():
    # The batch layout (padding edges are self-loops on the padding graph's first node)
    # passes the edge-ownership check above, whatever the graph sizes.
    from swan_jax.data.batching import budget_for, iterate_batches

    rng = np.random.default_rng(3)
    graphs = []
    for n in (1, 4, 2, 7, 3, 1, 5, 6):
        pairs = rng.integers(0, n, size=(2 * n - 2, 2))
        graphs.append({"nodes": rng.normal(size=(n, 2)).astype(np.float32),
                       "senders": pairs[:, 0], "receivers": pairs[:, 1]})
    data = GraphDataset.from_graphs(graphs)
    batches = list(iterate_batches(data, 3, budget_for(data, 3), np.random.default_rng(0)))
    assert len(batches) >= 3
    for batch in batches:
        sj.validate_graph(batch.graph)


def test_negative_n_edge_and_missing_fields_are_named():
    graph, *_ = ok_inputs()
    with pytest.raises(ValueError, match=r"graph\.n_edge has a negative count at graph 1"):
        sj.validate_graph(graph._replace(n_node=jnp.asarray([5, 0]), n_edge=jnp.asarray([7, -1])))
    with pytest.raises(ValueError, match=r"graph\.senders and graph\.receivers must be set"):
        sj.validate_graph(graph._replace(senders=None))
    with pytest.raises(ValueError, match=r"graph\.n_node must be set \(got None\)"):
        sj.validate_graph(graph._replace(n_node=None))
    with pytest.raises(ValueError, match=r"graph must be a jraph\.GraphsTuple, got tuple"):
        sj.validate_graph(tuple(graph))


def test_self_loops_are_refused_only_when_asked():
    # No SWAN adjacency forbids self-loops (padding edges are self-loops on the padding
    # node), so the field accepts them; validate_graph(allow_self_loops=False) names them.
    graph = graph_from_edges([0, 1, 2, 1], [1, 0, 2, 2], 3)
    sj.validate_graph(graph)
    with pytest.raises(ValueError, match=r"graph has a self-loop at edge 2 \(node 2\)"):
        sj.validate_graph(graph, allow_self_loops=False)
    cfg = sj.SWANConfig()
    params = sj.init_params(jax.random.PRNGKey(0), 2, cfg)
    out = sj.vector_field(params, graph, jnp.ones((3, 2)), cfg)
    assert out.shape == (3, 2) and bool(jnp.all(jnp.isfinite(out)))


@pytest.mark.parametrize("batch", [False, True])
def test_graph_without_nodes_gives_an_empty_state(batch):
    # Zero nodes is a valid (if empty) input: the field and the solution are [0, d].
    graph = graph_from_edges([], [], 0)
    if batch:  # zero graphs at all
        graph = graph._replace(n_node=jnp.zeros(0, jnp.int32), n_edge=jnp.zeros(0, jnp.int32))
    for variant in ("swan", "swan-learn"):
        cfg = sj.SWANConfig(variant=variant)
        params = sj.init_params(jax.random.PRNGKey(0), 3, cfg)
        x = jnp.zeros((0, 3))
        assert sj.vector_field(params, graph, x, cfg).shape == (0, 3)
        assert sj.solve(params, graph, x, cfg).shape == (0, 3)
        assert jax.jit(lambda p, x_, c=cfg: sj.solve(p, graph, x_, c))(params, x).shape == (0, 3)
    with pytest.raises(ValueError, match=r"x has 2 rows but the graph has 0 nodes"):
        sj.vector_field(params, graph, jnp.zeros((2, 3)), cfg)


def test_x0_of_the_learned_operators_is_checked_like_x():
    # x0 with other rows would be gathered out of range: JAX clamps, numbers go wrong silently.
    graph, cfg, params, x = ok_inputs("swan-learn")
    with pytest.raises(ValueError, match=r"x0 has shape \(3, 3\) but x has shape \(5, 3\)"):
        sj.vector_field(params, graph, x, cfg, x0=x[:3])
    with pytest.raises(ValueError, match=r"x0 has a non-finite value \(nan\) at row 1, column 2"):
        sj.vector_field(params, graph, x, cfg, x0=x.at[1, 2].set(jnp.nan))
    with pytest.raises(ValueError, match=r"x0 must be a float array, got dtype int32"):
        sj.vector_field(params, graph, x, cfg, x0=x.astype(jnp.int32))
    with pytest.raises(ValueError, match=r"x0 has shape \(3, 3\)"):
        sj.analysis.jacobian_factors(params, graph, x, cfg, x0=x[:3])


@pytest.mark.parametrize("key,shape", [("b", (1,)), ("V", (3, 2)), ("Z", (3,)), ("k1", (4,)),
                                       ("K1", (3, 3))])
def test_misshapen_parameters_are_named_with_the_expected_shape(key, shape):
    # A bias of shape [1] would broadcast over the channels without any error.
    graph, cfg, params, x = ok_inputs("swan-learn")
    params = {**params, key: jnp.zeros(shape)}
    expected = {"b": (3,), "V": (3, 3), "Z": (3, 3), "k1": (3,), "K1": (6, 3)}[key]
    message = rf"params\['{key}'\] has shape {re_tuple(shape)}; expected {re_tuple(expected)}"
    with pytest.raises(ValueError, match=message):
        sj.vector_field(params, graph, x, cfg)
    with pytest.raises(ValueError, match=message):
        jax.jit(lambda p: sj.solve(p, graph, x, cfg))(params)  # shapes are checked when traced


def re_tuple(shape: tuple[int, ...]) -> str:
    return "\\(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + "\\)"


def test_layer_dependent_bias_needs_its_layer_axis():
    graph, _, _, x = ok_inputs()
    cfg = sj.SWANConfig(num_layers=4, weight_sharing=False)
    params = sj.init_params(jax.random.PRNGKey(0), 3, cfg)
    with pytest.raises(ValueError, match=r"params\['b'\] has shape \(3,\); expected \(4, 3\)"):
        sj.vector_field({**params, "b": jnp.zeros(3)}, graph, x, cfg)


@pytest.mark.parametrize("kwargs,message", [
    ({"beta": float("nan")}, r"beta must be finite, got nan"),
    ({"gamma": float("inf")}, r"gamma must be finite, got inf"),
    ({"num_layers": 2.0}, r"num_layers must be an integer >= 1, got 2\.0"),
    ({"edge_activation": "swish"}, r"unknown edge activation 'swish'; valid edge activations"),
])
def test_more_bad_configs_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sj.SWANConfig(**kwargs)


def test_cfg_must_be_a_swan_config():
    graph, _, params, x = ok_inputs()
    with pytest.raises(ValueError, match=r"cfg must be a SWANConfig, got dict"):
        sj.vector_field(params, graph, x, {"variant": "swan"})


# --- GraphDataset -----------------------------------------------------------------


def dataset_fields(**changes):
    """Two graphs (3 and 2 nodes, 2 and 1 edges) with node and graph targets."""
    fields = dict(nodes=np.ones((5, 2), np.float32), edges=None, senders=np.array([0, 1, 0]),
                  receivers=np.array([1, 0, 1]), n_node=[3, 2], n_edge=[2, 1],
                  node_targets=np.zeros((5, 1), np.float32),
                  graph_targets=np.zeros((2, 1), np.float32))
    fields.update(changes)
    return fields


def with_value(shape, index, value):
    arr = np.ones(shape, np.float32)
    arr[index] = value
    return arr


@pytest.mark.parametrize("changes,message", [
    # Casts that used to change the numbers silently.
    ({"senders": np.array([0.0, 1.7, 0.0])}, r"senders\[1\] = 1\.7 is not an integer"),
    ({"receivers": np.array([1.0, np.nan, 1.0])}, r"receivers\[1\] = nan is not an integer"),
    ({"senders": np.array([0, 1, 2**33])}, r"senders\[2\] = 8589934592 does not fit in int32"),
    ({"n_node": [2.5, 2.5]}, r"n_node\[0\] = 2\.5 is not an integer"),
    ({"senders": np.array([True, False, True])}, r"senders must hold integers, got dtype bool"),
    # Counts and shapes.
    ({"n_node": [6, -1]}, r"graph 1: n_node\[1\] = -1 is negative"),
    ({"n_edge": [4, -1]}, r"graph 1: n_edge\[1\] = -1 is negative"),
    ({"n_edge": [3]}, r"n_edge has 1 graphs but n_node has 2"),
    ({"n_node": [[3, 2]], "n_edge": [[2, 1]]}, r"n_node must be 1-D, got shape \(1, 2\)"),
    ({"senders": np.array([[0, 1, 0]])}, r"senders must be 1-D, got shape \(1, 3\)"),
    ({"nodes": np.ones(5, np.float32)}, r"nodes must be 2-D \[rows, features\], got shape \(5,\)"),
    ({"nodes": np.ones((4, 2), np.float32)}, r"nodes has 4 rows but sum\(n_node\) = 5"),
    ({"senders": np.array([0, 1])},
     r"senders has shape \(2,\), expected \(3,\) from sum\(n_edge\)"),
    ({"edges": np.ones((2, 1), np.float32)}, r"edges has 2 rows but sum\(n_edge\) = 3"),
    ({"node_targets": np.zeros((4, 1))}, r"node_targets has 4 rows but sum\(n_node\) = 5"),
    ({"graph_targets": np.zeros((3, 1))}, r"graph_targets has 3 rows but there are 2 graphs"),
    ({"senders": np.array([0, 1, 2])}, r"graph 1: senders\[2\] = 2 is out of range for its 2 "
                                       r"nodes"),
    ({"receivers": np.array([1, -1, 1])}, r"graph 0: receivers\[1\] = -1 is out of range"),
    # Non-finite values, named by graph, field, row and column.
    ({"nodes": with_value((5, 2), (3, 1), np.nan)},
     r"graph 1: nodes row 3, column 1 is nan; features and targets must be finite"),
    ({"nodes": with_value((5, 2), (4, 0), -np.inf)}, r"graph 1: nodes row 4, column 0 is -inf"),
    ({"edges": with_value((3, 2), (1, 1), np.inf)}, r"graph 0: edges row 1, column 1 is inf"),
    ({"node_targets": with_value((5, 1), (2, 0), np.nan)},
     r"graph 0: node_targets row 2, column 0 is nan"),
    ({"graph_targets": with_value((2, 1), (1, 0), np.inf)},
     r"graph 1: graph_targets row 1, column 0 is inf"),
])
def test_graph_dataset_names_bad_arrays(changes, message):
    with pytest.raises(ValueError, match=message):
        GraphDataset(**dataset_fields(**changes))


def test_graph_dataset_keeps_integral_floats_and_integer_node_codes():
    # An empty Python list is float64 to NumPy; integral values are exact in int32.
    data = GraphDataset(**dataset_fields(senders=np.array([0.0, 1.0, 0.0]),
                                         nodes=np.arange(10, dtype=np.int64).reshape(5, 2)))
    assert data.senders.dtype == np.int32 and data.senders.tolist() == [0, 1, 0]
    assert data.nodes.dtype == np.int64  # categorical codes are not floats: no finiteness check
    empty = GraphDataset(nodes=np.zeros((2, 1), np.float32), edges=None, senders=[],
                         receivers=[], n_node=[2], n_edge=[0])
    assert empty.senders.shape == (0,) and empty.senders.dtype == np.int32
