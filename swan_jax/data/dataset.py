"""`GraphDataset`: many graphs as flat NumPy arrays (what every loader returns).

Bring your own graphs with `GraphDataset.from_graphs` (jraph `GraphsTuple`s, networkx
graphs or dicts of arrays); `dataset[i]` gives graph `i` back as a `GraphsTuple`, and
`dataset.split()` the `{"train", "val", "test"}` dict `swan_jax.train.train` takes.

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
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import jraph
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


def _as_rows(values) -> np.ndarray:
    """A 1-D array as one column `[n, 1]`; 2-D as it is."""
    arr = np.asarray(values)
    return arr[:, None] if arr.ndim == 1 else arr


def _joined(parts: list[dict], key: str, *, required: bool = False,
            empty: tuple[int, ...] = (0, 1)) -> np.ndarray | None:
    """The per-graph arrays under `key`, concatenated; None when no graph has them.

    Raises ValueError when only some graphs carry the field (or a required one is absent).
    """
    present = [p.get(key) is not None for p in parts]
    if not any(present):
        if required and parts:
            raise ValueError(f"the graphs carry no {key}")
        return np.zeros(empty, np.float32 if key == "nodes" else np.int32) if required \
            else None
    if not all(present):
        g = present.index(False)
        raise ValueError(f"graph {g} has no {key} but graph {present.index(True)} has; "
                         f"give every graph the same fields")
    arrays = [np.asarray(p[key]) for p in parts]
    if key == "graph_targets":  # one row per graph: `[T]` or `[1, T]`
        arrays = [a.reshape(1, -1) if a.ndim <= 1 else a for a in arrays]
    if key not in ("senders", "receivers"):
        arrays = [_as_rows(a) for a in arrays]
        widths = {a.shape[1:] for a in arrays}
        if len(widths) > 1:
            g = next(i for i, a in enumerate(arrays) if a.shape[1:] != arrays[0].shape[1:])
            raise ValueError(f"graph {g}: {key} has shape {arrays[g].shape[1:]} per row, "
                             f"graph 0 has {arrays[0].shape[1:]}; every graph needs the same")
    joined = np.concatenate(arrays)
    # networkx / Python floats arrive as float64; JAX computes in float32 by default.
    return joined.astype(np.float32) if joined.dtype == np.float64 else joined


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
        for name in ("nodes", "edges", "node_targets", "graph_targets"):
            arr = getattr(self, name)
            if arr is not None and not (np.issubdtype(arr.dtype, np.number)
                                        or arr.dtype == np.bool_):
                raise ValueError(f"{name} must be numbers, got dtype {arr.dtype} (e.g. "
                                 f"{str(arr.flat[0])!r}): encode text or categories as numbers "
                                 f"first (an index, or one-hot columns)" if arr.size else
                                 f"{name} must be numbers, got dtype {arr.dtype}")
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

    def __getitem__(self, index: int) -> jraph.GraphsTuple:
        """Graph `index` as a one-graph NumPy `jraph.GraphsTuple`.

        `nodes [n, F]`, `edges [e, Fe]` or None, local `senders` / `receivers [e]`,
        `n_node = [n]`, `n_edge = [e]`, and `globals [1, T]` = the graph-level targets (None
        without them). Node-level targets: `node_targets_of(index)`. For several graphs
        as a data set, use `subset(indices)`.
        """
        g = self._graph_index(index)
        nodes, edges = self._rows(g)
        return jraph.GraphsTuple(
            nodes=self.nodes[nodes], edges=None if self.edges is None else self.edges[edges],
            senders=self.senders[edges], receivers=self.receivers[edges],
            n_node=self.n_node[g:g + 1], n_edge=self.n_edge[g:g + 1],
            globals=None if self.graph_targets is None else self.graph_targets[g:g + 1])

    def __iter__(self) -> Iterator[jraph.GraphsTuple]:
        return (self[g] for g in range(len(self)))

    def node_targets_of(self, index: int) -> np.ndarray | None:
        """`[n, T]` node-level targets of graph `index`, or None."""
        if self.node_targets is None:
            return None
        return self.node_targets[self._rows(self._graph_index(index))[0]]

    def _graph_index(self, index: int) -> int:
        if not isinstance(index, int | np.integer):
            raise TypeError(f"a GraphDataset is indexed by one int, got "
                            f"{type(index).__name__}; use subset(indices) for several graphs")
        g = int(index) + (len(self) if index < 0 else 0)
        if not 0 <= g < len(self):
            raise IndexError(f"graph {index} is out of range for {len(self)} graphs")
        return g

    def _rows(self, g: int) -> tuple[slice, slice]:
        n_off, e_off = self.node_offsets, self.edge_offsets
        return slice(n_off[g], n_off[g + 1]), slice(e_off[g], e_off[g + 1])

    def split(self, fractions: Sequence[float] = (0.8, 0.1, 0.1), *, seed: int = 0,
              names: Sequence[str] = ("train", "val", "test")) -> dict[str, GraphDataset]:
        """A random split of the graphs, as `train()` takes it: `{"train": ..., ...}`.

        `fractions` (one per name, summing to 1) are rounded down to whole graphs; the
        last split takes the rest. Every split gets at least one graph.
        """
        if len(fractions) != len(names) or not np.isclose(sum(fractions), 1.0) or \
                min(fractions) <= 0:
            raise ValueError(f"fractions must be {len(names)} positive numbers summing to 1 "
                             f"(one per split {list(names)}), got {list(fractions)}")
        if len(self) < len(names):
            raise ValueError(f"{len(self)} graph(s) cannot fill {len(names)} splits")
        order = np.random.default_rng(seed).permutation(len(self))
        sizes = [max(1, int(f * len(self))) for f in fractions[:-1]]
        bounds = np.cumsum([0, *sizes])
        if bounds[-1] >= len(self):
            raise ValueError(f"fractions {list(fractions)} leave the last split empty "
                             f"with {len(self)} graphs")
        parts = [order[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        parts.append(order[bounds[-1]:])
        return {name: self.subset(np.sort(p)) for name, p in zip(names, parts, strict=True)}

    @classmethod
    def from_graphs(cls, graphs: Iterable[Any], *, node_features: str | None = "x",
                    edge_features: str | None = None, node_target: str | None = None,
                    graph_target: str | None = None, node_targets: Sequence | None = None,
                    graph_targets: Any = None, meta: dict[str, str] | None = None,
                    ) -> GraphDataset:
        """A data set from a user's own graphs (`swan_jax.data.convert` reads each one).

        Args:
          graphs: `jraph.GraphsTuple`s (one or several graphs each; `globals [G, T]` are
            the graph-level targets), networkx graphs, or dicts with `nodes`, `senders`,
            `receivers` and optionally `edges`, `node_targets`, `graph_targets` -- mixed
            freely.
          node_features, edge_features, node_target, graph_target: networkx only: the
            node / edge attributes and the `G.graph` key that hold those (None: not read;
            `node_features=None`: graphs without node features, each node then gets the
            constant feature 1, one column `[n, 1]`).
          node_targets: `[n_g, T]` per graph, overriding what the graphs carry.
          graph_targets: `[G, T]` (or `[G]`), overriding what the graphs carry.
          meta: short strings saying what produced the data (kept in caches).

        Every graph must carry the same fields; features become `[rows, F]` arrays, and
        float64 values float32 (JAX's default precision).
        """
        from swan_jax.data.convert import Attributes, per_graph

        parts = per_graph(graphs, Attributes(node_features, edge_features, node_target,
                                             graph_target))
        if not parts:  # refused here, not at the first batch that finds nothing
            raise ValueError("from_graphs got no graphs: give at least one graph")
        if node_targets is not None:
            if len(node_targets) != len(parts):
                raise ValueError(f"node_targets has {len(node_targets)} entries for "
                                 f"{len(parts)} graphs")
            parts = [{**p, "node_targets": _as_rows(t)}
                     for p, t in zip(parts, node_targets, strict=True)]
        targets = None if graph_targets is None else _as_rows(graph_targets)
        if targets is not None and len(targets) != len(parts):
            raise ValueError(f"graph_targets has {len(targets)} rows for {len(parts)} graphs")
        columns: dict[str, Any] = dict(  # arrays after `__post_init__`
            nodes=_joined(parts, "nodes", required=True),
            edges=_joined(parts, "edges"),
            senders=_joined(parts, "senders", required=True, empty=(0,)),
            receivers=_joined(parts, "receivers", required=True, empty=(0,)),
            n_node=[len(p["nodes"]) for p in parts],
            n_edge=[len(p["senders"]) for p in parts],
            node_targets=_joined(parts, "node_targets"),
            graph_targets=targets if targets is not None else _joined(parts, "graph_targets"),
        )
        return cls(**columns, meta=dict(meta or {}))

    def save(self, path: str | Path, **extra: np.ndarray) -> None:
        """Write atomically (temporary file, then rename) with the cache version stamp,
        compressed: Peptides-func's featurised graphs take 7 MB instead of 180 MB, and read
        back in 0.5 s instead of 0.4 s."""
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
            np.savez_compressed(tmp, **arrays)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    @classmethod
    def read(cls, path: str | Path) -> GraphDataset:
        """A data set written by `save` (e.g. your own graphs, for `swan-predict --data`).

        Unlike `load` (a cache: None when stale or unreadable), this raises: FileNotFoundError,
        or ValueError in one line naming the file and what is wrong with it.
        """
        import zipfile

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist (write one with GraphDataset.save)")
        if not zipfile.is_zipfile(path):  # a script, a pickle, a CSV: say what is read
            raise ValueError(f"{path} is not a GraphDataset file: the graphs are read from "
                             f"the .npz archive GraphDataset.save writes (e.g. "
                             f"GraphDataset.from_graphs(graphs).save('graphs.npz')), not "
                             f"from a {path.suffix or 'suffix-less'} file")
        try:
            with np.load(path, allow_pickle=False) as f:
                if "nodes" not in f or "n_node" not in f:
                    raise ValueError(f"it holds {sorted(f.files)}, not the arrays of "
                                     f"GraphDataset.save")
                fields: dict[str, Any] = {k: (f[k] if k in f else None) for k in _FIELDS}
                meta = json.loads(str(f["meta_json"])) if "meta_json" in f else {}
        except (OSError, ValueError, EOFError) as err:
            raise ValueError(f"{path} is not a GraphDataset file ({err})".replace("\n", " ")
                             ) from None
        return cls(**fields, meta=meta if isinstance(meta, dict) else {})

    @classmethod
    def load(cls, path: str | Path) -> tuple[GraphDataset, dict[str, np.ndarray]] | None:
        """The cached data set and its extras, or None when missing, stale or unreadable
        (a truncated or corrupt file, or one whose arrays are no data set, is named on
        stderr; the caller rebuilds it). This is the loaders' cache reader: your own file
        is read by `read`, which returns the data set alone and raises when it is missing
        or not a data set."""
        import sys
        import zipfile
        import zlib

        try:
            with np.load(path, allow_pickle=False) as f:
                if "cache_version" not in f or int(f["cache_version"]) != CACHE_VERSION:
                    return None
                fields: dict[str, Any] = {k: (f[k] if k in f else None) for k in _FIELDS}
                extra = {k[len("extra_"):]: f[k] for k in f.files if k.startswith("extra_")}
                meta = json.loads(str(f["meta_json"])) if "meta_json" in f else {}
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error) as err:
            print(f"cache {path} is unreadable ({type(err).__name__}: {err}); rebuilding it",
                  file=sys.stderr, flush=True)
            return None
        if not isinstance(meta, dict):
            return None
        try:
            return cls(**fields, meta=meta), extra
        except (ValueError, TypeError) as err:  # a whole file of the wrong arrays
            print(f"cache {path} holds arrays that are not a data set ({err}); rebuilding it",
                  file=sys.stderr, flush=True)
            return None
