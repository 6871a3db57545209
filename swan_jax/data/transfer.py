"""Graph transfer data sets (paper Sec. "Graph Transfer", Appendix D.1).

A value has to travel `k` hops from a source node to a target node. Every graph of a data
set has the same topology; only the random node features differ.

* Features: one channel, uniform in [0, 0.5); then the source's value is set to 1 and the
  target's to 0.
* Label (`node_targets`, `[N, 1]`): the input with the source's and the target's values
  swapped (target 1, source 0); every other node keeps its input value.
* Node indices: the target is node `TARGET = 0`, the source is node `SOURCE = 1`.
* Graphs are undirected, stored as both edge directions, without self-loops.

Topologies (`k` = `distance`; "position" p counts the steps from the source along the
line or ring, so the source is at position 0 and the target at position k; position p is
node `p + 1` for p < k, node 0 for p = k, and node p for p > k):

* `line`: a path of k + 1 nodes, source and target at its two ends
  (nodes 1 - 2 - ... - k - 0).
* `ring`: a cycle of n = 2k nodes, target opposite the source
  (nodes 1 - 2 - ... - k - 0 - k+1 - ... - 2k-1 - back to 1).
* `crossed-ring`: the ring plus the "crosses" of di Giovanni et al. (2023, "On
  over-squashing in message passing neural networks"), as in the SWAN authors' data:
  position i (1 <= i <= k-1) on one side mirrors position n - i on the other side; between
  consecutive mirror pairs (i, n-i) and (i+1, n-i-1), for i = 1 ... k-2, both diagonals are
  added, i.e. the chords  i -- n-i-1  and  i+1 -- n-i  (positions). Every edge, ring or
  chord, joins positions whose distances from the source differ by exactly one, so the
  source-target distance stays k. There are no chords for k <= 2 (2(k-2) chords in all).

Differences from the SWAN authors' generator, on purpose: their line graph with "distance k"
has k nodes (k - 1 hops) and self-loops; here it has k hops and no self-loops, as the paper
describes. Their crossed ring lists two ring edges twice; here edges are unique. Their
features are uniform in [0, 1); here [0, 0.5) as the paper states.
"""

from __future__ import annotations

import os
from pathlib import Path

import networkx as nx
import numpy as np

from swan_jax.data.dataset import GraphDataset
from swan_jax.graphs import networkx_edges

TOPOLOGIES = ("line", "ring", "crossed-ring")
SOURCE = 1
TARGET = 0
SPLITS = ("train", "val", "test")
DEFAULT_SEEDS = (1234, 2345, 3456)
DEFAULT_SIZES = (1000, 100, 100)
FEATURE_HIGH = 0.5


def _check(topology: str, distance: int) -> None:
    if topology not in TOPOLOGIES:
        raise ValueError(f"unknown graph-transfer topology {topology!r}; "
                         f"valid ones: {', '.join(TOPOLOGIES)}")
    if isinstance(distance, bool) or int(distance) != distance or distance < 1:
        raise ValueError(f"distance must be an integer >= 1, got {distance!r}")


def _node(position: int, distance: int) -> int:
    """Node index of a position (steps from the source along the line / ring)."""
    if position < distance:
        return position + 1
    if position == distance:
        return TARGET
    return position


def transfer_graph(topology: str, distance: int) -> nx.Graph:
    """The (feature-less) topology: an undirected `nx.Graph` on nodes 0 ... n-1."""
    _check(topology, distance)
    k = int(distance)
    n = k + 1 if topology == "line" else 2 * k
    pairs = [(p, p + 1) for p in range(n - 1)]
    if topology != "line":
        pairs.append((n - 1, 0))
    if topology == "crossed-ring":
        for i in range(1, k - 1):
            pairs.append((i, n - i - 1))
            pairs.append((i + 1, n - i))
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from((_node(a, k), _node(b, k)) for a, b in pairs if a != b)
    return graph


def make_transfer_dataset(topology: str, distance: int, num_graphs: int,
                          seed: int) -> GraphDataset:
    """`num_graphs` graphs of one topology, features drawn from `np.random.default_rng(seed)`."""
    _check(topology, distance)
    if num_graphs < 0:
        raise ValueError(f"num_graphs must be >= 0, got {num_graphs}")
    graph = transfer_graph(topology, distance)
    n = graph.number_of_nodes()
    senders, receivers = networkx_edges(graph)  # both directions, sorted
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, FEATURE_HIGH, size=(num_graphs, n)).astype(np.float32)
    x[:, SOURCE] = 1.0
    x[:, TARGET] = 0.0
    y = x.copy()
    y[:, SOURCE] = 0.0
    y[:, TARGET] = 1.0
    return GraphDataset(
        nodes=x.reshape(-1, 1),
        edges=None,
        senders=np.tile(senders, num_graphs),
        receivers=np.tile(receivers, num_graphs),
        n_node=np.full(num_graphs, n, np.int32),
        n_edge=np.full(num_graphs, len(senders), np.int32),
        node_targets=y.reshape(-1, 1),
        graph_targets=None,
    )


def _cache_root(cache_dir: str | Path | None) -> Path:
    if cache_dir is None:
        cache_dir = os.environ.get("SWAN_CACHE_DIR") or "cache"
    return Path(cache_dir)


def load_transfer(topology: str, distance: int, cache_dir: str | Path | None = None,
                  seeds: tuple[int, int, int] = DEFAULT_SEEDS,
                  sizes: tuple[int, int, int] = DEFAULT_SIZES) -> dict[str, GraphDataset]:
    """Train / val / test sets (`sizes` graphs, one seed per split), cached as `.npz`.

    The cache lives under `cache_dir` (default: `$SWAN_CACHE_DIR`, else `cache/`) in
    `transfer/`, one file per split named after topology, distance, size and seed; a missing,
    stale or unreadable file is regenerated.
    """
    _check(topology, distance)
    if len(seeds) != len(SPLITS) or len(sizes) != len(SPLITS):
        raise ValueError(f"need one seed and one size per split {SPLITS}")
    root = _cache_root(cache_dir) / "transfer"
    out = {}
    for split, seed, size in zip(SPLITS, seeds, sizes, strict=True):
        path = root / f"{topology}_k{int(distance)}_{split}_n{int(size)}_seed{int(seed)}.npz"
        cached = GraphDataset.load(path)
        if cached is None:
            data = make_transfer_dataset(topology, distance, int(size), int(seed))
            data.save(path)
        else:
            data = cached[0]
        out[split] = data
    return out
