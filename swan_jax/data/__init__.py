"""Data sets as flat NumPy arrays, and padded jraph batches with fixed budgets."""

from swan_jax.data.dataset import CACHE_VERSION, GraphDataset

__all__ = ["CACHE_VERSION", "GraphDataset"]
