"""The splits a training call gets: whole data sets, or node splits of shared graphs.

Graph-level benchmarks split the graphs (`{"train": GraphDataset, ...}`). Node
classification on one graph (Cora, Tolokers, ...) splits its nodes: `NodeSplit(data,
node_mask)` marks the split's nodes of the SAME graphs, and a benchmark with ten official
splits is ten such dicts. The loop carries the mask as an extra last target column, so it
rides through padding and shuffling with its node and never needs a batching change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from swan_jax.data.dataset import GraphDataset


@dataclasses.dataclass(frozen=True)
class NodeSplit:
    """The nodes of one split on a data set's graphs.

    Attributes:
      data: the graphs (every split of a benchmark usually shares one).
      node_mask: `[sum n_node]` bool, True on the split's nodes.
    """

    data: GraphDataset
    node_mask: np.ndarray

    def __post_init__(self) -> None:
        mask = np.asarray(self.node_mask)
        rows = int(np.sum(self.data.n_node))
        if mask.dtype != bool or mask.shape != (rows,):
            raise ValueError(f"node_mask must be bool of shape ({rows},), got {mask.dtype} "
                             f"{mask.shape}")
        if not mask.any():
            raise ValueError("node_mask selects no node")


Split = GraphDataset | NodeSplit


def prepare_splits(splits: Mapping[str, Split], level: str
                   ) -> tuple[dict[str, GraphDataset], bool]:
    """Data sets to batch, and whether their targets end in a split-mask column.

    Raises ValueError for missing train / val splits, missing targets of `level`, or node
    splits with graph-level targets.
    """
    for split in ("train", "val"):
        if split not in splits:
            raise ValueError(f"splits lack {split!r} (got {sorted(splits)})")
    masked = any(isinstance(s, NodeSplit) for s in splits.values())
    if masked and level != "node":
        raise ValueError("NodeSplit selects nodes: use task_level='node'")
    out = {}
    for name, split in splits.items():
        data = split.data if isinstance(split, NodeSplit) else split
        targets = data.node_targets if level == "node" else data.graph_targets
        if targets is None:
            raise ValueError(f"split {name!r} has no {level}-level targets")
        if masked:
            mask = (split.node_mask if isinstance(split, NodeSplit)
                    else np.ones(len(targets), bool))
            column = mask[:, None].astype(targets.dtype)
            data = dataclasses.replace(data, node_targets=np.concatenate([targets, column], 1))
        out[name] = data
    return out, masked
