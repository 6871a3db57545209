"""benchmarks/graphprop_adgn_differential.py: the vectorised stand-in for PNA's
all-pairs shortest paths gives PNA's distances (the data comparison rests on it)."""

from __future__ import annotations

import math

import numpy as np

from benchmarks import graphprop_adgn_differential as gad
from swan_jax.data import graphprop


def _pna_loops(adj, inf_sub=math.inf):
    """PNA's `graph_algorithms.all_pairs_shortest_paths` as written there: three loops."""
    a = np.array(adj, dtype=np.float64)
    n = a.shape[0]
    for i in range(n):
        for j in range(n):
            if a[i][j] == 0:
                a[i][j] = math.inf
            if i == j:
                a[i][j] = 0
    for k in range(n):
        for i in range(n):
            for j in range(n):
                a[i][j] = min(a[i][j], a[i][k] + a[k][j])
    return np.where(a == math.inf, inf_sub, a)


def test_the_fast_shortest_paths_equal_pnas_loops_and_our_bfs():
    fast = gad._fast_apsp()
    rng = np.random.default_rng(0)
    for family in ("caveman", "tree", "erdos_renyi", "lobster"):  # caveman: disconnected
        adj, _ = graphprop.draw_graph(9, rng, family=family)
        a = adj.astype(np.float64)
        for inf_sub in (math.inf, 0, -1):
            np.testing.assert_array_equal(fast(a, inf_sub), _pna_loops(a, inf_sub))
        np.testing.assert_array_equal(fast(a, -1), graphprop.shortest_path_lengths(adj))


def test_the_fast_shortest_paths_see_a_missing_edge():
    fast = gad._fast_apsp()
    path = np.diag(np.ones(4), 1) + np.diag(np.ones(4), -1)  # a line of 5 nodes
    assert fast(path)[0, 4] == 4
    path[2, 3] = path[3, 2] = 0
    assert math.isinf(fast(path)[0, 4])
