"""Gather-only kernels over a `PreparedGraph`'s slot layout (`swan_jax.graph.prepared`).

Every graph operation here is a *linear map with a custom transpose*, and both the map
and its transpose are gathers (no scatter, no segment sum), so forward mode, reverse
mode and `vmap` all stay gather-only:

    node_sum          rows [R, c] -> nodes [N, c]     transpose: row_owner
    row_owner         nodes [N, c] -> rows [R, c]     transpose: node_sum
    gather_neighbors  nodes [N, c] -> slots [R, K, c] transpose: node_sum(sum_k mirror(.))
    mirror_slots      slots -> slots                  transpose: itself
    pairs_to_slots    pairs [P, c] -> slots           transpose: slots_to_pairs
    gather_pair_ends  nodes -> pairs (receiver/sender) transpose: node sums over slots
    gather_pair_ends_joined  the same from one `[R | S]` array
    aggregate         sum_i M_i Y_i                   transpose in Y: sum_i M_i^T g
    mix_aggregate     Y_0 + b + sum_i M_i Y_i         transpose in Y: [g | M_1^T g | ...]

The transposes rest on one identity of the layout: the slots whose neighbour is `v`
are exactly the mirrors of `v`'s own slots, so `(M^T g)[v]` is a sum over `v`'s rows
of `M[mirror] * g[neighbour]` (`aggregate` with the mirrored values).

The maps are `jax.lax.custom_linear_solve` calls with an identity `matvec`: the "solve"
is the map, the "transpose solve" its transpose. JAX then differentiates them in both
modes and batches them, and transposes them with our gathers instead of the scatter-add
it would derive for a gather. A map between spaces of different sizes is embedded in
the larger one (input padded with `jnp.pad`, a linear op; output cut back).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero

from swan_jax.graph.prepared import PreparedGraph

Array = jax.Array
T = TypeVar("T")
Linear = Callable[[Any], Any]  # a linear map of arrays (or of a tuple of arrays)

# Slot widths up to this are unrolled into one gather per slot column, in the forward
# aggregation and in its transpose; wider layouts gather every slot at once and contract
# with a batched `[1, K] x [K, c]` product per row, which XLA's CPU backend runs at about
# 2 GFLOP/s. At GraphProp's K = 14 the unrolled kernels, with the transposes stored before
# they are concatenated (`STORE_TRANSPOSES_FROM`), took a 3-step training epoch (2 seeds,
# hidden 20, 10 layers) from 1.03-1.16 s to 0.78-0.87 s and a validation pass from 0.21 s
# to 0.15 s, for 8 s more compile (2-core CPU, interleaved runs: docs/benchmarks-log.md,
# "Device-bound training and the epoch anatomy"; measured by `python -m
# benchmarks.epoch_anatomy --only graphprop`). Unrolled without storing, the transposes
# lost (1.08-1.13 s against 0.98-1.00 s): see `STORE_TRANSPOSES_FROM`.
UNROLL_SLOTS = 16
# From this slot width on, the unrolled transposes are stored (`materialize`) before the
# cotangent concatenation reads them: otherwise XLA fuses their K gathers into that
# concatenation and emits them per element (measured 3-5x the same gathers alone at
# K = 14). Narrower layouts keep them fused (no gain measured at transfer's K = 3).
STORE_TRANSPOSES_FROM = 9
# Up to this many overflow rows a batch's segmented scan is unrolled (at most 4 doubling
# passes) instead of a loop that stops at the first pass no run reaches (`_segmented_scan`).
UNROLL_SCAN_ROWS = 16


def _identity(v: T) -> T:
    return v


def custom_linear(fn: Linear, fn_transpose: Linear, b: T) -> T:
    """`fn(b)` for a linear `fn` (output structured like `b`) with transpose `fn_transpose`."""
    out: T = jax.lax.custom_linear_solve(_identity, b, lambda _, v: fn(v),
                                         lambda _, v: fn_transpose(v))
    return out


def _pad_rows(x: Array, rows: int) -> Array:
    return jnp.pad(x, [(0, rows - x.shape[0])] + [(0, 0)] * (x.ndim - 1))


def _as_rows(x: Array, lead: int) -> tuple[Array, tuple[int, ...]]:
    """`x [lead..., c...] -> [prod(lead), prod(c)]` and the trailing shape."""
    lead_shape = x.shape[:lead]
    rows = 1
    for s in lead_shape:
        rows *= s
    return x.reshape((rows, -1)), x.shape[lead:]


def _embedded(fn: Linear, fn_transpose: Linear, x: Array, in_rows: int,
              out_rows: int) -> Array:
    """A linear `[in_rows, c] -> [out_rows, c]` map as a square map on `max` rows."""
    size = max(in_rows, out_rows)
    out = custom_linear(lambda b: _pad_rows(fn(b[:in_rows]), size),
                        lambda b: _pad_rows(fn_transpose(b[:out_rows]), size),
                        _pad_rows(x, size))
    return out[:out_rows]


def opaque_identity(tree: T) -> T:
    """The identity, stored: XLA fuses nothing across it (its output is computed once).

    On a GPU (and any backend but the CPU) a `jax.lax.optimization_barrier`, which XLA's
    GPU pipeline keeps until after fusion and scheduling. XLA's CPU pipeline drops the
    barrier before fusion, so on a CPU it is a loop XLA cannot see through
    (`_loop_identity`). The loop is not used on a GPU: a loop whose trip count is data
    reads its condition back to the host at every iteration, 6-8 times per Peptides-func
    step here, and an H200 profile of SWAN-learn's epoch found the device busy 20% of it
    (docs/benchmarks-log.md, "Operations per training step"; measured by `python -m
    benchmarks.device_profile --only peptides-learn`, the loops counted by `python -m
    benchmarks.step_ops`).
    """
    leaves = [leaf for leaf in jax.tree_util.tree_leaves(tree) if jnp.size(leaf)]
    if not leaves:
        return tree
    out: T = jax.lax.platform_dependent(tree, cpu=_loop_identity,
                                        default=jax.lax.optimization_barrier)
    return out


def _loop_identity(tree: T) -> T:
    """The identity, through a loop XLA cannot see through (its trip count is data)."""
    leaves = [leaf for leaf in jax.tree_util.tree_leaves(tree) if jnp.size(leaf)]
    # A trip count the compiler cannot know (it is 0 unless the first value is NaN, and
    # the body is the identity anyway), so XLA keeps the loop and the arrays as they are.
    first = jnp.reshape(leaves[0], -1)[0]
    trips = jnp.isnan(first).astype(jnp.int32)

    def body(carry: tuple[Array, T]) -> tuple[Array, T]:  # the identity, opaque to XLA
        count, values = carry
        keep = (count >= 0).astype(jnp.int32)
        return count - 1, jax.tree_util.tree_map(lambda a: a * keep.astype(a.dtype), values)

    _, out = jax.lax.while_loop(lambda c: c[0] > 0, body, (trips, tree))
    return out


def materialize(tree: T) -> T:
    """`tree`, stored once: XLA fuses cheap producers into every consumer and recomputes
    them per output element; operator values used by every step must not be.

    One linear identity over the whole tree (so `grad`, `jvp`, `vmap` pass through) whose
    forward, tangent and transpose go through one `opaque_identity`. One
    call per tree, not per array: each `custom_linear_solve` is traced again under `vmap`,
    `jvp` and transposition, and per array this was half the trace of a SWAN training
    program (the tests' transfer `train()`: 0.69 s against 1.35 s under cProfile).
    """
    if not jax.tree_util.tree_leaves(tree):
        return tree
    return custom_linear(opaque_identity, opaque_identity, tree)


# --- implementations (plain gathers; callers go through the linear maps below) -------


def _segmented_scan(graph: PreparedGraph, overflow: Array,
                    combine: Callable[[Array, Array], Array]) -> Array:
    """Within each node's run of overflow rows, the running `combine`: `[O, c]`.

    Doubling passes: row `i` takes in row `i - stride` of its run, stride 1, 2, 4, ...,
    up to the largest power of 2 below `O`. A pass that no run reaches back `stride`
    rows leaves every row as it is, and so do all later ones (the runs are shorter than
    `stride`). With at most `UNROLL_SCAN_ROWS` overflow rows (Peptides-func: 2) the
    `ceil(log2 O)` passes are unrolled: no loop, which on a GPU would read its condition
    back to the host at every pass (`opaque_identity`). With more, a loop ends at the
    first pass that no run reaches: `ceil(log2)` of the longest run (a real node owns a
    few overflow rows; a batch's unused rows, all the padding node's, make one run).
    `lax.associative_scan` took 2 log2(O) levels of small kernels whatever the runs,
    about a quarter of a GraphProp training step on the 2-core CPU (docs/benchmarks-log.md,
    "Device-bound training and the epoch anatomy"). The
    loop's output is stored, so no consumer recomputes the scan. Both give the same bits.
    """
    rows = jnp.arange(overflow.shape[0])
    run = jnp.cumsum(graph.overflow_first.astype(jnp.int32))  # each row's run

    def reaches(stride: Array) -> Array:  # the rows whose run goes back `stride` rows
        return (rows >= stride) & (run[jnp.maximum(rows - stride, 0)] == run)

    def body(carry: tuple[Array, Array]) -> tuple[Array, Array]:
        stride, x = carry
        back = x[jnp.maximum(rows - stride, 0)]
        return stride * 2, jnp.where(reaches(stride)[:, None], combine(back, x), x)

    if overflow.shape[0] <= UNROLL_SCAN_ROWS:
        carry: tuple[Array, Array] = (jnp.asarray(1), overflow)
        for _ in range(max(overflow.shape[0] - 1, 0).bit_length()):  # ceil(log2 O) passes
            carry = body(carry)
        return carry[1]

    def more(carry: tuple[Array, Array]) -> Array:
        return (carry[0] < overflow.shape[0]) & jnp.any(reaches(carry[0]))

    return jax.lax.while_loop(more, body, (jnp.int32(1), overflow))[1]


def _overflow_totals(graph: PreparedGraph, overflow: Array,
                     combine: Callable[[Array, Array], Array]) -> Array:
    """Per node, `combine` over its overflow rows, or 0 without any: `[N, c]`."""
    scanned = _segmented_scan(graph, overflow, combine)
    return jnp.where(graph.has_overflow[:, None], scanned[graph.overflow_last], 0)


def _per_node(graph: PreparedGraph, rows: Callable[[int, int], Array]) -> Array:
    """`sum` over each node's rows of `rows(start, stop)` (rows `start:stop`, `[., c]`):
    `[N, c]`. The node rows and the overflow rows are computed apart, so the node-sized
    kernel is the same with or without overflow rows."""
    n = graph.num_nodes
    main = rows(0, n)
    if graph.num_overflow == 0:
        return main
    return main + _overflow_totals(graph, rows(n, graph.num_rows), jnp.add)


def _node_sum(graph: PreparedGraph, rows: Array) -> Array:
    """`[R, c] -> [N, c]`: each node's row plus its overflow rows."""
    return _per_node(graph, lambda start, stop: rows[start:stop])


def _row_owner(graph: PreparedGraph, nodes: Array) -> Array:
    """`[N, c] -> [R, c]`: each row gets its node's value."""
    if graph.num_overflow == 0:
        return nodes
    return jnp.concatenate([nodes, nodes[graph.overflow_owner]])


def _mirror(graph: PreparedGraph, slots: Array) -> Array:
    """`[R K, c]` flat slots -> the values of their mirror slots."""
    return slots[graph.mirror.reshape(-1)]


def _pairs_to_slots(graph: PreparedGraph, pairs: Array) -> Array:
    """`[P, c] -> [R K, c]`: a listed pair's value on its slot, 0 on the other slots."""
    extended = jnp.concatenate([pairs, jnp.zeros((1,) + pairs.shape[1:], pairs.dtype)])
    return extended[graph.slot_pair.reshape(-1)]


def _pair_mask(graph: PreparedGraph, dtype: jnp.dtype[Any]) -> Array:
    mask: Array = (graph.pair_count > 0).astype(dtype)[:, None]
    return mask


def _slots_to_pairs(graph: PreparedGraph, slots: Array) -> Array:
    """`[R K, c] -> [P, c]`: the slot value of each listed pair (0 on padding pairs)."""
    return slots[graph.pair_slot] * _pair_mask(graph, slots.dtype)


def _gather_sum(graph: PreparedGraph, pairs: Array, index: Array) -> Array:
    """`[P, c] -> [N, c]`: per node, the sum over its slots of `pairs[index[r, k]]`
    (`index == P` reads a zero row)."""
    extended = jnp.concatenate([pairs, jnp.zeros((1,) + pairs.shape[1:], pairs.dtype)])

    def rows(start: int, stop: int) -> Array:
        out = extended[index[start:stop, 0]]
        for k in range(1, index.shape[1]):
            out = out + extended[index[start:stop, k]]
        return out

    return _per_node(graph, rows)


def _sum_slots(graph: PreparedGraph, slots: Array) -> Array:
    """`[R K, c]` flat slots -> per-node sums over every slot of its rows `[N, c]`."""
    r, k = graph.num_rows, graph.slot_width
    slots = slots.reshape(r, k, -1)
    return _per_node(graph, lambda start, stop: slots[start:stop].sum(axis=1))


# --- linear maps with gather-only transposes --------------------------------------


def _between_rows_and_nodes(graph: PreparedGraph, x: Array,
                            fn: Callable[[PreparedGraph, Array], Array],
                            fn_t: Callable[[PreparedGraph, Array], Array],
                            size_in: int, size_out: int) -> Array:
    """`fn` (one of `_node_sum`, `_row_owner`) as a linear map whose transpose is `fn_t`."""
    flat, tail = _as_rows(x, 1)
    out = _embedded(functools.partial(fn, graph), functools.partial(fn_t, graph), flat,
                    size_in, size_out)
    return out.reshape((size_out,) + tail)


def node_sum(graph: PreparedGraph, rows: Array) -> Array:
    """Sum each node's rows: `[R, ...] -> [N, ...]` (identity without overflow rows)."""
    if graph.num_overflow == 0:
        return rows
    return _between_rows_and_nodes(graph, rows, _node_sum, _row_owner, graph.num_rows,
                                   graph.num_nodes)


def row_owner(graph: PreparedGraph, nodes: Array) -> Array:
    """Each row's node value: `[N, ...] -> [R, ...]` (identity without overflow rows)."""
    if graph.num_overflow == 0:
        return nodes
    return _between_rows_and_nodes(graph, nodes, _row_owner, _node_sum, graph.num_nodes,
                                   graph.num_rows)


def gather_neighbors(graph: PreparedGraph, nodes: Array) -> Array:
    """`nodes[neighbors]`: `[N, ...] -> [R, K, ...]`."""
    flat, tail = _as_rows(nodes, 1)
    r, k, n = graph.num_rows, graph.slot_width, graph.num_nodes

    def forward(x: Array) -> Array:
        return x[graph.neighbors.reshape(-1)]

    def transpose(g: Array) -> Array:
        return _sum_slots(graph, _mirror(graph, g))

    return _embedded(forward, transpose, flat, n, r * k).reshape((r, k) + tail)


def mirror_slots(graph: PreparedGraph, slots: Array) -> Array:
    """The value of each slot's mirror: `[R, K, ...] -> [R, K, ...]` (its own transpose)."""
    flat, tail = _as_rows(slots, 2)
    mirrored = functools.partial(_mirror, graph)
    return custom_linear(mirrored, mirrored, flat).reshape(slots.shape[:2] + tail)


def pairs_to_slots(graph: PreparedGraph, pairs: Array) -> Array:
    """A listed pair's value on its slot, 0 elsewhere: `[P, ...] -> [R, K, ...]`."""
    flat, tail = _as_rows(pairs, 1)
    r, k, p = graph.num_rows, graph.slot_width, graph.num_pairs
    out = _embedded(functools.partial(_pairs_to_slots, graph),
                    functools.partial(_slots_to_pairs, graph), flat, p, r * k)
    return out.reshape((r, k) + tail)


def gather_pair_ends(graph: PreparedGraph, receiver_values: Array, sender_values: Array
                     ) -> Array:
    """`receiver_values[u] + sender_values[v]` for each listed pair `(u <- v)`: `[P, c]`.

    0 on padding pairs. The transposes sum a pair's cotangent into its receiver over the
    receiver's slots, and into its sender over the mirrored slots. Where both come from
    one array `[R | S]`, `gather_pair_ends_joined` takes it whole.
    """
    return gather_pair_ends_joined(graph, jnp.concatenate([receiver_values, sender_values],
                                                          axis=-1))


def gather_pair_ends_joined(graph: PreparedGraph, ends: Array) -> Array:
    """`R[u] + S[v]` for each listed pair `(u <- v)` of `ends = [R | S]` `[N, 2c]`: `[P, c]`.

    Its transpose gives the cotangent of `ends` as one array, both halves side by side.
    Taking `R` and `S` as column slices of `ends` instead, the transpose adds two padded
    copies, and XLA's CPU backend fuses the two gather-sums into that addition: SWAN-learn's
    edge MLP spent 9.5 of its 43 ms of forward and backward there (Peptides-func batch).
    """
    n, p = graph.num_nodes, graph.num_pairs
    if jnp.ndim(ends) != 2 or ends.shape[-1] % 2:
        raise ValueError(f"ends of shape {tuple(jnp.shape(ends))} is not [N, 2c]: two blocks "
                         f"of columns, receivers' then senders'")
    c = ends.shape[-1] // 2
    mask = _pair_mask(graph, ends.dtype)

    def forward(rows: Array) -> Array:  # [2N, c]: node u's R at row 2u, its S at 2u + 1
        return (rows[2 * graph.pair_receivers] + rows[2 * graph.pair_senders + 1]) * mask

    def transpose(g: Array) -> Array:
        mirrored = graph.slot_pair.reshape(-1)[graph.mirror.reshape(-1)]
        to_receivers = _gather_sum(graph, g, graph.slot_pair)  # over the node's slots
        to_senders = _gather_sum(graph, g, mirrored.reshape(graph.slot_pair.shape))
        return jnp.stack([to_receivers, to_senders], axis=1).reshape(2 * n, c)

    return _embedded(forward, transpose, ends.reshape(2 * n, c), 2 * n, p)


# --- the aggregation ---------------------------------------------------------------


def _slot_rows(graph: PreparedGraph, values: Sequence[Array], ys: Sequence[Array],
               start: int = 0, stop: int | None = None) -> Array:
    """`rows[r] = sum_k sum_i values_i[r, k] * ys_i[neighbors[r, k]]` for the rows
    `start:stop` (all by default): `[stop - start, c]`."""
    neighbors = graph.neighbors[start:stop]
    values = [v[start:stop] for v in values]
    k_max = graph.slot_width
    if k_max <= UNROLL_SLOTS:
        out: Array | None = None
        for k in range(k_max):
            column = neighbors[:, k]
            for v, y in zip(values, ys, strict=True):
                term = v[:, k, None] * y[column]
                out = term if out is None else out + term
        return cast(Array, out)  # an Array: the callers skip a layout without slots
    return cast(Array, sum(jnp.einsum("rk,rkc->rc", v, y[neighbors])
                           for v, y in zip(values, ys, strict=True)))


def _slot_rows_transposed(graph: PreparedGraph, transposed: Sequence[Array], g: Array,
                          start: int = 0, stop: int | None = None) -> list[Array]:
    """`[M_i^T g]` as rows `start:stop`, sharing one gather of `g` per slot column."""
    neighbors = graph.neighbors[start:stop]
    transposed = [v[start:stop] for v in transposed]
    if graph.slot_width > UNROLL_SLOTS:
        gathered = g[neighbors]
        return [jnp.einsum("rk,rkc->rc", v, gathered) for v in transposed]
    outs: list[Array | None] = [None] * len(transposed)
    for k in range(neighbors.shape[1]):
        column = g[neighbors[:, k]]
        for i, v in enumerate(transposed):
            term = v[:, k, None] * column
            before = outs[i]
            outs[i] = term if before is None else before + term
    filled = cast(list[Array], outs)  # every entry set: the callers skip K = 0
    if graph.slot_width >= STORE_TRANSPOSES_FROM:
        return materialize(filled)
    return filled


def _aggregate_impl(graph: PreparedGraph, values: Sequence[Array], ys: Sequence[Array]
                    ) -> Array:
    """`sum_i M_i Y_i` for the `[N, c]` inputs `ys`: `[N, c]`."""
    if graph.slot_width == 0 or graph.num_rows == 0:
        return jnp.zeros_like(ys[0])
    return _per_node(graph, lambda start, stop: _slot_rows(graph, values, ys, start, stop))


def _transposed_per_node(graph: PreparedGraph, transposed: Sequence[Array], g: Array
                         ) -> list[Array]:
    """`[M_i^T g]` per node: `[N, c]` each."""
    main = _slot_rows_transposed(graph, transposed, g, 0, graph.num_nodes)
    if graph.num_overflow == 0:
        return main
    over = _slot_rows_transposed(graph, transposed, g, graph.num_nodes, graph.num_rows)
    return [m + _overflow_totals(graph, o, jnp.add) for m, o in zip(main, over, strict=True)]


def _is_zero(t: object) -> bool:
    return t is None or type(t) is SymbolicZero


def _blocks(y: Array, count: int, own: bool) -> tuple[Array | None, list[Array]]:
    """`y = [Y_0 | Y_1 | ... | Y_count]` (`Y_0` only if `own`) -> `Y_0` (or None) and the
    operator blocks `Y_i`, `[N, c]` each (column slices: no copies)."""
    c = y.shape[-1] // (count + own)
    parts = [y[:, j * c:(j + 1) * c] for j in range(count + own)]
    return (parts[0] if own else None), parts[own:]


def _blocks_impl(graph: PreparedGraph, values: Sequence[Array], y: Array,
                 bias: Array | None) -> Array:
    own, ys = _blocks(y, len(values), bias is not None)
    out = _aggregate_impl(graph, values, ys)
    return out if own is None or bias is None else own + bias + out  # both or neither


@jax.custom_jvp
def _aggregate(graph: PreparedGraph, values: tuple[Array, ...],
               transposed: tuple[Array, ...], y: Array,
               bias: Array | None) -> Array:
    """`sum_i M_i Y_i` over the blocks of `y`, or `Y_0 + bias + sum_i M_i Y_i` with a bias."""
    return _blocks_impl(graph, values, y, bias)


def _values_cotangent(graph: PreparedGraph, g: Array, ys: Sequence[Array]) -> list[Array]:
    """`d<g, sum_k v[:, k] y[neighbors[:, k]]> / dv = <g[row], y[neighbor]>` per slot,
    every slot column in one pass per `y`: `[R, K]` each."""
    if not ys:
        return []
    # One gather of every `y` row at once (adjacent column slices of one product merge
    # back into it), then a batched dot: written as a sum of products, XLA's CPU backend
    # hands it to a reduction kernel measured 10-50x slower here. Node rows read `g`
    # itself; the few overflow rows read their node's row.
    both = jnp.concatenate(ys, axis=-1)
    n, k, m = graph.num_nodes, graph.slot_width, len(ys)

    def dots(rows: Array, neighbors: Array) -> Array:
        gathered = both[neighbors].reshape(rows.shape[0], k, m, -1)
        return jnp.einsum("rc,rkjc->rkj", rows, gathered)

    out = dots(g, graph.neighbors[:n])
    if graph.num_overflow:
        out = jnp.concatenate([out, dots(g[graph.overflow_owner], graph.neighbors[n:])])
    return [out[:, :, j] for j in range(m)]


def _pad_columns(x: Array, columns: int) -> Array:
    return jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, columns - x.shape[-1])])


def _linear_map(fn: Linear, fn_transpose: Linear, b: tuple[Array, ...], like: Array
                ) -> Array:
    """`fn(b)` (an array shaped like `like`) for a linear `fn` of the tuple `b`, with
    transpose `fn_transpose: like -> tuple`; see `custom_linear` for the embedding.

    An input with `like`'s rows and at least its columns holds the output in its first
    columns (`Y_0 + ...` of a `[N, (1 + T) c]` input: its cotangent is then `fn_transpose`
    of the output's, not that plus a padded copy)."""
    cols = like.shape[-1]
    for j, leaf in enumerate(b):
        if (leaf.shape[:-1] == like.shape[:-1] and leaf.shape[-1] >= cols
                and leaf.ndim == like.ndim and leaf.dtype == like.dtype):
            def forward(v: tuple[Array, ...], j: int = j) -> tuple[Array, ...]:
                out = _pad_columns(fn(v), v[j].shape[-1])
                return tuple(out if i == j else jnp.zeros_like(x) for i, x in enumerate(v))

            def backward(c: tuple[Array, ...], j: int = j) -> Any:
                return fn_transpose(c[j][..., :cols])

            solution = custom_linear(forward, backward, b)
            # Tie the (zero) other outputs in, so that no cotangent of the solve is ever a
            # symbolic zero (its transpose rule cannot take one); XLA drops the zeros.
            return functools.reduce(
                jnp.add, (0 * jnp.sum(x) for i, x in enumerate(solution) if i != j),
                solution[j][..., :cols])
    # No input has the output's rows: embed both in one flat vector.
    sizes = [leaf.size for leaf in b]
    size = max(sum(sizes), like.size)

    def unflatten(flat: Array) -> tuple[Array, ...]:
        parts: list[Array] = []
        start = 0
        for leaf, n in zip(b, sizes, strict=True):
            parts.append(flat[start:start + n].reshape(leaf.shape))
            start += n
        return tuple(parts)

    def flatten(tree: Sequence[Array]) -> Array:
        return _pad_rows(jnp.concatenate([leaf.reshape(-1) for leaf in tree]), size)

    flat = custom_linear(lambda v: _pad_rows(fn(unflatten(v)).reshape(-1), size),
                         lambda c: flatten(fn_transpose(c[:like.size].reshape(like.shape))),
                         flatten(b))
    return flat[:like.size].reshape(like.shape)


def _aggregate_jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]
                   ) -> tuple[Array, Array]:
    graph, values, transposed, y, bias = primals
    # The output depends on neither the layout (indices) nor `transposed`.
    _, d_values, _, d_y, d_bias = tangents
    out = _blocks_impl(graph, values, y, bias)
    own, ys = _blocks(y, len(values), bias is not None)
    y_live, bias_live = not _is_zero(d_y), not _is_zero(d_bias)
    live_v = [i for i, t in enumerate(d_values) if not _is_zero(t)]
    b = ((d_y,) if y_live else ()) + ((d_bias,) if bias_live else ()) + tuple(
        d_values[i] for i in live_v)
    if not b or graph.num_rows == 0:  # no rows: no nodes, an empty output
        return out, jnp.zeros_like(out)
    split = y_live + bias_live

    def tangent(v: tuple[Array, ...]) -> Array:
        """`dY_0 + d bias + sum_i M_i dY_i + sum_i dM_i Y_i`: one slot pass."""
        d_own, d_ys = _blocks(v[0], len(values), own is not None) if y_live else (None, [])
        inputs = d_ys + [ys[i] for i in live_v]
        head = [t for t in (d_own, v[split - 1] if bias_live else None) if t is not None]
        if inputs:
            head.append(_aggregate_impl(graph, (list(values) if y_live else [])
                                        + list(v[split:]), inputs))
        return jnp.broadcast_to(functools.reduce(jnp.add, head), out.shape)

    def tangent_t(g: Array) -> tuple[Array, ...]:
        """`[g | M_1^T g | ...]` (one gather of `g` per slot column for all `M_i^T`), the
        bias's sum over nodes, and `<g[row], Y_i[neighbor]>`."""
        parts: list[Array] = []
        if y_live:
            g_ys = _transposed_per_node(graph, transposed, g)
            parts.append(jnp.concatenate(([g] if own is not None else []) + g_ys, axis=-1))
        if bias_live:
            parts.append(jnp.sum(g, axis=0))
        return tuple(parts) + tuple(_values_cotangent(graph, g, [ys[i] for i in live_v]))

    return out, _linear_map(tangent, tangent_t, b, out)


_aggregate.defjvp(_aggregate_jvp, symbolic_zeros=True)


def _checked_blocks(values: Sequence[Array], transposed: Sequence[Array], y: Array,
                    own: int) -> None:
    if len(values) != len(transposed) or not values:
        raise ValueError(f"aggregate needs one transposed operator per operator and at least "
                         f"one, got {len(values)} and {len(transposed)}")
    if jnp.ndim(y) != 2 or y.shape[-1] % (len(values) + own):
        raise ValueError(f"y of shape {tuple(jnp.shape(y))} does not split into "
                         f"{len(values) + own} column blocks")


def aggregate(graph: PreparedGraph, values: Sequence[Array], transposed: Sequence[Array],
              ys: Sequence[Array]) -> Array:
    """`sum_i M_i Y_i`, the slot operators `M_i` given by their values: `[N, c]`.

    Args:
      graph: the prepared graph.
      values: `[R, K]` values of each `M_i` (slot `(r, k)` holds `M_i[u, v]`).
      transposed: `[R, K]` values of each `M_i^T` (`values_i` at the mirror slot: the
        values themselves for a symmetric operator, their negation for an
        antisymmetric one). Used only to transpose; no gradient flows through them.
      ys: `[N, c]` inputs, one per operator, all of one shape (several are
        concatenated; `mix_aggregate` takes them as blocks of one array).

    One pass gathers every `Y_i` row per slot; the transpose in `Y` gathers the
    cotangent once per slot column for all `M_i^T`. Bilinear: gradients reach the
    values (the learned operators) through products with gathered `Y_i` only.
    """
    ys = tuple(ys)
    shapes = {tuple(y.shape) for y in ys}
    if len(shapes) != 1:
        raise ValueError(f"aggregate needs inputs of one shape, got {sorted(shapes)}")
    y = ys[0] if len(ys) == 1 else jnp.concatenate(ys, axis=-1)
    _checked_blocks(values, transposed, y, 0)
    return _aggregate(layout_only(graph), tuple(values), tuple(transposed), y, None)


def mix_aggregate(graph: PreparedGraph, values: Sequence[Array], transposed: Sequence[Array],
                  y: Array, bias: Array) -> Array:
    """`Y_0 + bias + sum_i M_i Y_i` for `y = [Y_0 | Y_1 | ... | Y_T]` `[N, (1 + T) c]` and
    `bias [c]`: `[N, c]` (SWAN's field after its one `[N, d] x [d, (1 + T) c]` product).

    `values`, `transposed` as in `aggregate`. The cotangent in `y` is one concatenation
    `[g | M_1^T g | ... | M_T^T g]`: taking `Y_i` as column slices of `y` instead, the
    transpose sums `T + 1` padded copies, which XLA's CPU backend fuses with the gathers
    into a kernel that cost 3x the forward aggregation (the transfer-cpu step: 82 of 294
    ms).
    """
    _checked_blocks(values, transposed, y, 1)
    c = y.shape[-1] // (len(values) + 1)
    if jnp.shape(bias) != (c,):
        raise ValueError(f"bias has shape {tuple(jnp.shape(bias))}; expected ({c},) for "
                         f"blocks of width {c}")
    return _aggregate(layout_only(graph), tuple(values), tuple(transposed), y, bias)


def layout_only(graph: PreparedGraph) -> PreparedGraph:
    """The graph without its GraphsTuple fields and counts: what the kernels index with."""
    return graph._replace(nodes=None, edges=None, receivers=None, senders=None, globals=None,
                          n_node=None, n_edge=None, forward_count=None, backward_count=None)


def densify(graph: PreparedGraph, values: Array) -> Array:
    """The dense `[N, N]` operator of slot values (tests and analysis only): a slot
    `(r, k)` of node `u` naming `v` puts `values[r, k]` at `[u, v]`."""
    n = graph.num_nodes
    eye = jnp.eye(n, dtype=values.dtype)
    return aggregate(graph, (values,), (values,), (eye,))


def node_max(graph: PreparedGraph, rows: Array) -> Array:
    """Per node, the maximum over its rows: `[R] -> [N]` (no derivative: hold it with
    `stop_gradient`, e.g. as a softmax shift)."""
    n = graph.num_nodes
    if graph.num_overflow == 0:
        return rows
    totals = _overflow_totals(graph, rows[n:, None], jnp.maximum)[:, 0]
    return jnp.where(graph.has_overflow, jnp.maximum(rows[:n], totals), rows[:n])
