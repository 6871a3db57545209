"""The splits a training call gets: whole data sets, or node splits of shared graphs.

Graph-level benchmarks split the graphs (`{"train": GraphDataset, ...}`). Node
classification on one graph (Cora, Tolokers, ...) splits its nodes: `NodeSplit(data,
node_mask)` marks the split's nodes of the SAME graphs, and a benchmark with ten official
splits is ten such dicts. The loop carries the mask as an extra last target column, so it
rides through padding and shuffling with its node and never needs a batching change.

Several splits in one program: `node_mask [rows, S]` holds S splits' masks, and each run
names the split it trains and is scored on by the numeric hyper-parameter `"split"`
(`SPLIT_AXIS`, a grid axis of values 0 .. S-1, vmapped like any other). The column then
holds each node's splits as bits (`sum_s 2^s mask[:, s]`, exact in float32 up to 24
splits) and a run keeps the rows whose bit `split` is set (`split_rows`); one split's
column is the plain 0/1 mask as before. The splits' metrics are scored on the host (one
run's rows are not another's): device-reduced metrics refuse several splits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from swan_jax.data.dataset import GraphDataset

SPLIT_AXIS = "split"  # the hyper-parameter naming a run's column of a `[rows, S]` mask
MAX_SPLITS = 24  # bits of a float32 mantissa


@dataclasses.dataclass(frozen=True)
class NodeSplit:
    """The nodes of one split on a data set's graphs.

    Attributes:
      data: the graphs (every split of a benchmark usually shares one).
      node_mask: `[sum n_node]` bool, True on the split's nodes; or `[sum n_node, S]`:
        S splits at once, a run's split chosen by its hyper-parameter `"split"`.
    """

    data: GraphDataset
    node_mask: np.ndarray

    def __post_init__(self) -> None:
        mask = np.asarray(self.node_mask)
        rows = int(np.sum(self.data.n_node))
        if mask.dtype != bool or mask.shape[:1] != (rows,) or mask.ndim not in (1, 2):
            raise ValueError(f"node_mask must be bool of shape ({rows},) or ({rows}, splits), "
                             f"got {mask.dtype} {mask.shape}")
        if mask.ndim == 2 and not 1 <= mask.shape[1] <= MAX_SPLITS:
            raise ValueError(f"node_mask holds {mask.shape[1]} splits; 1 to {MAX_SPLITS} fit "
                             f"one program")
        empty = ~mask.reshape(rows, -1).any(axis=0)
        if empty.any():
            raise ValueError("node_mask selects no node" + (
                f" in split(s) {np.flatnonzero(empty).tolist()}" if mask.ndim == 2 else ""))

    @property
    def num_splits(self) -> int:
        """Splits the mask holds (1 for a `[rows]` mask)."""
        return 1 if np.ndim(self.node_mask) == 1 else int(np.shape(self.node_mask)[1])

    def code(self) -> np.ndarray:
        """The mask column: 0/1 for one split, each node's splits as bits for several."""
        mask = np.asarray(self.node_mask)
        if mask.ndim == 1:
            return mask
        return (mask * (2.0 ** np.arange(mask.shape[1]))).sum(axis=1)


Split = GraphDataset | NodeSplit


def num_splits(splits: Mapping[str, Split]) -> int:
    """Splits the node masks hold (1 without node splits); ValueError when they differ."""
    counts = {s.num_splits for s in splits.values() if isinstance(s, NodeSplit)}
    if len(counts) > 1:
        raise ValueError(f"the NodeSplits hold {sorted(counts)} splits: give every split "
                         f"the same number of mask columns")
    return counts.pop() if counts else 1


def split_rows(code, select):
    """Rows of a run's split: `code > 0` (one split, `select` None), else bit `select`
    of `code` set. `select` a scalar (one run) or `[runs]` (then `[runs, rows]`);
    NumPy or JAX arrays alike."""
    if select is None:
        return code > 0
    select = select[..., None] if getattr(select, "ndim", 0) else select
    return (code // 2.0 ** select) % 2 > 0


def prepare_splits(splits: Mapping[str, Split], level: str
                   ) -> tuple[dict[str, GraphDataset], bool]:
    """Data sets to batch, and whether their targets end in a split-mask column.

    Raises ValueError for missing train / val splits, missing targets of `level`, or node
    splits with graph-level targets.
    """
    for needed in ("train", "val"):
        if needed not in splits:
            raise ValueError(f"splits lack {needed!r} (got {sorted(splits)})")
    masked = any(isinstance(s, NodeSplit) for s in splits.values())
    if masked and level != "node":
        raise ValueError("NodeSplit selects nodes: use task_level='node'")
    out: dict[str, GraphDataset] = {}
    for name, split in splits.items():
        data = split.data if isinstance(split, NodeSplit) else split
        targets = data.node_targets if level == "node" else data.graph_targets
        if targets is None:
            raise ValueError(f"split {name!r} has no {level}-level targets")
        if masked:
            mask = (split.code() if isinstance(split, NodeSplit)
                    else np.ones(len(targets), bool))
            column = mask[:, None].astype(targets.dtype)
            data = dataclasses.replace(data, node_targets=np.concatenate([targets, column], 1))
        out[name] = data
    return out, masked
