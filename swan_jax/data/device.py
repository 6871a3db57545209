"""Data sets that live on the device: each step's padded batch is gathered there from ids.

`place_dataset(dataset, budget)` copies a split to the device ONCE: its node and edge
features, targets, local edge lists, and every graph's part of the gather-only layout
(`swan_jax.graph.prepared`) in *graph-local* numbering: each graph's slot rows are its node
rows followed by its overflow rows, and a slot's mirror is a flat index into that local
numbering. `assemble(data, ids, budget)` then builds, inside `jit`, exactly the `Batch`
that `swan_jax.data.batching.make_batch` builds on the host for the same graphs (same
arrays, same dtypes, same padding): the host only shuffles graph ids and packs them into
budgets (`epoch_ids`), and ships `[steps, n_graph - 1]` int32 per epoch.

Local to batch: a graph at batch position `b` starts at node `s_b` and at overflow row
`o_b`; its local row `r` becomes batch row `s_b + r` if `r < n_g` (a node row) and
`N + o_b + r - n_g` otherwise (an overflow row), `N` the budget's node count. Node ids add
`s_b`, listed pairs add the graph's first pair. Which graph a batch row belongs to is a
`searchsorted` over the batch's cumulative counts: gathers only, no scatter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, overload

import jax
import jax.numpy as jnp
import jraph
import numpy as np

from swan_jax.data.batching import Batch, Budget, data_closure, pack
from swan_jax.data.dataset import GraphDataset
from swan_jax.graph import PreparedGraph, overflow_rows
from swan_jax.graph.gather import opaque_identity


class SlotRows(NamedTuple):
    """Slot rows of every graph in local numbering: `[rows, K]` each (rows lead)."""

    neighbor: np.ndarray  # int32 local node
    mirror: np.ndarray  # int32 local flat slot
    forward: np.ndarray  # float32 A[u, v]
    backward: np.ndarray  # float32 A[v, u]
    pair: np.ndarray  # int32 local listed pair of the slot, -1 if none


class DeviceData(NamedTuple):
    """One split on the device. Per-graph arrays `[G + 1]` end with an empty filler graph
    (id `G`) that pads a step's id list; per-row arrays end with one zero row so that no
    gather reads an empty array.

    Attributes:
      nodes, edges, node_targets: `[sum n_node (+1), F]` etc. (None where the data has none).
      graph_targets: `[G + 1, T]` or None.
      senders, receivers: `[sum n_edge + 1]` int32, local to their graph.
      n_node, n_edge, n_overflow, n_pair: `[G + 1]` int32 counts per graph.
      node_start, edge_start, overflow_start, pair_start: `[G + 1]` int32 first row.
      node_slots: `SlotRows` of the node rows `[sum n_node + 1, K]`.
      overflow_slots: `SlotRows` of the overflow rows `[sum overflow + 1, K]`.
      overflow_owner: `[sum overflow + 1]` int32 local node owning each overflow row.
      has_overflow: `[sum n_node + 1]` bool; last_overflow: the node's last overflow row
        (local overflow index).
      pair_receiver, pair_sender, pair_slot: `[sum pairs + 1]` int32 (local);
        pair_count: float32.
    """

    nodes: jax.Array | None
    edges: jax.Array | None
    node_targets: jax.Array | None
    graph_targets: jax.Array | None
    senders: jax.Array
    receivers: jax.Array
    n_node: jax.Array
    n_edge: jax.Array
    n_overflow: jax.Array
    n_pair: jax.Array
    node_start: jax.Array
    edge_start: jax.Array
    overflow_start: jax.Array
    pair_start: jax.Array
    node_slots: SlotRows | None
    overflow_slots: SlotRows | None
    overflow_owner: jax.Array | None
    has_overflow: jax.Array | None
    last_overflow: jax.Array | None
    pair_receiver: jax.Array | None
    pair_sender: jax.Array | None
    pair_slot: jax.Array | None
    pair_count: jax.Array | None


@overload
def _with_zero_row(arr: np.ndarray) -> np.ndarray: ...
@overload
def _with_zero_row(arr: None) -> None: ...


def _with_zero_row(arr: np.ndarray | None) -> np.ndarray | None:
    if arr is None:
        return None
    return np.concatenate([arr, np.zeros((1,) + arr.shape[1:], arr.dtype)])


def _starts(counts: np.ndarray) -> np.ndarray:
    """`[G + 1]` first row of each graph, the filler graph's at the end."""
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)


def _empty_rows(count: int, width: int, local_row: np.ndarray, node: np.ndarray) -> SlotRows:
    """Padding slots of `count` rows: the row's own node, zero counts, their own mirror."""
    flat = local_row[:, None] * width + np.arange(width)[None, :]
    return SlotRows(np.repeat(node[:, None], width, 1).astype(np.int32), flat.astype(np.int32),
                    np.zeros((count, width), np.float32), np.zeros((count, width), np.float32),
                    np.full((count, width), -1, np.int32))


def _local_layout(dataset: GraphDataset, width: int) -> dict:
    """Every graph's slot layout in graph-local numbering (host NumPy, once per split)."""
    closure = data_closure(dataset)
    slots, n_node = closure.slots, dataset.n_node.astype(np.int64)
    total = int(n_node.sum())
    node_graph = np.repeat(np.arange(len(dataset)), n_node)
    node_local = np.arange(total) - dataset.node_offsets[:-1].astype(np.int64)[node_graph]
    extra = overflow_rows(closure.degree, width).astype(np.int64)
    first_overflow = np.concatenate([[0], np.cumsum(extra)])[:-1]
    overflow_counts = np.bincount(node_graph, weights=extra, minlength=len(dataset))
    graph_overflow = np.concatenate([[0], np.cumsum(overflow_counts)]).astype(np.int64)
    local_first = first_overflow - graph_overflow[:-1][node_graph]
    owner, neighbour = slots.owner, slots.neighbour
    index = np.arange(owner.shape[0]) - np.concatenate([[0], np.cumsum(closure.degree)])[owner]
    in_node = index < width
    slot_graph = node_graph[owner]
    local_row = np.where(in_node, node_local[owner],
                         n_node[slot_graph] + local_first[owner] + (index - width) // width)
    local_flat = local_row * width + index % width
    listed = np.flatnonzero(slots.forward > 0)
    pair_counts = np.bincount(slot_graph[listed], minlength=len(dataset))
    pair_start = np.concatenate([[0], np.cumsum(pair_counts)])
    slot_pair = np.full(owner.shape[0], -1, np.int64)
    slot_pair[listed] = np.arange(listed.shape[0]) - pair_start[slot_graph[listed]]

    node_rows = _empty_rows(total, width, node_local, node_local)
    owners = np.repeat(np.arange(total), extra)
    overflow_rows_ = _empty_rows(owners.shape[0], width,
                                 n_node[node_graph[owners]] + np.arange(owners.shape[0])
                                 - graph_overflow[:-1][node_graph[owners]], node_local[owners])
    values = (node_local[neighbour], local_flat[slots.mirror], slots.forward, slots.backward,
              slot_pair)
    col = index % width
    where_row = np.where(in_node, owner, first_overflow[owner] + (index - width) // width)
    for rows, sel in ((node_rows, in_node), (overflow_rows_, ~in_node)):
        for target, value in zip(rows, values, strict=True):
            target[where_row[sel], col[sel]] = value[sel]
    return dict(
        node_slots=node_rows, overflow_slots=overflow_rows_,
        overflow_owner=node_local[owners].astype(np.int32), has_overflow=extra > 0,
        last_overflow=np.where(extra > 0, local_first + extra - 1, 0).astype(np.int32),
        n_overflow=overflow_counts.astype(np.int32), n_pair=pair_counts.astype(np.int32),
        pair_receiver=node_local[owner[listed]].astype(np.int32),
        pair_sender=node_local[neighbour[listed]].astype(np.int32),
        pair_slot=local_flat[listed].astype(np.int32),
        pair_count=slots.forward[listed].astype(np.float32))


def host_data(dataset: GraphDataset, budget: Budget) -> DeviceData:
    """The NumPy arrays `place_dataset` puts on the device (see `DeviceData`)."""
    zero = np.zeros(1, np.int32)
    counts = {"n_node": dataset.n_node.astype(np.int32), "n_edge": dataset.n_edge.astype(np.int32)}
    layout: dict = {k: None for k in DeviceData._fields}
    if budget.slot_width is not None:
        layout.update(_local_layout(dataset, budget.slot_width))
    else:
        layout.update(n_overflow=np.zeros(len(dataset), np.int32),
                      n_pair=np.zeros(len(dataset), np.int32))
    for name in ("n_node", "n_edge"):
        layout[name] = counts[name]
    out: dict[str, Any] = {  # NumPy arrays (`DeviceData` holds them on the device later)
        name: (np.concatenate([layout[name], zero]) if name in
               ("n_node", "n_edge", "n_overflow", "n_pair") else layout[name])
        for name in DeviceData._fields}
    for name, counts_name in (("node_start", "n_node"), ("edge_start", "n_edge"),
                              ("overflow_start", "n_overflow"), ("pair_start", "n_pair")):
        out[name] = _starts(out[counts_name][:-1])
    for name in ("nodes", "edges", "node_targets", "graph_targets"):
        out[name] = _with_zero_row(getattr(dataset, name))
    out["senders"] = _with_zero_row(dataset.senders.astype(np.int32))
    out["receivers"] = _with_zero_row(dataset.receivers.astype(np.int32))
    for name in ("node_slots", "overflow_slots"):
        if out[name] is not None:
            out[name] = SlotRows(*(_with_zero_row(a) for a in out[name]))
    for name in ("overflow_owner", "has_overflow", "last_overflow", "pair_receiver",
                 "pair_sender", "pair_slot", "pair_count"):
        out[name] = _with_zero_row(out[name])
    return DeviceData(**out)


def same_shapes(splits: Sequence[DeviceData]) -> list[DeviceData]:
    """The splits with zero rows appended, so that every array has one shape across them.

    One compiled program then serves them all (validation and test are evaluated by the
    same scan). Appended graphs have zero counts, like the filler graph, so any id from
    `len(dataset)` on is an empty graph; appended rows are never read by `assemble`.
    """
    if len(splits) < 2:
        return list(splits)
    lengths = jax.tree_util.tree_map(lambda *leaves: max(len(x) for x in leaves), *splits)
    return [jax.tree_util.tree_map(_pad_rows, data, lengths) for data in splits]


def _pad_rows(arr: np.ndarray, length: int) -> np.ndarray:
    pad = length - len(arr)
    return arr if pad == 0 else np.concatenate([arr, np.zeros((pad,) + arr.shape[1:],
                                                              arr.dtype)])


def place_dataset(dataset: GraphDataset, budget: Budget, device=None) -> DeviceData:
    """`dataset` on the device (`device`: default device), ready for `assemble`."""
    return jax.device_put(host_data(dataset, budget), device)


def data_bytes(data: DeviceData) -> int:
    """Bytes a placed split takes on the device."""
    return int(sum(np.asarray(leaf).nbytes if not hasattr(leaf, "nbytes") else leaf.nbytes
                   for leaf in jax.tree_util.tree_leaves(data)))


def epoch_ids(dataset: GraphDataset, budget: Budget, batch_size: int,
              rng: np.random.Generator | None = None) -> np.ndarray:
    """The epoch's steps as graph ids `[steps, n_graph - 1]` int32, `len(dataset)` (the
    empty filler graph) after each step's graphs; the same packing as `iterate_batches`."""
    order = np.arange(len(dataset)) if rng is None else rng.permutation(len(dataset))
    groups = pack(dataset, order, batch_size, budget)
    ids = np.full((len(groups), budget.n_graph - 1), len(dataset), np.int32)
    for step, graphs in enumerate(groups):
        ids[step, : len(graphs)] = graphs
    return ids


def _locate(counts: jax.Array, size: int):
    """For each position `[size]` of a concatenation of `counts` `[B]` segments: its
    segment (clipped), its offset inside it, and whether it is a real position."""
    ends = jnp.cumsum(counts)
    pos = jnp.arange(size, dtype=counts.dtype)
    # unrolled (the same integers): the default method is a loop, whose levels a GPU
    # launches one by one; unrolled, XLA fuses them
    seg = jnp.minimum(jnp.searchsorted(ends, pos, side="right", method="scan_unrolled"),
                      counts.shape[0] - 1)
    return seg, pos - (ends[seg] - counts[seg]), pos < ends[-1]


def _take(arr: jax.Array | None, rows: jax.Array, valid: jax.Array) -> jax.Array | None:
    """`arr[rows]` with zeros where not `valid`."""
    if arr is None:
        return None
    out = arr[rows]
    return jnp.where(valid.reshape(valid.shape + (1,) * (out.ndim - 1)), out, 0)


class _Where(NamedTuple):
    """Where each graph of a step sits in the batch: `[B]` per id."""

    ids: jax.Array
    n_node: jax.Array
    node: jax.Array  # first node
    overflow: jax.Array  # first overflow row
    pair: jax.Array  # first listed pair


def _to_batch_flat(local_flat, n_g, node0, overflow0, num_nodes: int, width: int):
    """Graph-local flat slots -> the batch's flat slots (see the module docstring)."""
    row, col = local_flat // width, local_flat % width
    batch_row = jnp.where(row < n_g, node0 + row, num_nodes + overflow0 + row - n_g)
    return batch_row * width + col


def _slot_block(rows: SlotRows, data_rows, seg, where: _Where, valid, num_nodes: int,
                num_pairs: int, width: int):
    """Real slot rows of the batch, mapped from local to batch numbering `[rows, K]`."""
    get = lambda a: a[data_rows]  # noqa: E731
    n_g, node0 = where.n_node[seg][:, None], where.node[seg][:, None]
    overflow0, pair0 = where.overflow[seg][:, None], where.pair[seg][:, None]
    neighbor = get(rows.neighbor) + node0
    mirror = _to_batch_flat(get(rows.mirror), n_g, node0, overflow0, num_nodes, width)
    pair = jnp.where(get(rows.pair) >= 0, get(rows.pair) + pair0, num_pairs)
    keep = valid[:, None]
    return (keep, neighbor, mirror, jnp.where(keep, get(rows.forward), 0.0),
            jnp.where(keep, get(rows.backward), 0.0), pair)


def _node_rows(data: DeviceData, where: _Where, budget: Budget, pad_edges):
    """The `N` node rows of the slot layout, the padding node's self-loop included."""
    n, width = budget.n_node, budget.slot_width
    # a prepared layout (`_layout`'s callers): every slot field is there
    assert width is not None and data.node_slots is not None
    assert data.has_overflow is not None and data.last_overflow is not None
    seg, local, valid = _locate(where.n_node, n)
    rows = data.node_start[where.ids[seg]] + local
    keep, neighbor, mirror, fwd, bwd, pair = _slot_block(
        data.node_slots, jnp.where(valid, rows, -1), seg, where, valid, n, budget.n_pair, width)
    own = jnp.arange(n, dtype=jnp.int32)[:, None]
    real_nodes = jnp.sum(where.n_node)
    neighbor = jnp.where(keep, neighbor, own)
    mirror = jnp.where(keep, mirror, own * width + jnp.arange(width, dtype=jnp.int32))
    loop = (own == real_nodes) & (jnp.arange(width) == 0) & (pad_edges > 0)
    fwd = jnp.where(loop, pad_edges.astype(jnp.float32), fwd)
    real_pairs = jnp.sum(data.n_pair[where.ids])
    pair = jnp.where(keep, pair, jnp.where(loop, real_pairs, budget.n_pair))
    has = jnp.where(valid, data.has_overflow[rows], False)
    last = jnp.where(has, where.overflow[seg] + data.last_overflow[rows], 0)
    real_overflow = jnp.sum(data.n_overflow[where.ids])
    tail = (own[:, 0] == n - 1) & (real_overflow < budget.n_overflow)
    has = has | tail
    last = jnp.where(tail, budget.n_overflow - 1, last)
    return (neighbor, mirror, fwd, jnp.where(loop, fwd, bwd), pair, has, last.astype(jnp.int32))


def _overflow_rows(data: DeviceData, where: _Where, budget: Budget):
    """The `O` overflow rows: real ones mapped, the rest owned by the last node."""
    n, o, width = budget.n_node, budget.n_overflow, budget.slot_width
    assert width is not None and data.overflow_slots is not None  # a prepared layout
    assert data.overflow_owner is not None
    seg, local, valid = _locate(data.n_overflow[where.ids], o)
    rows = data.overflow_start[where.ids[seg]] + local
    keep, neighbor, mirror, fwd, bwd, pair = _slot_block(
        data.overflow_slots, jnp.where(valid, rows, -1), seg, where, valid, n, budget.n_pair,
        width)
    owner = jnp.where(valid, data.overflow_owner[rows] + where.node[seg], n - 1)
    own = (n + jnp.arange(o, dtype=jnp.int32))[:, None]
    neighbor = jnp.where(keep, neighbor, n - 1)
    mirror = jnp.where(keep, mirror, own * width + jnp.arange(width, dtype=jnp.int32))
    pair = jnp.where(keep, pair, budget.n_pair)
    first = jnp.concatenate([jnp.ones(min(o, 1), bool), owner[1:] != owner[:-1]])
    return neighbor, mirror, fwd, bwd, pair, owner.astype(jnp.int32), first


def _pairs(data: DeviceData, where: _Where, budget: Budget, pad_edges):
    """The `P` listed pairs, the padding node's self-loop after the real ones."""
    assert budget.slot_width is not None and data.pair_slot is not None  # a prepared layout
    assert data.pair_receiver is not None and data.pair_sender is not None
    assert data.pair_count is not None
    seg, local, valid = _locate(data.n_pair[where.ids], budget.n_pair)
    rows = jnp.where(valid, data.pair_start[where.ids[seg]] + local, -1)
    node0 = where.node[seg]
    real_nodes = jnp.sum(where.n_node)
    real_pairs = jnp.sum(data.n_pair[where.ids])
    loop = (jnp.arange(budget.n_pair) == real_pairs) & (pad_edges > 0)
    slot = _to_batch_flat(data.pair_slot[rows], where.n_node[seg], node0,
                          where.overflow[seg], budget.n_node, budget.slot_width)
    ends = (jnp.where(valid, data.pair_receiver[rows] + node0, 0),
            jnp.where(valid, data.pair_sender[rows] + node0, 0))
    return (jnp.where(loop, real_nodes, ends[0]).astype(jnp.int32),
            jnp.where(loop, real_nodes, ends[1]).astype(jnp.int32),
            jnp.where(loop, real_nodes * budget.slot_width, jnp.where(valid, slot, 0)
                      ).astype(jnp.int32),
            jnp.where(loop, pad_edges.astype(jnp.float32),
                      jnp.where(valid, data.pair_count[rows], 0.0)))


def _layout(data: DeviceData, where: _Where, budget: Budget, pad_edges) -> dict:
    """The `PreparedGraph` layout fields of the batch."""
    node = _node_rows(data, where, budget, pad_edges)
    over = _overflow_rows(data, where, budget)
    pairs = _pairs(data, where, budget, pad_edges)
    stack = lambda i: jnp.concatenate([node[i], over[i]])  # noqa: E731
    return dict(neighbors=stack(0).astype(jnp.int32), mirror=stack(1).astype(jnp.int32),
                forward_count=stack(2), backward_count=stack(3), overflow_owner=over[5],
                overflow_first=over[6], overflow_last=node[6], has_overflow=node[5],
                pair_receivers=pairs[0], pair_senders=pairs[1], pair_slot=pairs[2],
                pair_count=pairs[3], slot_pair=stack(4).astype(jnp.int32))


def assemble(data: DeviceData, ids: jax.Array, budget: Budget) -> Batch:
    """The padded `Batch` of graphs `ids` `[n_graph - 1]` (filler id `G` after the real
    ones), equal to `make_batch(dataset, ids[ids < G], budget)`; traceable (use in `jit`)."""
    filler = data.n_node.shape[0] - 1
    n_node, n_edge = data.n_node[ids], data.n_edge[ids]
    node0 = jnp.cumsum(n_node) - n_node
    where = _Where(ids, n_node, node0, jnp.cumsum(data.n_overflow[ids]) - data.n_overflow[ids],
                   jnp.cumsum(data.n_pair[ids]) - data.n_pair[ids])
    real_nodes, real_edges = jnp.sum(n_node), jnp.sum(n_edge)
    real_graphs = jnp.sum(ids != filler)
    seg, local, node_ok = _locate(n_node, budget.n_node)
    node_rows = jnp.where(node_ok, data.node_start[ids[seg]] + local, -1)
    eseg, elocal, edge_ok = _locate(n_edge, budget.n_edge)
    edge_rows = jnp.where(edge_ok, data.edge_start[ids[eseg]] + elocal, -1)
    ends = [jnp.where(edge_ok, arr[edge_rows] + node0[eseg], real_nodes).astype(jnp.int32)
            for arr in (data.senders, data.receivers)]
    slot = jnp.arange(budget.n_graph)
    counts = [jnp.where(slot == real_graphs, total - real, jnp.append(c, 0)).astype(jnp.int32)
              for c, total, real in ((n_node, budget.n_node, real_nodes),
                                     (n_edge, budget.n_edge, real_edges))]
    graph = jraph.GraphsTuple(nodes=_take(data.nodes, node_rows, node_ok),
                              edges=_take(data.edges, edge_rows, edge_ok), senders=ends[0],
                              receivers=ends[1], n_node=counts[0], n_edge=counts[1],
                              globals=None)
    if budget.slot_width is not None:
        # Stored once (an opaque identity): XLA would otherwise fuse the layout's index
        # arithmetic (offsets, cumulative sums) into every kernel that gathers with it
        # and redo it per element and per slot column.
        layout = _layout(data, where, budget, budget.n_edge - real_edges)
        graph = PreparedGraph(*graph, **opaque_identity(layout))
    graph_targets = None
    if data.graph_targets is not None:
        graph_targets = jnp.concatenate([data.graph_targets[ids],
                                         jnp.zeros_like(data.graph_targets[:1])])
    return Batch(graph=graph, node_targets=_take(data.node_targets, node_rows, node_ok),
                 graph_targets=graph_targets, node_mask=node_ok, graph_mask=slot < real_graphs)
