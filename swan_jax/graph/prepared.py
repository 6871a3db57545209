"""Graphs prepared once, on the host, for the gather-only SWAN kernels (`swan_jax.graph.gather`).

`prepare_graph(graph)` turns a `jraph.GraphsTuple` into a `PreparedGraph`: the same
GraphsTuple fields (so encoders read `.nodes`, readouts `.n_node`) plus a *slot layout*
of the symmetric closure of the edge pattern:

* node `u` owns row `u` of `neighbors [R, K]`; slot `(r, k)` names one neighbour `v`
  (an unordered pair `{u, v}` with at least one edge `u -> v` or `v -> u`; multi-edges
  collapse into one slot and are counted). `K`, the *slot width*, is static.
* `forward_count[r, k] = A[u, v]` (edges `v -> u`), `backward_count[r, k] = A[v, u]`.
* `mirror[r, k]` is the flat index `r' * K + k'` of the slot of `v` that names `u`, so
  the transpose of any slot operator is the same operator with mirrored values
  (`M^T[u, v] = M[v, u]`): a symmetric operator is its own transpose, an
  antisymmetric one its negative, and every backward pass is again a gather.
* A node with more than `K` neighbours gets *overflow rows* after the `N` node rows
  (`overflow_owner`), summed into its own row by a segmented scan: a star or a
  power-law graph costs memory in proportion to its edges, not to `N` times its
  largest degree.
* Directed pairs `(u <- v)` with `A[u, v] > 0` are listed once (`pair_*`): the
  learned operators of SWAN-learn evaluate their edge MLP there, never on padding.

Padding slots point at their own row's node with zero counts and mirror themselves,
so every gather stays in range and every transposition is exact. Building the layout
is NumPy work on the host (validation included); inside `jit` nothing is checked.

The layout validates itself: `validate_prepared` (shapes and dtypes, fine under
tracing), `check_prepared` (index values, on the host) and `check_prepared_traced`
(index values under `checkify`). The data pipeline builds batches through the public
`closure_slots` / `choose_slot_width` / `overflow_rows` / `prepared_from_closure`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jraph
import numpy as np
from jax.typing import ArrayLike

from swan_jax.graph.validation import check_range, validate_graphs_tuple

# Work of an overflow row beyond its K slots (the segmented scan that sums it into its
# node's row), in slots; used when a slot width is chosen from the degrees. Measured on a
# GraphProp batch (15k nodes, degrees 1-33, hidden 20; docs/benchmarks-log.md,
# "Device-bound training and the epoch anatomy", GraphProp's slow CPU steps): a step's
# CPU time fits `a + b (K (N + O) + 32 O)` within 3% for K = 1, 4, 8, 16, 33.
OVERFLOW_ROW_COST = 32.0
MAX_SLOT_WIDTH = 64


class PreparedGraph(NamedTuple):
    """A batch of graphs with its gather-only slot layout (see the module docstring).

    The first seven fields are `jraph.GraphsTuple`'s, in its order. Shapes: `N` nodes,
    `R = N + O` rows (`O` overflow rows), slot width `K`, `P` listed pairs.

    Attributes:
      neighbors: `[R, K]` int32 neighbour node of each slot (the row's node on padding).
      mirror: `[R, K]` int32 flat index of the mirror slot (itself on padding).
      forward_count: `[R, K]` float32 `A[u, v]`, the edges `v -> u` of the slot.
      backward_count: `[R, K]` float32 `A[v, u]`.
      overflow_owner: `[O]` int32 node of each overflow row.
      overflow_first: `[O]` bool, True on the first overflow row of its node.
      overflow_last: `[N]` int32 index (within the overflow rows) of the node's last one.
      has_overflow: `[N]` bool, the node owns overflow rows.
      pair_receivers, pair_senders: `[P]` int32 ends `u <- v` of each listed pair.
      pair_slot: `[P]` int32 flat slot of the pair (0 on padding).
      pair_count: `[P]` float32 `A[u, v]` (0 on padding).
      slot_pair: `[R, K]` int32 listed pair of the slot's forward edges (`P` if none).
    """

    nodes: Any
    edges: Any
    receivers: Any
    senders: Any
    globals: Any
    n_node: Any
    n_edge: Any
    neighbors: Any
    mirror: Any
    forward_count: Any
    backward_count: Any
    overflow_owner: Any
    overflow_first: Any
    overflow_last: Any
    has_overflow: Any
    pair_receivers: Any
    pair_senders: Any
    pair_slot: Any
    pair_count: Any
    slot_pair: Any

    @property
    def num_nodes(self) -> int:
        """Static node count `N`."""
        return int(np.shape(self.has_overflow)[-1])

    @property
    def slot_width(self) -> int:
        """Static slot width `K`."""
        return int(np.shape(self.neighbors)[-1])

    @property
    def num_rows(self) -> int:
        """Static row count `R = N + O`."""
        return int(np.shape(self.neighbors)[-2])

    @property
    def num_overflow(self) -> int:
        """Static overflow row count `O`."""
        return int(np.shape(self.overflow_owner)[-1])

    @property
    def num_pairs(self) -> int:
        """Static listed-pair count `P`."""
        return int(np.shape(self.pair_slot)[-1])


GRAPH_FIELDS = jraph.GraphsTuple._fields


def plain_graph(graph: jraph.GraphsTuple | PreparedGraph) -> jraph.GraphsTuple:
    """The `jraph.GraphsTuple` of a prepared graph (a GraphsTuple is returned as is).

    For code that reads edges directly (analysis, forward-mode Jacobians of the
    segment-sum reference path, networkx conversion).
    """
    if isinstance(graph, PreparedGraph):
        return jraph.GraphsTuple(*graph[: len(GRAPH_FIELDS)])
    return graph


class Closure(NamedTuple):
    """Slots of the symmetric closure, sorted by `(owner, neighbour)`: `[S]` each.

    `forward = A[owner, neighbour]`, `backward = A[neighbour, owner]`; `mirror` is the
    position of the slot `(neighbour, owner)` in the same list.
    """

    owner: np.ndarray
    neighbour: np.ndarray
    forward: np.ndarray
    backward: np.ndarray
    mirror: np.ndarray

    def degree(self, num_nodes: int) -> np.ndarray:
        """Closure neighbours of each node `[N]` (a self-loop counts once)."""
        return np.bincount(self.owner, minlength=num_nodes)


def closure_slots(senders: ArrayLike, receivers: ArrayLike, num_nodes: int) -> Closure:
    """The closure slots of a graph's edges (any directions, multi-edges, self-loops)."""
    senders = np.asarray(senders, np.int64)
    receivers = np.asarray(receivers, np.int64)
    num_edges = senders.shape[0]
    base = max(num_nodes, 1)
    forward_keys = receivers * base + senders  # slot (u, v) of edge v -> u
    backward_keys = senders * base + receivers  # slot (v, u) sees it backwards
    keys, inverse = np.unique(np.concatenate([forward_keys, backward_keys]),
                              return_inverse=True)
    inverse = inverse.reshape(-1)
    forward = np.bincount(inverse[:num_edges], minlength=keys.shape[0])
    backward = np.bincount(inverse[num_edges:], minlength=keys.shape[0])
    owner, neighbour = keys // base, keys % base
    mirror = np.searchsorted(keys, neighbour * base + owner)
    return Closure(owner, neighbour, forward, backward, mirror)


def overflow_rows(degree: np.ndarray, slot_width: int) -> np.ndarray:
    """Overflow rows each node needs at slot width `K`: `max(0, ceil(deg / K) - 1)`."""
    rows: np.ndarray = np.maximum(0, -(-np.asarray(degree) // slot_width) - 1)
    return rows


def choose_slot_width(degree: np.ndarray) -> int:
    """The slot width that minimises the work of a layout (overflow rows weigh more).

    Cost of width K: `K (N + O(K)) + c O(K)` with `O(K)` overflow rows and
    `c = OVERFLOW_ROW_COST`: every row's K slots, plus the scan over overflow rows; ties
    go to the wider slot (fewer overflow rows).
    """
    degree = np.asarray(degree)
    if degree.size == 0 or degree.max() <= 1:
        return 1
    best, best_cost = 1, math.inf
    for width in range(1, min(int(degree.max()), MAX_SLOT_WIDTH) + 1):
        extra = overflow_rows(degree, width).sum()
        cost = width * (degree.size + extra) + OVERFLOW_ROW_COST * extra
        if cost <= best_cost:
            best, best_cost = width, cost
    return best


def _fit(name: str, needed: int, budget: int | None) -> int:
    if budget is None:
        return needed
    if needed > budget:
        raise ValueError(f"the graph needs {needed} {name} but the budget holds {budget}; "
                         f"raise the budget (or let prepare_graph size it)")
    return budget


def prepare_graph(graph: jraph.GraphsTuple | PreparedGraph, *, slot_width: int | None = None,
                  num_overflow: int | None = None, num_pairs: int | None = None,
                  validate: bool = True) -> PreparedGraph:
    """The gather-only layout of `graph` (host side, NumPy; see the module docstring).

    Args:
      graph: a `jraph.GraphsTuple` (any batch of graphs: directed edges, multi-edges,
        self-loops, isolated nodes and padding are all fine). A `PreparedGraph` is
        re-prepared from its GraphsTuple fields.
      slot_width: `K`; default: `choose_slot_width` of the closure degrees.
      num_overflow: overflow rows `O` to allocate (a static budget); default: as many as
        the graph needs.
      num_pairs: listed pairs `P` to allocate; default: as many as the graph has.
      validate: run `validate_graphs_tuple` first (index ranges, counts, dtypes).

    Returns:
      A `PreparedGraph` of NumPy arrays (`jax.tree_util.tree_map(jnp.asarray, ...)`
      moves it to the device).

    Raises:
      ValueError: an invalid graph (naming field and index), or a budget too small.
    """
    graph = plain_graph(graph)
    if validate:
        validate_graphs_tuple(graph)
    num_nodes = int(np.sum(np.asarray(graph.n_node)))
    closure = closure_slots(graph.senders, graph.receivers, num_nodes)
    return prepared_from_closure(graph, closure, slot_width=slot_width,
                                 num_overflow=num_overflow, num_pairs=num_pairs)


def prepared_from_closure(graph: jraph.GraphsTuple, closure: Closure, *,
                          slot_width: int | None = None, num_overflow: int | None = None,
                          num_pairs: int | None = None) -> PreparedGraph:
    """`prepare_graph` from the graph's closure slots (e.g. cut from a whole data set's)."""
    num_nodes = int(np.sum(np.asarray(graph.n_node)))
    degree = closure.degree(num_nodes)
    if slot_width is None:
        slot_width = choose_slot_width(degree)
    if not isinstance(slot_width, int | np.integer) or slot_width < 1:
        raise ValueError(f"slot_width must be an integer >= 1, got {slot_width!r}")
    width = int(slot_width)
    extra = overflow_rows(degree, width)
    num_overflow = _fit("overflow rows", int(extra.sum()), num_overflow)
    if num_nodes == 0:
        num_overflow = 0  # no node could own a padding overflow row
    num_pairs = _fit("listed pairs", int(np.sum(closure.forward > 0)), num_pairs)
    layout = _slot_arrays(closure, degree, extra, num_nodes, width, num_overflow)
    layout.update(_pair_arrays(closure, layout.pop("flat"), num_pairs,
                               layout["neighbors"].shape))
    return PreparedGraph(*graph, **layout)


def _slot_arrays(closure: Closure, degree: np.ndarray, extra: np.ndarray, num_nodes: int,
                 width: int, num_overflow: int) -> dict[str, np.ndarray]:
    """Rows, slots, mirrors and overflow bookkeeping of a closure."""
    owner, neighbour = closure.owner, closure.neighbour
    num_rows = num_nodes + num_overflow
    first_slot = np.concatenate([[0], np.cumsum(degree)])[:-1]
    first_overflow = np.concatenate([[0], np.cumsum(extra)])[:-1]
    index = np.arange(owner.shape[0]) - first_slot[owner]  # position among the node's slots
    row = np.where(index < width, owner,
                   num_nodes + first_overflow[owner] + (index - width) // width)
    col = index % width
    flat = row * width + col
    row_node = np.concatenate([np.arange(num_nodes), np.repeat(np.arange(num_nodes), extra),
                               np.full(num_overflow - int(extra.sum()), num_nodes - 1)])
    neighbors = np.repeat(row_node[:, None], width, axis=1).astype(np.int32)
    neighbors[row, col] = neighbour
    mirror = np.arange(num_rows * width, dtype=np.int64).reshape(num_rows, width)
    mirror[row, col] = flat[closure.mirror]
    forward_count = np.zeros((num_rows, width), np.float32)
    backward_count = np.zeros((num_rows, width), np.float32)
    forward_count[row, col] = closure.forward
    backward_count[row, col] = closure.backward
    overflow_owner = row_node[num_nodes:].astype(np.int32)
    overflow_first = np.ones(num_overflow, bool)
    overflow_first[1:] = overflow_owner[1:] != overflow_owner[:-1]
    has_overflow = np.zeros(num_nodes, bool)
    has_overflow[overflow_owner] = True
    overflow_last = np.zeros(num_nodes, np.int32)
    if num_overflow:  # the owners are sorted: a node's last row ends its run
        last = np.flatnonzero(np.append(overflow_owner[1:] != overflow_owner[:-1], True))
        overflow_last[overflow_owner[last]] = last
    return dict(neighbors=neighbors, mirror=mirror.astype(np.int32),
                forward_count=forward_count, backward_count=backward_count,
                overflow_owner=overflow_owner, overflow_first=overflow_first,
                overflow_last=overflow_last, has_overflow=has_overflow, flat=flat)


def _pair_arrays(closure: Closure, flat: np.ndarray, num_pairs: int,
                 slot_shape: tuple[int, int]) -> dict[str, np.ndarray]:
    """The listed directed pairs `(u <- v)`, `A[u, v] > 0`, in slot order."""
    owner, neighbour, forward = closure.owner, closure.neighbour, closure.forward
    listed = np.flatnonzero(forward > 0)
    real = listed.shape[0]
    pair_receivers = np.zeros(num_pairs, np.int32)
    pair_senders = np.zeros(num_pairs, np.int32)
    pair_slot = np.zeros(num_pairs, np.int32)
    pair_count = np.zeros(num_pairs, np.float32)
    pair_receivers[:real], pair_senders[:real] = owner[listed], neighbour[listed]
    pair_slot[:real], pair_count[:real] = flat[listed], forward[listed]
    slot_pair = np.full(slot_shape[0] * slot_shape[1], num_pairs, np.int32)
    slot_pair[flat[listed]] = np.arange(real)
    return dict(pair_receivers=pair_receivers, pair_senders=pair_senders, pair_slot=pair_slot,
                pair_count=pair_count, slot_pair=slot_pair.reshape(slot_shape))


LAYOUT_DTYPES = {
    "neighbors": "int", "mirror": "int", "forward_count": "float", "backward_count": "float",
    "overflow_owner": "int", "overflow_first": "bool", "overflow_last": "int",
    "has_overflow": "bool", "pair_receivers": "int", "pair_senders": "int", "pair_slot": "int",
    "pair_count": "float", "slot_pair": "int",
}


def validate_prepared(graph: PreparedGraph) -> None:
    """Static checks of a `PreparedGraph` (shapes and dtypes; fine under tracing).

    Index values were checked by `prepare_graph` on the host; `check_prepared` checks
    them again (for a layout built or changed by hand), `traced_checks` under `jit`.

    Raises:
      ValueError: naming the field whose shape or dtype is off.
    """
    kinds = {"int": np.integer, "float": np.floating, "bool": np.bool_}
    for name, kind in LAYOUT_DTYPES.items():
        value = getattr(graph, name)
        dtype = None if value is None else (value.dtype if hasattr(value, "dtype")
                                            else np.asarray(value).dtype)
        if dtype is None or not np.issubdtype(dtype, kinds[kind]):
            got = "None" if value is None else dtype
            raise ValueError(f"prepared graph field {name} must hold {kind}s, got {got}")
    rows, width = np.shape(graph.neighbors)[-2:]
    n, o, p = graph.num_nodes, graph.num_overflow, graph.num_pairs
    expected = {"mirror": (rows, width), "forward_count": (rows, width),
                "backward_count": (rows, width), "slot_pair": (rows, width),
                "overflow_first": (o,), "overflow_last": (n,), "pair_receivers": (p,),
                "pair_senders": (p,), "pair_count": (p,)}
    lead = np.shape(graph.neighbors)[:-2]
    for name, shape in expected.items():
        if np.shape(getattr(graph, name)) != lead + shape:
            raise ValueError(f"prepared graph field {name} has shape "
                             f"{np.shape(getattr(graph, name))}; expected {lead + shape}")
    if rows != n + o:
        raise ValueError(f"prepared graph has {rows} slot rows but {n} nodes + {o} overflow "
                         f"rows")
    if graph.nodes is not None:
        for leaf in jax.tree_util.tree_leaves(graph.nodes):
            if np.shape(leaf)[len(lead)] != n:
                raise ValueError(f"prepared graph has {n} nodes but graph.nodes has "
                                 f"{np.shape(leaf)[len(lead)]} rows")


def check_prepared(graph: PreparedGraph) -> None:
    """Host-side value checks of a `PreparedGraph`'s layout (index ranges, mirrors).

    Raises:
      ValueError: naming the field and the first bad flat index.
    """
    validate_prepared(graph)
    n, o, p = graph.num_nodes, graph.num_overflow, graph.num_pairs
    slots = graph.num_rows * graph.slot_width
    for name, high in (("neighbors", n), ("mirror", slots), ("overflow_owner", n),
                       ("overflow_last", max(o, 1)), ("pair_receivers", max(n, 1)),
                       ("pair_senders", max(n, 1)), ("pair_slot", max(slots, 1)),
                       ("slot_pair", p + 1)):
        values = np.asarray(getattr(graph, name)).reshape(-1)
        bad = (values < 0) | (values >= high)
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"prepared graph field {name}[{i}] (flat) = {int(values[i])} is "
                             f"out of range [0, {high})")
    mirror = np.asarray(graph.mirror).reshape(-1)
    bad = mirror[mirror] != np.arange(slots)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"prepared graph field mirror is not an involution at slot {i}")



def check_prepared_traced(graph: PreparedGraph) -> None:
    """checkify: every slot neighbour, mirror and pair index of the layout in range (works
    on traced layouts; run under `checkify.checkify` or `swan_jax.graph.checked`)."""
    n = graph.num_nodes
    slots = graph.num_rows * graph.slot_width
    for name, high in (("neighbors", n), ("mirror", slots), ("overflow_owner", n),
                       ("pair_receivers", max(n, 1)), ("pair_senders", max(n, 1)),
                       ("pair_slot", max(slots, 1)), ("slot_pair", graph.num_pairs + 1)):
        check_range(f"prepared graph field {name}", getattr(graph, name), high)
