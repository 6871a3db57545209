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
from typing import cast

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from swan_jax.ogb_vocabulary import ATOM_FEATURE_DIMS

Array = jax.Array


class AtomEncoder(nn.Module):
    """Sum of per-feature embeddings of integer node codes `[N, F] -> [N, hidden]`.

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
        codes = codes.astype(jnp.int32)
        out: Array | float = 0.0
        for i, size in enumerate(self.feature_dims):
            table = nn.Embed(size, self.hidden, embedding_init=nn.initializers.xavier_uniform(),
                             name=f"embed_{i}")
            out = out + table(codes[:, i])
        return cast(Array, out)  # an Array: a sum over the (non-empty) feature columns


class LinearNodeEncoder(nn.Module):
    """`Linear(F -> hidden)` on float node features (PascalVOC-SP's 14 channels)."""

    hidden: int

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple) -> Array:
        return nn.Dense(self.hidden)(jnp.asarray(graph.nodes, jnp.float32))
