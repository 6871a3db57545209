"""`GraphDataset`: many graphs as flat NumPy arrays (what every loader returns).

Graphs are stored back to back: node rows of graph g are
`node_offsets[g] : node_offsets[g] + n_node[g]`, and `senders` / `receivers` are
*local* indices inside each graph. Saved as one `.npz` with a version stamp, so a cache
written by another version of the code is rebuilt rather than misread.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path

import numpy as np

# Bump when any loader's processed output changes: caches with another stamp are rebuilt.
CACHE_VERSION = 1

_FIELDS = ("nodes", "edges", "senders", "receivers", "n_node", "n_edge",
           "node_targets", "graph_targets")


def _index_array(name: str, values) -> np.ndarray:
    """`values` as 1-D int32, refusing what the cast would change silently.

    Fractions, non-finite values, booleans and numbers beyond int32 raise ValueError
    naming the field and the first bad index; integral floats (an empty list) pass.
    """
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return arr.astype(np.int32)
    integer = np.issubdtype(arr.dtype, np.integer)
    if not (integer or np.issubdtype(arr.dtype, np.floating)):
        raise ValueError(f"{name} must hold integers, got dtype {arr.dtype}")
    if not integer:
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{name}[{i}] = {arr[i]} is not an integer (dtype {arr.dtype})")
    info = np.iinfo(np.int32)
    bad = (arr < info.min) | (arr > info.max)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}[{i}] = {arr[i]} does not fit in int32")
    return arr.astype(np.int32)


def _first_non_finite(arr: np.ndarray | None) -> tuple[int, int, float] | None:
    """(row, column, value) of the first NaN / Inf of a float array, or None."""
    if arr is None or not np.issubdtype(arr.dtype, np.floating):
        return None
    bad = ~np.isfinite(arr)
    if not np.any(bad):
        return None
    index = np.unravel_index(int(np.flatnonzero(bad.reshape(-1))[0]), arr.shape)
    column = int(index[1]) if arr.ndim > 1 else 0
    return int(index[0]), column, arr[index]


@dataclasses.dataclass
class GraphDataset:
    """Graphs back to back.

    Attributes:
      nodes: `[sum n_node, F]` node features (float, or int codes for categorical ones).
      edges: `[sum n_edge, Fe]` edge features, or None.
      senders, receivers: `[sum n_edge]` int32 local node indices within each graph.
      n_node, n_edge: `[G]` int32 counts.
      node_targets: `[sum n_node, T]` node-level targets, or None.
      graph_targets: `[G, T]` graph-level targets, or None.
      meta: what produced the data, as short strings (e.g. `{"node_features": "raw"}`),
        saved with the cache and kept by `subset`, so a results row can state it.
    """

    nodes: np.ndarray
    edges: np.ndarray | None
    senders: np.ndarray
    receivers: np.ndarray
    n_node: np.ndarray
    n_edge: np.ndarray
    node_targets: np.ndarray | None = None
    graph_targets: np.ndarray | None = None
    meta: dict[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("n_node", "n_edge", "senders", "receivers"):
            setattr(self, name, _index_array(name, getattr(self, name)))
        for name in ("nodes", "edges", "node_targets", "graph_targets"):
            if getattr(self, name) is not None:
                setattr(self, name, np.asarray(getattr(self, name)))
        self.check()

    def __len__(self) -> int:
        return int(self.n_node.shape[0])

    @property
    def node_offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.n_node)]).astype(np.int64)

    @property
    def edge_offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.n_edge)]).astype(np.int64)

    def check(self) -> None:
        """Raise ValueError naming the first inconsistency (graph index, field)."""
        if self.n_edge.shape != self.n_node.shape:
            raise ValueError(f"n_edge has {self.n_edge.shape[0]} graphs but n_node has "
                             f"{self.n_node.shape[0]}")
        for name in ("n_node", "n_edge"):
            counts = getattr(self, name)
            if np.any(counts < 0):
                g = int(np.flatnonzero(counts < 0)[0])
                raise ValueError(f"graph {g}: {name}[{g}] = {int(counts[g])} is negative")
        for name in ("nodes", "edges"):
            arr = getattr(self, name)
            if arr is not None and arr.ndim != 2:
                raise ValueError(f"{name} must be 2-D [rows, features], got shape {arr.shape}")
        total_nodes, total_edges = int(self.n_node.sum()), int(self.n_edge.sum())
        if self.nodes.shape[0] != total_nodes:
            raise ValueError(
                f"nodes has {self.nodes.shape[0]} rows but sum(n_node) = {total_nodes}"
            )
        for name in ("senders", "receivers"):
            if getattr(self, name).shape != (total_edges,):
                raise ValueError(f"{name} has shape {getattr(self, name).shape}, "
                                 f"expected ({total_edges},) from sum(n_edge)")
        if self.edges is not None and self.edges.shape[0] != total_edges:
            raise ValueError(
                f"edges has {self.edges.shape[0]} rows but sum(n_edge) = {total_edges}"
            )
        if self.node_targets is not None and self.node_targets.shape[0] != total_nodes:
            raise ValueError(f"node_targets has {self.node_targets.shape[0]} rows "
                             f"but sum(n_node) = {total_nodes}")
        if self.graph_targets is not None and self.graph_targets.shape[0] != len(self):
            raise ValueError(f"graph_targets has {self.graph_targets.shape[0]} rows "
                             f"but there are {len(self)} graphs")
        if total_edges:
            limit = np.repeat(self.n_node, self.n_edge)
            for name in ("senders", "receivers"):
                arr = getattr(self, name)
                bad = (arr < 0) | (arr >= limit)
                if np.any(bad):
                    e = int(np.flatnonzero(bad)[0])
                    g = int(np.searchsorted(self.edge_offsets, e, side="right") - 1)
                    raise ValueError(f"graph {g}: {name}[{e}] = {int(arr[e])} is out of range "
                                     f"for its {int(self.n_node[g])} nodes")
        for name, offsets in (("nodes", self.node_offsets), ("edges", self.edge_offsets),
                              ("node_targets", self.node_offsets), ("graph_targets", None)):
            found = _first_non_finite(getattr(self, name))
            if found is not None:
                row, column, value = found
                g = row if offsets is None else int(
                    np.searchsorted(offsets, row, side="right") - 1)
                raise ValueError(f"graph {g}: {name} row {row}, column {column} is {value}; "
                                 f"features and targets must be finite")

    def subset(self, indices) -> GraphDataset:
        """The graphs at `indices`, in that order."""
        indices = np.asarray(indices, np.int64)
        n_off, e_off = self.node_offsets, self.edge_offsets
        node_rows = np.concatenate([np.arange(n_off[i], n_off[i + 1]) for i in indices]
                                   or [np.zeros(0, np.int64)])
        edge_rows = np.concatenate([np.arange(e_off[i], e_off[i + 1]) for i in indices]
                                   or [np.zeros(0, np.int64)])
        return GraphDataset(
            nodes=self.nodes[node_rows],
            edges=None if self.edges is None else self.edges[edge_rows],
            senders=self.senders[edge_rows],
            receivers=self.receivers[edge_rows],
            n_node=self.n_node[indices],
            n_edge=self.n_edge[indices],
            node_targets=None if self.node_targets is None else self.node_targets[node_rows],
            graph_targets=None if self.graph_targets is None else self.graph_targets[indices],
            meta=dict(self.meta),
        )

    @classmethod
    def from_graphs(cls, graphs: list[dict]) -> GraphDataset:
        """Concatenate per-graph dicts with keys of `_FIELDS` (minus the counts)."""
        def cat(key):
            parts = [g[key] for g in graphs if g.get(key) is not None]
            return np.concatenate(parts) if len(parts) == len(graphs) and parts else None

        return cls(
            nodes=cat("nodes"),
            edges=cat("edges"),
            senders=np.concatenate([g["senders"] for g in graphs]),
            receivers=np.concatenate([g["receivers"] for g in graphs]),
            n_node=[len(g["nodes"]) for g in graphs],
            n_edge=[len(g["senders"]) for g in graphs],
            node_targets=cat("node_targets"),
            graph_targets=cat("graph_targets") if graphs and graphs[0].get("graph_targets")
            is not None else None,
        )

    def save(self, path: str | Path, **extra: np.ndarray) -> None:
        """Write atomically (temporary file, then rename) with the cache version stamp."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = {k: getattr(self, k) for k in _FIELDS if getattr(self, k) is not None}
        arrays.update({f"extra_{k}": np.asarray(v) for k, v in extra.items()})
        arrays["cache_version"] = np.asarray(CACHE_VERSION)
        if self.meta:
            arrays["meta_json"] = np.asarray(json.dumps(self.meta, sort_keys=True))
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp.npz")
        os.close(fd)
        try:
            np.savez(tmp, **arrays)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    @classmethod
    def load(cls, path: str | Path) -> tuple[GraphDataset, dict[str, np.ndarray]] | None:
        """The cached data set and its extras, or None when missing, stale or unreadable."""
        try:
            with np.load(path, allow_pickle=False) as f:
                if "cache_version" not in f or int(f["cache_version"]) != CACHE_VERSION:
                    return None
                fields = {k: (f[k] if k in f else None) for k in _FIELDS}
                extra = {k[len("extra_"):]: f[k] for k in f.files if k.startswith("extra_")}
                meta = json.loads(str(f["meta_json"])) if "meta_json" in f else {}
        except (OSError, ValueError, KeyError, EOFError):
            return None
        if not isinstance(meta, dict):
            return None
        return cls(**fields, meta=meta), extra
