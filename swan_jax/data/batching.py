"""Padded jraph batches with a fixed node / edge / graph budget.

Every batch of a data set has the same array shapes, so a jitted step compiles once per
epoch (not once per batch); masks keep the padding out of losses and metrics. The layout
is `jraph.pad_with_graphs`'s: real graphs first, then one padding graph that holds every
padding node and edge (padding edges are self-loops on the first padding node), then
empty graphs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import NamedTuple

import jraph
import numpy as np

from swan_jax.data.dataset import GraphDataset


class Batch(NamedTuple):
    """One padded batch (NumPy or JAX arrays).

    Attributes:
      graph: `GraphsTuple` with `nodes [n_node, F]`, `edges [n_edge, Fe]` or None,
        global `senders`/`receivers`, `n_node`/`n_edge` `[n_graph]`.
      node_targets: `[n_node, T]` or None.
      graph_targets: `[n_graph, T]` or None.
      node_mask: `[n_node]` True on real nodes.
      graph_mask: `[n_graph]` True on real graphs.
    """

    graph: jraph.GraphsTuple
    node_targets: np.ndarray | None
    graph_targets: np.ndarray | None
    node_mask: np.ndarray
    graph_mask: np.ndarray


@dataclasses.dataclass(frozen=True)
class Budget:
    """Static batch shape: nodes, edges and graphs, padding included."""

    n_node: int
    n_edge: int
    n_graph: int


def _round_up(value: float, multiple: int = 64) -> int:
    return int(math.ceil(value / multiple) * multiple)


def budget_for(datasets: GraphDataset | list[GraphDataset], batch_size: int,
               slack: float = 1.15) -> Budget:
    """A budget that fits `batch_size` graphs of average size (times `slack`).

    Greedy packing closes a batch early when the next graph would not fit, so a budget
    near the mean wastes little padding and every graph always fits.
    """
    datasets = datasets if isinstance(datasets, list) else [datasets]
    n_node = np.concatenate([d.n_node for d in datasets])
    n_edge = np.concatenate([d.n_edge for d in datasets])
    size = min(batch_size, len(n_node))
    nodes = max(size * n_node.mean() * slack, n_node.max() * 1.0) + 1
    edges = max(size * n_edge.mean() * slack, n_edge.max() * 1.0)
    if size == len(n_node):  # the whole set fits in one batch: no slack needed
        nodes, edges = n_node.sum() + 1, n_edge.sum()
    return Budget(n_node=_round_up(nodes), n_edge=_round_up(max(edges, 1)), n_graph=batch_size + 1)


def pack(dataset: GraphDataset, order: np.ndarray, batch_size: int, budget: Budget
         ) -> list[np.ndarray]:
    """Split `order` into runs of graphs that fit the budget (at most `batch_size` each)."""
    if np.any(dataset.n_node + 1 > budget.n_node) or np.any(dataset.n_edge > budget.n_edge):
        g = int(np.flatnonzero((dataset.n_node + 1 > budget.n_node)
                               | (dataset.n_edge > budget.n_edge))[0])
        raise ValueError(f"graph {g} ({int(dataset.n_node[g])} nodes, {int(dataset.n_edge[g])} "
                         f"edges) does not fit the batch budget {budget}")
    groups, start = [], 0
    nodes = edges = 0
    batch_size = min(batch_size, budget.n_graph - 1)  # one graph slot stays for the padding
    for i, g in enumerate(order):
        n, e = int(dataset.n_node[g]), int(dataset.n_edge[g])
        if i - start == batch_size or nodes + n + 1 > budget.n_node or edges + e > budget.n_edge:
            groups.append(order[start:i])
            start, nodes, edges = i, 0, 0
        nodes, edges = nodes + n, edges + e
    if start < len(order):
        groups.append(order[start:])
    return groups


def make_batch(dataset: GraphDataset, graphs: np.ndarray, budget: Budget) -> Batch:
    """Gather `graphs` into one padded batch of shape `budget`."""
    n_off, e_off = dataset.node_offsets, dataset.edge_offsets
    node_rows = np.concatenate([np.arange(n_off[g], n_off[g + 1]) for g in graphs]
                               + [np.zeros(0, np.int64)])  # no graphs: an all-padding batch
    edge_rows = np.concatenate([np.arange(e_off[g], e_off[g + 1]) for g in graphs]
                               + [np.zeros(0, np.int64)])
    n_node, n_edge = dataset.n_node[graphs], dataset.n_edge[graphs]
    real_nodes, real_edges, real_graphs = len(node_rows), len(edge_rows), len(graphs)
    shift = np.repeat(np.cumsum(n_node) - n_node, n_edge)

    def pad_rows(arr: np.ndarray | None, rows: np.ndarray, total: int):
        if arr is None:
            return None
        out = np.zeros((total,) + arr.shape[1:], arr.dtype)
        out[: len(rows)] = arr[rows]
        return out

    senders = np.full(budget.n_edge, real_nodes, np.int32)
    receivers = np.full(budget.n_edge, real_nodes, np.int32)
    senders[:real_edges] = dataset.senders[edge_rows] + shift
    receivers[:real_edges] = dataset.receivers[edge_rows] + shift
    counts_node = np.zeros(budget.n_graph, np.int32)
    counts_edge = np.zeros(budget.n_graph, np.int32)
    counts_node[:real_graphs], counts_edge[:real_graphs] = n_node, n_edge
    counts_node[real_graphs] = budget.n_node - real_nodes
    counts_edge[real_graphs] = budget.n_edge - real_edges
    graph = jraph.GraphsTuple(
        nodes=pad_rows(dataset.nodes, node_rows, budget.n_node),
        edges=pad_rows(dataset.edges, edge_rows, budget.n_edge),
        senders=senders, receivers=receivers, n_node=counts_node, n_edge=counts_edge,
        globals=None,
    )
    graph_targets = None
    if dataset.graph_targets is not None:
        graph_targets = pad_rows(dataset.graph_targets, graphs, budget.n_graph)
    return Batch(
        graph=graph,
        node_targets=pad_rows(dataset.node_targets, node_rows, budget.n_node),
        graph_targets=graph_targets,
        node_mask=np.arange(budget.n_node) < real_nodes,
        graph_mask=np.arange(budget.n_graph) < real_graphs,
    )


def iterate_batches(dataset: GraphDataset, batch_size: int, budget: Budget,
                    rng: np.random.Generator | None = None) -> Iterator[Batch]:
    """Batches over the whole data set; shuffled when `rng` is given."""
    order = np.arange(len(dataset)) if rng is None else rng.permutation(len(dataset))
    for graphs in pack(dataset, order, batch_size, budget):
        yield make_batch(dataset, graphs, budget)


def stack_batches(batches: list[Batch]) -> Batch:
    """`D` batches of one budget -> one `Batch` whose arrays lead with a `[D]` axis."""
    return Batch(*(None if parts[0] is None else _stack(parts)
                   for parts in zip(*batches, strict=True)))


def _stack(parts):
    if isinstance(parts[0], jraph.GraphsTuple):
        return jraph.GraphsTuple(*(None if f[0] is None else np.stack(f)
                                   for f in zip(*parts, strict=True)))
    return np.stack(parts)


def iterate_sharded_batches(dataset: GraphDataset, batch_size: int, budget: Budget,
                            num_shards: int, rng: np.random.Generator | None = None
                            ) -> Iterator[Batch]:
    """Steps of `num_shards` sub-batches, stacked on a leading `[num_shards]` axis.

    Each sub-batch holds up to `ceil(batch_size / num_shards)` graphs within `budget`
    (the per-device budget), so a step covers about `batch_size` graphs: exactly the
    same graphs, in the same order, as `iterate_batches` with the full budget when the
    budgets never bind early. The last step is filled with all-padding sub-batches.
    """
    per_shard = math.ceil(batch_size / num_shards)
    order = np.arange(len(dataset)) if rng is None else rng.permutation(len(dataset))
    groups = pack(dataset, order, per_shard, budget)
    empty = np.zeros(0, np.int64)
    for start in range(0, len(groups), num_shards):
        step = groups[start:start + num_shards]
        step += [empty] * (num_shards - len(step))
        yield stack_batches([make_batch(dataset, graphs, budget) for graphs in step])
