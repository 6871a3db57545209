"""Padded batches with a fixed budget, carrying their gather-only SWAN layout.

Every batch of a data set has the same array shapes, so a jitted step compiles once per
epoch (not once per batch); masks keep the padding out of losses and metrics. The layout
is `jraph.pad_with_graphs`'s: real graphs first, then one padding graph that holds every
padding node and edge (padding edges are self-loops on the first padding node), then
empty graphs.

`budget_for` also fixes the static slot layout of `swan_jax.prepare_graph` (slot width,
overflow rows, listed pairs), and every batch's `graph` is a `PreparedGraph`: the
GraphsTuple fields plus the layout, built once per batch on the host. Models read
`.nodes` / `.n_node` as before; SWAN and the baselines aggregate by gathers only.

Padding: a budget sits at a quantile of the sizes of random batches of `batch_size`
graphs (`fill_quantile`), not at a multiple of the mean, and packing closes a batch
early when the next graph would overflow it. So real nodes fill most of every batch
(over 90% on Peptides-func) at the price of a batch sometimes holding a graph or two
fewer than `batch_size`; there is still one shape, one compilation per epoch.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any, NamedTuple

import jax
import jraph
import numpy as np

from swan_jax.data.dataset import GraphDataset
from swan_jax.graph import (
    Closure,
    PreparedGraph,
    choose_slot_width,
    closure_slots,
    is_graph,
    overflow_rows,
    prepared_from_closure,
)


class Batch(NamedTuple):
    """One padded batch (NumPy or JAX arrays).

    Attributes:
      graph: `PreparedGraph` (a `GraphsTuple`'s fields plus the slot layout; a plain
        `GraphsTuple` for a `Budget` without `slot_width`) with `nodes [n_node, F]`,
        `edges [n_edge, Fe]` or None, global `senders`/`receivers`,
        `n_node`/`n_edge` `[n_graph]`.
      node_targets: `[n_node, T]` or None.
      graph_targets: `[n_graph, T]` or None.
      node_mask: `[n_node]` True on real nodes.
      graph_mask: `[n_graph]` True on real graphs.
    """

    graph: PreparedGraph | jraph.GraphsTuple
    node_targets: np.ndarray | jax.Array | None  # NumPy on the host, JAX on the device
    graph_targets: np.ndarray | jax.Array | None
    node_mask: np.ndarray | jax.Array
    graph_mask: np.ndarray | jax.Array


@dataclasses.dataclass(frozen=True)
class Budget:
    """Static batch shape: nodes, edges and graphs (padding included), and the slot layout
    of `prepare_graph`: slot width, overflow rows and listed pairs (`slot_width=None`:
    batches carry plain GraphsTuples)."""

    n_node: int
    n_edge: int
    n_graph: int
    slot_width: int | None = None
    n_overflow: int = 0
    n_pair: int = 0


class GraphSizes(NamedTuple):
    """What one graph takes of a budget, per graph `[G]`."""

    nodes: np.ndarray
    edges: np.ndarray
    overflow: np.ndarray
    pairs: np.ndarray


# Samples of random batches that `budget_for` sizes a budget from, and the granularity of
# a budget's node / edge counts.
SIZE_SAMPLES = 256
ROUND_TO = 64


def _round_up(value: float, multiple: int = ROUND_TO) -> int:
    return int(math.ceil(value / multiple) * multiple)


class DataClosure(NamedTuple):
    """A data set's closure slots (global node ids), cut per graph by `slot_offsets`."""

    slots: Closure
    slot_offsets: np.ndarray  # [G + 1]
    degree: np.ndarray  # [sum n_node]
    pairs: np.ndarray  # [G] listed pairs per graph


def data_closure(dataset: GraphDataset) -> DataClosure:
    """The closure of every graph of a data set, computed once (cached on it)."""
    cached = dataset.__dict__.get("_swan_closure")
    if cached is not None:
        return cached
    total = int(dataset.n_node.sum())
    shift = np.repeat(dataset.node_offsets[:-1], dataset.n_edge)
    slots = closure_slots(dataset.senders + shift, dataset.receivers + shift, total)
    node_graph = np.repeat(np.arange(len(dataset)), dataset.n_node)
    slot_graph = node_graph[slots.owner]
    per_graph = np.bincount(slot_graph, minlength=len(dataset))
    pairs = np.bincount(slot_graph[slots.forward > 0], minlength=len(dataset))
    result = DataClosure(slots, np.concatenate([[0], np.cumsum(per_graph)]),
                          slots.degree(total), pairs)
    dataset.__dict__["_swan_closure"] = result
    return result


def _batch_closure(dataset: GraphDataset, graphs: np.ndarray, padding_edges: int) -> Closure:
    """The closure of a batch of `graphs` (cut from the data set's, relabelled), plus the
    padding node's self-loops."""
    data = data_closure(dataset)
    offsets, node_offsets = data.slot_offsets, dataset.node_offsets
    rows = np.concatenate([np.arange(offsets[g], offsets[g + 1]) for g in graphs]
                          + [np.zeros(0, np.int64)])
    counts = offsets[graphs + 1] - offsets[graphs]
    node_shift = np.cumsum(dataset.n_node[graphs]) - dataset.n_node[graphs] - node_offsets[graphs]
    slot_shift = np.cumsum(counts) - counts - offsets[graphs]
    node_shift, slot_shift = np.repeat(node_shift, counts), np.repeat(slot_shift, counts)
    s = data.slots
    parts = [s.owner[rows] + node_shift, s.neighbour[rows] + node_shift, s.forward[rows],
             s.backward[rows], s.mirror[rows] + slot_shift]
    if padding_edges:  # self-loops on the first padding node: one slot, its own mirror
        pad = int(dataset.n_node[graphs].sum())
        extra = (pad, pad, padding_edges, padding_edges, rows.shape[0])
        parts = [np.append(p, e) for p, e in zip(parts, extra, strict=True)]
    return Closure(*parts)


def graph_sizes(dataset: GraphDataset, slot_width: int | None) -> GraphSizes:
    """Nodes, edges, overflow rows (at `slot_width`) and listed pairs of every graph."""
    cache = dataset.__dict__.setdefault("_swan_sizes", {})  # packing asks every epoch
    if slot_width in cache:
        return cache[slot_width]
    if slot_width is None:
        zeros = np.zeros(len(dataset), np.int64)
        sizes = GraphSizes(dataset.n_node, dataset.n_edge, zeros, zeros)
    else:
        degree, pairs = data_closure(dataset)[2:]
        node_graph = np.repeat(np.arange(len(dataset)), dataset.n_node)
        overflow = np.bincount(node_graph, weights=overflow_rows(degree, slot_width),
                               minlength=len(dataset)).astype(np.int64)
        sizes = GraphSizes(dataset.n_node, dataset.n_edge, overflow, pairs)
    cache[slot_width] = sizes
    return sizes


def _batch_totals(sizes: np.ndarray, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """Totals of `SIZE_SAMPLES` random batches of `batch_size` graphs (without repeats)."""
    count = sizes.shape[0]
    samples = []
    for _ in range(max(1, SIZE_SAMPLES * batch_size // max(count, 1))):
        order = rng.permutation(count)
        whole = count // batch_size * batch_size
        samples.append(sizes[order[:whole]].reshape(-1, batch_size).sum(axis=1))
    return np.concatenate(samples)[:SIZE_SAMPLES]


def budget_for(datasets: GraphDataset | list[GraphDataset], batch_size: int,
               slack: float | None = None, *, fill_quantile: float = 0.5,
               slot_width: int | None = None, prepared: bool = True) -> Budget:
    """A budget for batches of up to `batch_size` graphs of `datasets`.

    By default each count (nodes, edges, overflow rows, listed pairs) sits at the
    `fill_quantile` of its total over random batches of `batch_size` graphs, so packing
    (which closes a batch when the next graph would not fit) fills most of every batch;
    every single graph always fits. `slack` (e.g. 1.15) instead sizes nodes and edges as
    `batch_size` graphs of average size times `slack`, as earlier versions did.

    Args:
      datasets: every split that will be batched with this budget.
      batch_size: graphs per batch, at most.
      slack: see above; None for the quantile rule.
      fill_quantile: quantile of random batch totals to size the budget at.
      slot_width: static slot width of the prepared layout; default: chosen from the
        closure degrees of every node (`swan_jax.graph.prepared.choose_slot_width`).
      prepared: False for plain GraphsTuple batches (no layout; the segment-sum path).
    """
    datasets = datasets if isinstance(datasets, list) else [datasets]
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if prepared and slot_width is None:
        slot_width = choose_slot_width(np.concatenate([data_closure(d).degree for d in datasets]))
    sizes = [graph_sizes(d, slot_width if prepared else None) for d in datasets]
    stacked = GraphSizes(*(np.concatenate(parts).astype(np.int64) for parts in zip(*sizes,
                                                                                    strict=True)))
    size = min(batch_size, len(stacked.nodes))
    rng = np.random.default_rng(0)
    totals: list[float]
    if size == len(stacked.nodes):  # the whole set fits in one batch: exactly that
        totals = [int(part.sum()) for part in stacked]
    elif slack is not None:
        totals = [size * part.mean() * slack for part in stacked]
    else:
        totals = [float(np.quantile(_batch_totals(part, size, rng), fill_quantile))
                  for part in stacked]
    nodes = max(totals[0], stacked.nodes.max(initial=0)) + 1  # + the padding node
    edges = max(totals[1], stacked.edges.max(initial=0), 1)
    overflow = max(totals[2], stacked.overflow.max(initial=0))
    pairs = max(totals[3], stacked.pairs.max(initial=0)) + 1  # + the padding self-loops
    return Budget(n_node=_round_up(nodes), n_edge=_round_up(edges), n_graph=batch_size + 1,
                  slot_width=int(slot_width) if prepared and slot_width is not None else None,
                  n_overflow=int(math.ceil(overflow)) if prepared else 0,
                  n_pair=_round_up(pairs) if prepared else 0)


def eval_batch_size(split_sizes: list[int], batch_size: int) -> int:
    """Graphs per evaluation batch for splits of `split_sizes` graphs: the fewest steps
    that hold the smallest split, evened out (`ceil(S / ceil(S / batch_size))`).

    Evaluation pads its last batch; a split smaller than the training batch would
    otherwise take a whole training batch of slots (GraphProp's CPU protocol: 160 and 320
    graphs in batches of 512, 1,024 slots for 480 graphs), and LRGB's 2,331 graphs take
    37 batches of 63 instead of 37 of 64. At most `batch_size`; 1 without splits.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    smallest = min((s for s in split_sizes if s > 0), default=0)
    if smallest == 0:
        return 1
    return math.ceil(smallest / math.ceil(smallest / batch_size))


def pack(dataset: GraphDataset, order: np.ndarray, batch_size: int, budget: Budget
         ) -> list[np.ndarray]:
    """Split `order` into runs of graphs that fit the budget (at most `batch_size` each)."""
    sizes = graph_sizes(dataset, budget.slot_width)
    limits = (budget.n_node - 1, budget.n_edge, budget.n_overflow, max(budget.n_pair - 1, 0))
    names = ("nodes", "edges", "overflow rows", "listed pairs")
    for part, limit, name in zip(sizes, limits, names, strict=True):
        if budget.slot_width is None and name in ("overflow rows", "listed pairs"):
            continue
        if np.any(part > limit):
            g = int(np.flatnonzero(part > limit)[0])
            raise ValueError(f"graph {g} ({int(dataset.n_node[g])} nodes, "
                             f"{int(dataset.n_edge[g])} edges, {int(part[g])} {name}) does "
                             f"not fit the batch budget {budget}")
    groups, start = [], 0
    u0 = u1 = u2 = u3 = 0
    l0, l1, l2, l3 = limits
    batch_size = min(batch_size, budget.n_graph - 1)  # one graph slot stays for the padding
    # Plain Python ints (one list per epoch): the greedy loop runs once per graph, and
    # NumPy scalar indexing would cost most of an epoch's host time.
    needs = np.stack(sizes, axis=1)[np.asarray(order)].tolist()
    for i, (n0, n1, n2, n3) in enumerate(needs):
        full = u0 + n0 > l0 or u1 + n1 > l1 or u2 + n2 > l2 or u3 + n3 > l3
        if i - start == batch_size or full:
            groups.append(order[start:i])
            start, u0, u1, u2, u3 = i, 0, 0, 0, 0
        u0, u1, u2, u3 = u0 + n0, u1 + n1, u2 + n2, u3 + n3
    if start < len(order):
        groups.append(order[start:])
    return groups


def make_batch(dataset: GraphDataset, graphs: np.ndarray, budget: Budget) -> Batch:
    """Gather `graphs` into one padded batch of shape `budget` (with its slot layout)."""
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
    if budget.slot_width is not None:
        # The data set was validated when it was built and the batch layout is valid by
        # construction; the closure is cut from the data set's (computed once).
        closure = _batch_closure(dataset, np.asarray(graphs, np.int64),
                                 budget.n_edge - real_edges)
        graph = prepared_from_closure(graph, closure, slot_width=budget.slot_width,
                                      num_overflow=budget.n_overflow, num_pairs=budget.n_pair)
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
    fields: list[Any] = [None if parts[0] is None else _stack(parts)
                         for parts in zip(*batches, strict=True)]
    return Batch(*fields)


def _stack(parts):
    if is_graph(parts[0]):
        return type(parts[0])(*(None if f[0] is None else np.stack(f)
                                for f in zip(*parts, strict=True)))
    return np.stack(parts)


def padding_share(batch: Batch) -> float:
    """Share of the batch's node rows that are padding."""
    mask = np.asarray(batch.node_mask)
    return 1.0 - float(mask.sum()) / max(mask.size, 1)


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
