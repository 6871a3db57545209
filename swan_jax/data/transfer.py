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

Variants (`variant=`, default "paper"):

* "paper": the paper's text, as above.
* "authors": the data sets the authors released (`graph_transfer/data.zip` of their
  repository), for a like-for-like comparison with their figure. In 11 of their 12 sets the
  label *copies* the source's value instead of swapping it: the source's label stays 1, the
  target's is 1, every other node keeps its input (only `line_50` swaps). Features are
  uniform in [0, 1). Their "line" of distance k has k nodes, i.e. k - 1 hops (their rings
  have k hops). Kept from the paper variant: no self-loops (their SWAN drops the self-loops
  of their line before use; their ADGN / GIN / SAGE see them), unique edges, our node order.
  Distance k (their name) still means k layers / SWAN steps in the experiments.
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np

from swan_jax.data.dataset import GraphDataset
from swan_jax.data.download import default_cache_dir
from swan_jax.graph import networkx_edges

TOPOLOGIES = ("line", "ring", "crossed-ring")
SOURCE = 1
TARGET = 0
SPLITS = ("train", "val", "test")
DEFAULT_SEEDS = (1234, 2345, 3456)
DEFAULT_SIZES = (1000, 100, 100)
FEATURE_HIGH = 0.5  # paper variant; the authors' variant draws from [0, 1)
VARIANTS = ("paper", "authors")
AUTHORS_FEATURE_HIGH = 1.0


def _check(topology: str, distance: int, variant: str = "paper") -> None:
    if topology not in TOPOLOGIES:
        raise ValueError(f"unknown graph-transfer topology {topology!r}; "
                         f"valid ones: {', '.join(TOPOLOGIES)}")
    if variant not in VARIANTS:
        raise ValueError(f"unknown graph-transfer variant {variant!r}; "
                         f"valid ones: {', '.join(VARIANTS)}")
    if isinstance(distance, bool) or int(distance) != distance or distance < 1:
        raise ValueError(f"distance must be an integer >= 1, got {distance!r}")
    if variant == "authors" and topology == "line" and distance < 2:
        raise ValueError(f"the authors' line of distance k has k - 1 hops: distance must be "
                         f">= 2, got {distance!r}")


def hops(topology: str, distance: int, variant: str = "paper") -> int:
    """Source-target hops of a data set named by `distance` (k, also the number of layers).

    k for every topology in the paper variant; the authors' line has k - 1 (see the module
    docstring).
    """
    _check(topology, distance, variant)
    k = int(distance)
    return k - 1 if variant == "authors" and topology == "line" else k


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


def beta_matters(topology: str, distance: int, *, variant: str = "paper") -> bool:
    """Whether SWAN's space term `beta Psi` can change anything on this data set.

    `Psi = (A_tilde - A_tilde^T) X (Z + Z^T)` with `A_tilde = D^-1 A` vanishes exactly on
    a regular graph (every edge weighs `1/deg - 1/deg = 0`): the ring (and a crossed ring
    without chords, k <= 2). There, grid points that differ only in beta train identically
    (same seeds, same numbers), so one of them can stand for all.
    """
    graph = transfer_graph(topology, hops(topology, distance, variant))
    return len({d for _, d in graph.degree()}) > 1


def make_transfer_dataset(topology: str, distance: int, num_graphs: int,
                          seed: int, *, variant: str = "paper") -> GraphDataset:
    """`num_graphs` graphs of one topology, features drawn from `np.random.default_rng(seed)`.

    `nodes` and `node_targets` are `[num_graphs * n, 1]`; `variant` ("paper" or "authors")
    picks the features' range, the label rule and the line's length (module docstring).
    """
    _check(topology, distance, variant)
    if num_graphs < 0:
        raise ValueError(f"num_graphs must be >= 0, got {num_graphs}")
    graph = transfer_graph(topology, hops(topology, distance, variant))
    n = graph.number_of_nodes()
    senders, receivers = networkx_edges(graph)  # both directions, sorted
    rng = np.random.default_rng(seed)
    high = FEATURE_HIGH if variant == "paper" else AUTHORS_FEATURE_HIGH
    x = rng.uniform(0.0, high, size=(num_graphs, n)).astype(np.float32)
    x[:, SOURCE] = 1.0
    x[:, TARGET] = 0.0
    y = x.copy()
    y[:, TARGET] = 1.0
    if variant == "paper":  # swap; the authors' sets keep the source's 1 (a copy)
        y[:, SOURCE] = 0.0
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


def load_transfer(topology: str, distance: int, cache_dir: str | Path | None = None,
                  seeds: tuple[int, int, int] = DEFAULT_SEEDS,
                  sizes: tuple[int, int, int] = DEFAULT_SIZES, *,
                  variant: str = "paper") -> dict[str, GraphDataset]:
    """Train / val / test sets (`sizes` graphs, one seed per split), cached as `.npz`.

    The cache lives under `cache_dir` (default: `$SWAN_CACHE_DIR`, else the
    user cache folder's `processed/`: `swan_jax.data.download.default_cache_dir`) in
    `transfer/`, one file per split named after topology, distance, size and seed (and the
    variant, when it is not "paper"); a missing, stale or unreadable file is regenerated.
    """
    _check(topology, distance, variant)
    if len(seeds) != len(SPLITS) or len(sizes) != len(SPLITS):
        raise ValueError(f"need one seed and one size per split {SPLITS}")
    root = default_cache_dir(cache_dir) / "transfer"
    prefix = "" if variant == "paper" else f"{variant}_"
    out = {}
    for split, seed, size in zip(SPLITS, seeds, sizes, strict=True):
        name = f"{prefix}{topology}_k{int(distance)}_{split}_n{int(size)}_seed{int(seed)}.npz"
        cached = GraphDataset.load(root / name)
        if cached is None:
            data = make_transfer_dataset(topology, distance, int(size), int(seed),
                                         variant=variant)
            data.save(root / name)
        else:
            data = cached[0]
        out[split] = data
    return out
