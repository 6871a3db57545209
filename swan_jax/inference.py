"""Predictions of a trained model over a whole data set, in the data set's order.

`predict(model, variables, data, level=...)` batches `data` with the training code's
padded budgets (one compilation for every batch), applies the model and keeps the real
rows: `[sum n_node, T]` for node-level models, `[G, T]` for graph-level ones.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from swan_jax.data.batching import budget_for, iterate_batches
from swan_jax.data.dataset import GraphDataset

LEVELS = ("node", "graph")


def predict(model: nn.Module, variables: Any, data: GraphDataset, *, level: str,
            batch_size: int = 32) -> np.ndarray:
    """`model.apply(variables, batch)` over every graph of `data`, padding dropped.

    Returns `[sum n_node, T]` (`level="node"`) or `[G, T]` (`level="graph"`) as NumPy, in
    the order of `data`'s nodes / graphs.
    """
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; valid: {', '.join(LEVELS)}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if len(data) == 0:
        raise ValueError("the data set holds no graphs: nothing to predict")
    batch_size = min(batch_size, len(data))
    budget = budget_for(data, batch_size)
    apply = jax.jit(model.apply)
    rows = []
    for batch in iterate_batches(data, batch_size, budget):
        out = np.asarray(apply(variables, jax.tree_util.tree_map(jnp.asarray, batch.graph)))
        rows.append(out[batch.node_mask if level == "node" else batch.graph_mask])
    return np.concatenate(rows)
