"""Bring your own data: `GraphDataset.from_graphs` over networkx graphs, `jraph.GraphsTuple`s
and dicts; `dataset[i]` as a `GraphsTuple`; `split`; and the README's example, run as it is
written there."""

from __future__ import annotations

import re
from pathlib import Path

import jraph
import networkx as nx
import numpy as np
import pytest

from swan_jax.data import GraphDataset

README = Path(__file__).resolve().parents[1] / "README.md"


def _triangle_with_tail() -> nx.Graph:
    g = nx.Graph()
    g.add_edges_from([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")], w=[1.0, 2.0])
    for i, n in enumerate(g.nodes):
        g.nodes[n]["x"] = [float(i), 1.0]
        g.nodes[n]["label"] = i % 2
    g.graph["y"] = [3.0, -1.0]
    return g


def test_networkx_graph_becomes_both_directions_of_every_edge():
    g = _triangle_with_tail()
    data = GraphDataset.from_graphs([g], edge_features="w", node_target="label",
                                    graph_target="y")
    order = list(g.nodes)
    assert data.n_node.tolist() == [4] and data.n_edge.tolist() == [8]
    pairs = {(order[s], order[r]) for s, r in zip(data.senders, data.receivers, strict=True)}
    assert pairs == {(u, v) for u, v in g.edges} | {(v, u) for u, v in g.edges}
    np.testing.assert_array_equal(data.nodes, [[0, 1], [1, 1], [2, 1], [3, 1]])
    assert data.nodes.dtype == np.float32  # networkx floats arrive as float64
    assert data.edges.shape == (8, 2) and data.node_targets.ravel().tolist() == [0, 1, 0, 1]
    np.testing.assert_array_equal(data.graph_targets, [[3.0, -1.0]])


def test_directed_graphs_and_self_loops_keep_their_edges():
    d = nx.DiGraph([(0, 1), (1, 2)])
    nx.set_node_attributes(d, 1.0, "x")
    u = nx.Graph([(0, 0), (0, 1)])
    nx.set_node_attributes(u, 2.0, "x")
    data = GraphDataset.from_graphs([d, u])
    assert data.n_edge.tolist() == [2, 3]  # directed as given; the self-loop once
    assert data.nodes.shape == (5, 1)


def test_getitem_round_trips_through_graphs_tuples():
    g = _triangle_with_tail()
    data = GraphDataset.from_graphs([g, nx.relabel_nodes(g, {"d": "e"}), g],
                                    edge_features="w", graph_target="y")
    one = data[1]
    assert isinstance(one, jraph.GraphsTuple)
    assert one.n_node.tolist() == [4] and one.senders.max() < 4  # local indices
    np.testing.assert_array_equal(one.globals, data.graph_targets[1:2])
    np.testing.assert_array_equal(data[-1].nodes, data[2].nodes)
    assert len(data) == 3 and len(list(data)) == 3
    again = GraphDataset.from_graphs(list(data))  # globals back as graph targets
    for field in ("nodes", "edges", "senders", "receivers", "n_node", "n_edge",
                  "graph_targets"):
        np.testing.assert_array_equal(getattr(again, field), getattr(data, field))
    # a batched GraphsTuple holds several graphs
    batched = GraphDataset.from_graphs([jraph.batch_np([data[0], data[1]]), data[2]])
    np.testing.assert_array_equal(batched.senders, data.senders)
    with pytest.raises(IndexError, match="graph 3 is out of range for 3 graphs"):
        data[3]
    with pytest.raises(TypeError, match="subset"):
        data[0:2]


def test_targets_given_beside_the_graphs_and_node_targets_of():
    g = _triangle_with_tail()
    data = GraphDataset.from_graphs([g, g], node_targets=[np.arange(4), np.arange(4) + 4],
                                    graph_targets=[1.0, 2.0])
    assert data.graph_targets.shape == (2, 1) and data.node_targets.shape == (8, 1)
    np.testing.assert_array_equal(data.node_targets_of(1).ravel(), [4, 5, 6, 7])


@pytest.mark.parametrize("graphs, kwargs, message", [
    ([nx.path_graph(3)], {}, r"graph 0: node 0 has no attribute 'x'; set node_features="),
    ([object()], {}, r"graph 0: expected a jraph.GraphsTuple, a networkx graph or a dict"),
    ([{"nodes": np.ones((2, 1))}], {}, r"graph 0: the dict lacks \['receivers', 'senders'\]"),
    ([{"nodes": np.ones((2, 1)), "senders": [0], "receivers": [1]},
      {"nodes": np.ones((2, 3)), "senders": [0], "receivers": [1]}], {},
     r"graph 1: nodes has shape \(3,\) per row, graph 0 has \(1,\)"),
    ([{"nodes": np.ones((2, 1)), "senders": [0], "receivers": [1], "graph_targets": [1.0]},
      {"nodes": np.ones((2, 1)), "senders": [0], "receivers": [1]}], {},
     r"graph 1 has no graph_targets but graph 0 has"),
    ([{"nodes": np.ones((2, 1)), "senders": [0], "receivers": [5]}], {},
     r"graph 0: receivers\[0\] = 5 is out of range for its 2 nodes"),
    ([{"nodes": np.ones((2, 1)), "senders": [0], "receivers": [1]}],
     {"graph_targets": [1.0, 2.0]}, r"graph_targets has 2 rows for 1 graphs"),
])
def test_bad_graphs_are_one_line(graphs, kwargs, message):
    with pytest.raises(ValueError, match=message) as err:
        GraphDataset.from_graphs(graphs, **kwargs)
    assert "\n" not in str(err.value)


def test_split_is_a_partition():
    data = GraphDataset.from_graphs([{"nodes": np.full((1, 1), i, np.float32), "senders": [],
                                      "receivers": []} for i in range(20)])
    parts = data.split((0.6, 0.2, 0.2), seed=3)
    seen = np.concatenate([parts[k].nodes.ravel() for k in ("train", "val", "test")])
    assert [len(parts[k]) for k in ("train", "val", "test")] == [12, 4, 4]
    assert sorted(seen.tolist()) == list(range(20))
    with pytest.raises(ValueError, match="summing to 1"):
        data.split((0.5, 0.2, 0.2))


def readme_example() -> str:
    text = README.read_text()
    match = re.search(r"<!-- byod-example[^>]*-->\n```python\n(.*?)```", text, re.S)
    assert match, "README.md lost its byod-example block"
    return match.group(1)


def test_readme_example_runs_in_about_twenty_lines(readme_example_run):
    code = readme_example()
    assert len([line for line in code.splitlines() if line.strip()]) <= 22
    namespace, printed = readme_example_run  # the example, exec'd (tests/conftest.py)
    result = namespace["result"]
    [run] = result.runs
    assert np.isfinite(run["best_val"]) and np.isfinite(run["test"])
    assert len(namespace["data"]) == 40
    assert "[12]" in printed  # data[0].n_node printed
