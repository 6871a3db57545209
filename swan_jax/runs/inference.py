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
from flax.errors import FlaxError

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
    _check_fits(model, variables, data, next(iterate_batches(data, batch_size, budget)))
    rows = []
    for batch in iterate_batches(data, batch_size, budget):
        out = np.asarray(apply(variables, jax.tree_util.tree_map(jnp.asarray, batch.graph)))
        rows.append(out[batch.node_mask if level == "node" else batch.graph_mask])
    return np.concatenate(rows)


def _check_fits(model: nn.Module, variables: Any, data: GraphDataset, batch) -> None:
    """The model applied to the first batch's shapes (`jax.eval_shape`: nothing runs):
    graphs featurised unlike the training data (another node feature width, edge
    features the model does not know) fail here in one line instead of Flax's and
    XLA's shape traceback."""
    graph = jax.tree_util.tree_map(jnp.asarray, batch.graph)
    try:
        jax.eval_shape(model.apply, variables, graph)
    except (TypeError, ValueError, FlaxError) as err:  # Flax's shape errors, dot_general
        edges = "no" if data.edges is None else str(data.edges.shape[1])
        reason = " ".join(str(err).split("\n")[0].split(" (https://")[0].split())
        raise ValueError(
            f"these graphs do not fit the model: {data.nodes.shape[1]} node feature(s) and "
            f"{edges} edge feature(s) per row, and applying it fails ({reason}); give graphs "
            f"featurised as its training data were") from None
