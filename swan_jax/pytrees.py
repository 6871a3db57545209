"""Small helpers over pytrees of arrays."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def tree_size(tree: Any) -> int:
    """Number of scalars in a pytree (arrays or `jax.ShapeDtypeStruct`s), e.g. parameters."""
    return sum(int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(tree))


def tree_bytes(tree: Any) -> int:
    """Bytes of every leaf of a pytree (arrays or `jax.ShapeDtypeStruct`s)."""
    return sum(int(np.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize
               for leaf in jax.tree_util.tree_leaves(tree))
