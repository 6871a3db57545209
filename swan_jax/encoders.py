"""Input encoders for the LRGB data sets: `GraphsTuple -> [N, hidden]`.

They share the call signature of `swan_jax.models.LinearEncoder`, so any of them can be
the `encoder` of a `swan_jax.models.Model`.

* `AtomEncoder`: OGB's `AtomEncoder` (`ogb/graphproppred/mol_encoder.py`) -- one embedding
  table per categorical atom feature (9 OGB atom codes, vocabulary sizes
  `swan_jax.ogb_vocabulary.ATOM_FEATURE_DIMS`; no RDKit needed), Xavier-uniform
  initialised, and the node embedding is their sum.
  Used for Peptides-func / -struct.
* `LinearNodeEncoder`: `Linear(14 -> hidden)` on PascalVOC-SP's float superpixel features
  (LRGB's `VOCNodeEncoder`).

Padding nodes of a batch carry zero features (codes 0), so they embed like any other node;
they sit in the padding graph only and never reach real graphs.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from swan_jax.graph.gather import custom_linear
from swan_jax.ogb_vocabulary import ATOM_FEATURE_DIMS

Array = jax.Array


# How the atom encoder's tables get their gradient: None chooses by platform (a scatter-add
# on a CPU, a dense product elsewhere, see `embedding_sum`); "scatter" or "dense" forces
# one (tests compare them).
EMBED_BACKWARD: str | None = None


class AtomEncoder(nn.Module):
    """Sum of per-feature embeddings of integer node codes `[N, F] -> [N, hidden]`.

    One `nn.Embed` table per feature (parameters `embed_i/embedding` `[vocab_i, hidden]`),
    looked up together by `embedding_sum`: the same values as summing `nn.Embed` lookups,
    one gather forward and one backward operation instead of nine each.

    Attributes:
      hidden: embedding width.
      feature_dims: vocabulary size of each of the `F` code columns (OGB's atom codes
        by default).
    """

    hidden: int
    feature_dims: Sequence[int] = ATOM_FEATURE_DIMS

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple) -> Array:
        codes = jnp.asarray(graph.nodes)
        if codes.ndim != 2 or codes.shape[1] != len(self.feature_dims):
            raise ValueError(f"AtomEncoder expects integer node codes [N, "
                             f"{len(self.feature_dims)}], got shape {codes.shape}")
        tables = [nn.Embed(size, self.hidden, embedding_init=nn.initializers.xavier_uniform(),
                           name=f"embed_{i}").embedding
                  for i, size in enumerate(self.feature_dims)]
        return embedding_sum(tables, codes.astype(jnp.int32), backward=EMBED_BACKWARD)


def embedding_sum(tables: Sequence[Array], codes: Array, *,
                  backward: str | None = None) -> Array:
    """`sum_i tables[i][codes[:, i]]` (in the order of `i`): `[N, d]` for `F` tables
    `[V_i, d]` and codes `[N, F]`, each code read as `jnp.take` (`nn.Embed`) reads it: a
    negative code counts from the table's end, one out of range looks up NaN.

    One lookup into the concatenated table `[sum V_i, d]`, a linear map of the table
    whose transpose (the tables' gradient, `T^T g`) is:

    - `backward="scatter"` (a CPU's default): one scatter-add of `g` to every code's row.
      Each row receives the same terms in the same order (node order) as the nine
      `nn.Embed` scatter-adds did: the same bits on a CPU.
    - `backward="dense"` (the default elsewhere): `C^T g` with `C [N, sum V_i]` the 0/1
      matrix of the codes' rows, one product at full float32 precision. A GPU's
      scatter-add accumulates with atomics into a few rows (most atoms are carbon): the
      H200 profile found the nine of them 20% of SWAN-learn's kernel time
      (docs/benchmarks-log.md, "Operations per training step"; `python -m
      benchmarks.device_profile --only peptides-learn`).
      The product sums a row's terms in another order (the matmul's), so a gradient
      moves by float32 rounding; a GPU's atomics had no fixed order either.
    """
    if backward not in (None, "scatter", "dense"):
        raise ValueError(f"backward must be 'scatter', 'dense' or None, got {backward!r}")
    sizes = [int(t.shape[0]) for t in tables]
    total, start = sum(sizes), 0
    rows: list[Array] = []  # rows of the concatenated table; `total` (out of range: NaN) if none
    for i, size in enumerate(sizes):
        code = codes[:, i]
        if size == 1:  # `nn.Embed` broadcasts its one row whatever the code
            row = jnp.full_like(code, start)
        else:
            code = jnp.where(code < 0, code + size, code)
            row = jnp.where((code >= 0) & (code < size), code + start, total)
        rows.append(row)
        start += size
    index = jnp.stack(rows, axis=1)
    table = jnp.concatenate(tables)

    def transpose(g):
        if backward is not None:
            return _TRANSPOSES[backward](g, index, total)
        return jax.lax.platform_dependent(
            g, cpu=lambda g: _scatter_transpose(g, index, total),
            default=lambda g: _dense_transpose(g, index, total))

    return _lookup_sum(table, index, transpose)


def _lookup_sum(table: Array, index: Array, transpose) -> Array:
    """`sum_f table[index[:, f]]` as a linear map of `table` with transpose `transpose`
    (`gather.custom_linear`, both embedded in `max(V, N)` rows)."""
    v, n = table.shape[0], index.shape[0]
    size = max(v, n)

    def forward(t):
        rows = jnp.take(t[:v], index, axis=0)  # [N, F, d]; NaN where index == v
        out = 0.0
        for f in range(index.shape[1]):
            out = out + rows[:, f]
        return _pad_rows(out, size)

    return custom_linear(forward, lambda g: _pad_rows(transpose(g[:n]), size),
                         _pad_rows(table, size))[:n]


def _pad_rows(x: Array, rows: int) -> Array:
    return jnp.pad(x, [(0, rows - x.shape[0])] + [(0, 0)] * (x.ndim - 1))


def _scatter_transpose(g: Array, index: Array, rows: int) -> Array:
    """`[rows, d]`: every code's row gets its node's `g` (out-of-range codes dropped)."""
    n, f = index.shape
    terms = jnp.broadcast_to(g[:, None, :], (n, f, g.shape[-1])).reshape(n * f, -1)
    return jnp.zeros((rows, g.shape[-1]), g.dtype).at[index.reshape(-1)].add(terms, mode="drop")


def _dense_transpose(g: Array, index: Array, rows: int) -> Array:
    """`C^T g` `[rows, d]`, `C [N, rows]` counting each node's codes (none out of range)."""
    counts = jnp.sum(index[:, :, None] == jnp.arange(rows), axis=1).astype(g.dtype)
    return jnp.einsum("nv,nd->vd", counts, g, precision=jax.lax.Precision.HIGHEST)


_TRANSPOSES = {"scatter": _scatter_transpose, "dense": _dense_transpose}


class LinearNodeEncoder(nn.Module):
    """`Linear(F -> hidden)` on float node features (PascalVOC-SP's 14 channels)."""

    hidden: int

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple) -> Array:
        return nn.Dense(self.hidden)(jnp.asarray(graph.nodes, jnp.float32))
