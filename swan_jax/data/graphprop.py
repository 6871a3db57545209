"""Graph property prediction data (Appendix D.2): SSSP, eccentricity, diameter.

A re-implementation with networkx and NumPy of the generator of PNA's multitask benchmark
(lukecavabarrett/pna, `multitask_benchmark/datasets_generation/`) in the "25 to 35 nodes"
setting that ADGN (and then SWAN) used. It follows that generator's description; random
streams differ, so the graphs are not the same ones, only the same distribution.

Per graph, with N fixed per batch:

1. A family is drawn with weights `FAMILY_WEIGHTS` (Erdos-Renyi 0.2, Barabasi-Albert 0.2,
   tree 0.15, caterpillar 0.1, lobster 0.1, grid, caveman, ladder, line, star 0.05 each) and
   built with exactly N nodes by its generator in `FAMILIES` (see each docstring).
2. The nodes are shuffled (random permutation).
3. The edges are perturbed (`perturb_adjacency`): each existing edge is kept, each missing
   one added, by comparing one random value per node pair with thresholds chosen so that the
   expected number of edges would stay the same under uniform values; as in PNA the value is
   the sum of two U[0, 0.5) draws, so in practice about 2 % of the edges of a sparse graph
   are dropped and very few are added.
4. If a node ends up isolated, steps 1 (same family, fresh randomness) to 3 are redone.
   Connectivity is not enforced: caveman graphs, for one, are disconnected.

Inputs: `nodes[:, 0]` one-hot of the source node (uniform at random), `nodes[:, 1]` a value
uniform in [0, 1). Raw node labels come in PNA's column order `PNA_NODE_COLUMNS`:
`[sssp, eccentricity, laplacian]` with sssp the hop distance from the source (0 where
unreachable), eccentricity the largest finite distance from each node, laplacian `(D - A) x`
on the value channel; the graph label is the diameter (largest finite distance).

Label settings (`labels=`, see `LABEL_SETTINGS`):

* "paper": what produced the paper's Table 1 (ADGN's pipeline, which the paper follows):
  RAW labels and ADGN's columns. ADGN's loader (`gravins/Anti-SymmetricDGN`,
  `graph_prop_pred/utils/pna_dataset.py`, lines 64-69) calls `super().__init__(root)`
  before it sets `self.pre_transform`, so `process()` runs without the normalising
  transform; and it reads PNA's node labels as if they were `[eccentricity, laplacian,
  sssp]` (its comment, line 45: only PNA's command-line default order) while PNA stores
  `[sssp, eccentricity, laplacian]` (`multitask_dataset.py`, lines 105-121: the distances
  first, then `--nodes_labels` without "sssp"). SWAN's loader (`gravins/SWAN`,
  `graph_property_prediction/utils/gpp_dataset.py`, lines 87-92) picks the same columns.
  So the paper's "SSSP" column is PNA column 2, the Laplacian features `(D - A) x` (a
  one-hop target), its "Eccentricity" column is PNA column 0, the single-source
  distances, true eccentricity is never trained, and the diameter is right
  (`trained_column`). Loss: per-graph node means, then the mean over graphs
  (`swan_jax.losses.graph_mean_mse`); batch size 512 (ADGN's `model_selection.py`).
* "faithful": the task as the paper describes it: every task its own column, labels
  divided by their maximum over the training split (`train_max`), per column.
* "swan-code": what the SWAN authors' released code computes (`gravins/SWAN`,
  `graph_property_prediction/utils/gpp_dataset.py`): ADGN's columns, labels divided by the
  training maxima (that loader does call its `normalize`); batch size 128.

The older keyword `label_columns` still works and always normalises:
`label_columns="paper"` is `labels="faithful"`, `label_columns="adgn"` is
`labels="swan-code"`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import networkx as nx
import numpy as np

from swan_jax.data.dataset import GraphDataset
from swan_jax.graph import adjacency_edges, networkx_adjacency

FAMILY_WEIGHTS = {
    "erdos_renyi": 0.2,
    "barabasi_albert": 0.2,
    "tree": 0.15,
    "caterpillar": 0.1,
    "lobster": 0.1,
    "grid": 0.05,
    "caveman": 0.05,
    "ladder": 0.05,
    "line": 0.05,
    "star": 0.05,
}
PNA_NODE_COLUMNS = ("sssp", "eccentricity", "laplacian")
TASKS = ("sssp", "eccentricity", "diameter")
NODE_TASKS = ("sssp", "eccentricity")
LABEL_COLUMNS = {  # the legacy `label_columns` names: "paper" = each task its own column
    "paper": {"sssp": 0, "eccentricity": 1},
    "adgn": {"sssp": 2, "eccentricity": 0},
}


@dataclass(frozen=True)
class LabelSetting:
    """How one label setting reads, scales and trains on the labels (module docstring).

    `columns` keys `LABEL_COLUMNS`; `normalise` divides by the training maxima; `loss`,
    `batch_size` and `metric` are the training protocol of the pipeline it reproduces
    (`loss` names a `swan_jax.losses` function; "graph_mean_log10_mse" is log10 of the
    mean over graphs of each graph's node-mean squared error, i.e. of `graph_mean_mse`).
    """

    columns: str
    normalise: bool
    loss: str
    batch_size: int
    metric: str = "graph_mean_log10_mse"


LABEL_SETTINGS: dict[str, LabelSetting] = {
    "paper": LabelSetting(columns="adgn", normalise=False, loss="graph_mean_mse",
                          batch_size=512),
    "faithful": LabelSetting(columns="paper", normalise=True, loss="graph_mean_mse",
                             batch_size=512),
    "swan-code": LabelSetting(columns="adgn", normalise=True, loss="graph_mean_mse",
                              batch_size=128),
}
LEGACY_LABEL_COLUMNS = {"paper": "faithful", "adgn": "swan-code"}  # label_columns -> labels
COLUMN_TITLES = {"sssp": "single-source distances", "eccentricity": "eccentricity",
                 "laplacian": "Laplacian features (D - A) x", "diameter": "diameter"}
SPLITS = ("train", "val", "test")
DEFAULT_SEED = 1234
DEFAULT_NODES = {"train": tuple(range(25, 35)), "val": tuple(range(25, 30)),
                 "test": tuple(range(25, 30))}
DEFAULT_PER_SIZE = {"train": 512, "val": 128, "test": 256}
KEEP_P = 0.9  # base probability of keeping an edge in the perturbation


# ----------------------------------------------------------------------------- families

def _int_seed(rng: np.random.Generator) -> int:
    return int(rng.integers(2**31 - 1))


def _balanced_factor(n: int) -> int:
    """Largest divisor of n not above sqrt(n) (1 when n is prime)."""
    return max(i for i in range(1, math.isqrt(n) + 1) if n % i == 0)


def erdos_renyi(n: int, rng: np.random.Generator) -> nx.Graph:
    """G(n, p) with the edge probability p uniform in [0, 1)."""
    return nx.fast_gnp_random_graph(n, float(rng.random()), seed=_int_seed(rng))


def barabasi_albert(n: int, rng: np.random.Generator) -> nx.Graph:
    """Preferential attachment with m edges per new node, m uniform in {1, ..., n-1} (PNA)."""
    m = int(rng.integers(1, n))
    return nx.barabasi_albert_graph(n, m, seed=_int_seed(rng))


def grid(n: int, rng: np.random.Generator | None = None) -> nx.Graph:
    """An a x (n / a) 2-D grid, a the largest divisor of n up to sqrt(n) (1 x n if n is prime)."""
    a = _balanced_factor(n)
    return nx.convert_node_labels_to_integers(nx.grid_2d_graph(a, n // a), ordering="sorted")


def caveman(n: int, rng: np.random.Generator | None = None) -> nx.Graph:
    """a disjoint cliques of n / a nodes, a as for `grid` (one n-clique if n is prime)."""
    a = _balanced_factor(n)
    return nx.caveman_graph(a, n // a)


def _powerlaw_degrees(n: int, rng: np.random.Generator, size: int) -> list[int]:
    """Power-law (exponent 3) samples rounded and clipped to {0, ..., n}."""
    return np.clip(np.rint(rng.pareto(2.0, size) + 1.0), 0, n).astype(int).tolist()


def tree(n: int, rng: np.random.Generator, tries: int = 10000) -> nx.Graph:
    """A random tree with a power-law degree sequence, the model of PNA's
    `networkx.random_powerlaw_tree(n, gamma=3, tries=10000)`, with NumPy randomness.

    Degrees are drawn from a power law of exponent 3 (Pareto with shape 2), rounded and
    clipped to [0, n]; a uniformly chosen entry is redrawn until the sequence is that of a
    tree (positive degrees summing to 2 (n - 1)), and `networkx.degree_sequence_tree` builds
    the tree (a backbone path of the non-leaves, leaves attached). After `tries` failed
    redraws a uniform random labelled tree (Pruefer sequence) is used instead.
    """
    if n <= 2:
        return nx.path_graph(n)
    degrees = _powerlaw_degrees(n, rng, n)
    swaps: list[int] = []
    for _ in range(tries):
        if sum(degrees) == 2 * (n - 1) and min(degrees) >= 1:
            return nx.convert_node_labels_to_integers(nx.degree_sequence_tree(degrees))
        if not swaps:
            swaps = _powerlaw_degrees(n, rng, 256)
        degrees[int(rng.integers(n))] = swaps.pop()
    return nx.from_prufer_sequence(rng.integers(0, n, n - 2).tolist())


def ladder(n: int, rng: np.random.Generator | None = None) -> nx.Graph:
    """Two rows of n // 2 nodes joined rung by rung; for odd n one more node hangs off node 0."""
    graph = nx.ladder_graph(n // 2)
    if n % 2:
        graph.add_edge(0, n - 1)
    return graph


def line(n: int, rng: np.random.Generator | None = None) -> nx.Graph:
    """A path of n nodes."""
    return nx.path_graph(n)


def star(n: int, rng: np.random.Generator | None = None) -> nx.Graph:
    """One hub joined to n - 1 leaves."""
    return nx.star_graph(n - 1)


def caterpillar(n: int, rng: np.random.Generator) -> nx.Graph:
    """A backbone path of b nodes, b uniform in {1, ..., n-1}; each of the other n - b nodes
    hangs off a backbone node drawn uniformly."""
    b = int(rng.integers(1, n))
    graph = nx.path_graph(b)
    graph.add_edges_from((i, int(rng.integers(b))) for i in range(b, n))
    return graph


def lobster(n: int, rng: np.random.Generator) -> nx.Graph:
    """A backbone path of b nodes (b uniform in {1, ..., n-1}); nodes b ... f-1 (f uniform in
    {b+1, ..., n}) hang off backbone nodes, nodes f ... n-1 off those, all drawn uniformly."""
    b = int(rng.integers(1, n))
    f = int(rng.integers(b + 1, n + 1))
    graph = nx.path_graph(b)
    graph.add_edges_from((i, int(rng.integers(b))) for i in range(b, f))
    graph.add_edges_from((i, int(rng.integers(b, f))) for i in range(f, n))
    return graph


FAMILIES: dict[str, Callable[[int, np.random.Generator], nx.Graph]] = {
    "erdos_renyi": erdos_renyi,
    "barabasi_albert": barabasi_albert,
    "tree": tree,
    "caterpillar": caterpillar,
    "lobster": lobster,
    "grid": grid,
    "caveman": caveman,
    "ladder": ladder,
    "line": line,
    "star": star,
}
FAMILY_NAMES = tuple(FAMILY_WEIGHTS)


# ------------------------------------------------------------------------ perturbation

def perturb_adjacency(adj: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Toggle a few edges of a symmetric boolean adjacency matrix (PNA's randomisation).

    With e edges and r missing pairs: when e <= r an edge stays if its pair value is below
    0.9 and a missing pair appears below 0.1 e / r; otherwise the thresholds are
    0.9 + 0.1 (e - r) / e and 0.1. The pair value is u_ij + u_ji with u uniform in [0, 0.5),
    so (on [0, 1), peaked at 0.5) edges of sparse graphs survive with probability 0.98 and a
    missing pair appears with probability 2 (0.1 e / r)^2.
    """
    adj = np.asarray(adj, bool)
    n = adj.shape[0]
    e = adj.sum() / 2
    r = n * (n - 1) / 2 - e
    if e <= r:
        keep_p, add_p = KEEP_P, ((1 - KEEP_P) * e / r if r > 0 else 0.0)
    else:
        keep_p, add_p = KEEP_P + (1 - KEEP_P) * (e - r) / e, 1 - KEEP_P
    u = rng.uniform(0.0, 0.5, size=(n, n))
    value = u + u.T
    off_diag = ~np.eye(n, dtype=bool)
    return (adj & (value < keep_p)) | (~adj & (value < add_p) & off_diag)


def draw_graph(n: int, rng: np.random.Generator, family: str | None = None,
               perturb: bool = True) -> tuple[np.ndarray, str]:
    """A boolean `[n, n]` adjacency matrix without isolated nodes, and its family."""
    if family is None:
        weights = np.array([FAMILY_WEIGHTS[f] for f in FAMILY_NAMES])
        family = FAMILY_NAMES[int(rng.choice(len(FAMILY_NAMES), p=weights / weights.sum()))]
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; valid ones: {', '.join(FAMILY_NAMES)}")
    while True:
        graph = FAMILIES[family](n, rng)
        if graph.number_of_nodes() != n:  # a generator bug, not bad luck
            raise AssertionError(f"{family} built {graph.number_of_nodes()} nodes, not {n}")
        adj = networkx_adjacency(graph)
        perm = rng.permutation(n)
        adj = adj[np.ix_(perm, perm)]
        if perturb:
            adj = perturb_adjacency(adj, rng)
        if adj.any(axis=0).all():
            return adj, family


# ----------------------------------------------------------------------------- labels

def shortest_path_lengths(adj: np.ndarray) -> np.ndarray:
    """All-pairs hop distances of a boolean adjacency matrix; -1 where unreachable."""
    adj = np.asarray(adj, bool)
    n = adj.shape[0]
    a = adj.astype(np.float32)
    dist = np.full((n, n), -1, np.int32)
    reached = np.eye(n, dtype=bool)
    frontier = reached.copy()
    dist[reached] = 0
    step = 0
    while frontier.any():
        step += 1
        frontier = ((frontier.astype(np.float32) @ a) > 0) & ~reached
        dist[frontier] = step
        reached |= frontier
    return dist


def graph_labels(adj: np.ndarray, x: np.ndarray, source: int) -> tuple[np.ndarray, float]:
    """`([n, 3] node labels in PNA column order, diameter)` for one graph.

    sssp: distance from `source`, 0 where unreachable; eccentricity: largest finite distance
    from each node; laplacian: `(D - A) x`; diameter: largest finite distance.
    """
    adj = np.asarray(adj, bool)
    x = np.asarray(x, np.float64)
    dist = shortest_path_lengths(adj)
    sssp = np.maximum(dist[source], 0)
    ecc = dist.max(axis=1)
    lap = adj.sum(axis=1) * x - adj.astype(np.float64) @ x
    node = np.stack([sssp, ecc, lap], axis=1)
    return node, float(dist.max())


# ------------------------------------------------------------------------- generation

def _generate_split(split_index: int, nodes: Sequence[int], per_size: int,
                    seed: int) -> tuple[GraphDataset, np.ndarray]:
    graphs, families = [], []
    for n in nodes:
        # One stream per (seed, split, batch size): a batch does not depend on the others.
        rng = np.random.default_rng([int(seed), split_index, int(n)])
        for _ in range(per_size):
            adj, family = draw_graph(int(n), rng)
            x = rng.random(n)
            source = int(rng.integers(n))
            node_labels, diameter = graph_labels(adj, x, source)
            feats = np.zeros((n, 2), np.float32)
            feats[source, 0] = 1.0
            feats[:, 1] = x
            s, r = adjacency_edges(adj)  # both directions, sorted
            graphs.append({
                "nodes": feats,
                "senders": s.astype(np.int32),
                "receivers": r.astype(np.int32),
                "node_targets": node_labels.astype(np.float32),
                "graph_targets": np.array([[diameter]], np.float32),
            })
            families.append(FAMILY_NAMES.index(family))
    if not graphs:
        raise ValueError("a split needs at least one graph")
    return GraphDataset.from_graphs(graphs), np.asarray(families, np.int8)


def _resolve(nodes, per_size) -> tuple[dict, dict]:
    nodes = {**DEFAULT_NODES, **(nodes or {})}
    per_size = {**DEFAULT_PER_SIZE, **(per_size or {})}
    for split in SPLITS:
        if any(int(n) < 2 for n in nodes[split]):
            raise ValueError(f"{split}: node counts must be >= 2, got {nodes[split]}")
        if int(per_size[split]) < 1:
            raise ValueError(f"{split}: per_size must be >= 1, got {per_size[split]}")
    nodes = {s: tuple(int(n) for n in nodes[s]) for s in SPLITS}
    per_size = {s: int(per_size[s]) for s in SPLITS}
    return nodes, per_size


def make_graphprop_splits(seed: int = DEFAULT_SEED, nodes: dict | None = None,
                          per_size: dict | None = None) -> dict[str, GraphDataset]:
    """Raw (unnormalised) train / val / test sets.

    `nodes[split]` lists the node counts (one batch per count) and `per_size[split]` the
    graphs per batch; unspecified splits take the paper's defaults (`DEFAULT_NODES`,
    `DEFAULT_PER_SIZE`: 10 x 512 = 5120, 5 x 128 = 640, 5 x 256 = 1280 graphs). Each
    dataset has `nodes [sum N, 2]`, `node_targets [sum N, 3]` (`PNA_NODE_COLUMNS`) and
    `graph_targets [G, 1]` (diameter).
    """
    nodes, per_size = _resolve(nodes, per_size)
    return {split: _generate_split(i, nodes[split], per_size[split], seed)[0]
            for i, split in enumerate(SPLITS)}


def train_max(train: GraphDataset) -> dict[str, np.ndarray]:
    """Per-column maxima of the raw training labels: `node [3]`, `graph [1]`."""
    node, graph = train.node_targets, train.graph_targets
    if node is None or graph is None:
        raise ValueError("train_max needs node- and graph-level targets (GraphProp's raw data)")
    return {"node": node.max(axis=0).astype(np.float32),
            "graph": graph.max(axis=0).astype(np.float32)}


def _safe(m: np.ndarray) -> np.ndarray:
    return np.where(m == 0, 1.0, m).astype(np.float32)


def resolve_labels(labels: str | None = None, label_columns: str | None = None) -> str:
    """The `LABEL_SETTINGS` name meant by `labels` or the legacy `label_columns` (module
    docstring); "faithful" when neither is given."""
    if labels is not None and label_columns is not None:
        raise ValueError(f"give labels or label_columns, not both (got labels={labels!r}, "
                         f"label_columns={label_columns!r})")
    if label_columns is not None:
        if label_columns not in LEGACY_LABEL_COLUMNS:
            raise ValueError(f"label_columns must be one of {tuple(LEGACY_LABEL_COLUMNS)}, "
                             f"got {label_columns!r}")
        return LEGACY_LABEL_COLUMNS[label_columns]
    labels = "faithful" if labels is None else labels
    if labels not in LABEL_SETTINGS:
        raise ValueError(f"labels must be one of {tuple(LABEL_SETTINGS)}, got {labels!r}")
    return labels


def trained_column(task: str, labels: str) -> str:
    """What the task trains on in a label setting (`COLUMN_TITLES`): the "paper" and
    "swan-code" settings read ADGN's columns, so their "sssp" is the Laplacian features
    and their "eccentricity" the single-source distances (module docstring)."""
    _check_task(task)
    if task not in NODE_TASKS:
        return COLUMN_TITLES[task]
    column = LABEL_COLUMNS[LABEL_SETTINGS[resolve_labels(labels)].columns][task]
    return COLUMN_TITLES[PNA_NODE_COLUMNS[column]]


def _check_task(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"unknown graph-property task {task!r}; valid ones: {', '.join(TASKS)}")


def select_task(raw: dict[str, GraphDataset], task: str, label_columns: str | None = None,
                stats: dict[str, np.ndarray] | None = None, *,
                labels: str | None = None) -> dict[str, GraphDataset]:
    """One task's splits from raw ones, in the label setting `labels` (or the legacy
    `label_columns`; default "faithful"). Normalised settings divide by the training maxima
    (`stats`, computed from `raw["train"]` when not given; a zero maximum divides by 1)."""
    _check_task(task)
    setting = LABEL_SETTINGS[resolve_labels(labels, label_columns)]
    if setting.normalise:
        stats = train_max(raw["train"]) if stats is None else stats
    out = {}
    for split, data in raw.items():
        targets = data.node_targets if task in NODE_TASKS else data.graph_targets
        if targets is None:
            raise ValueError(f"split {split!r} has no targets for task {task!r}")
        if task in NODE_TASKS:
            col = LABEL_COLUMNS[setting.columns][task]
            node_t = targets[:, col:col + 1]
            if stats is not None and setting.normalise:
                node_t = node_t / _safe(stats["node"][col])
            graph_t = None
        else:
            node_t = None
            graph_t = targets[:, :1]
            if stats is not None and setting.normalise:
                graph_t = graph_t / _safe(stats["graph"][0])
        out[split] = GraphDataset(
            nodes=data.nodes, edges=None, senders=data.senders, receivers=data.receivers,
            n_node=data.n_node, n_edge=data.n_edge,
            node_targets=None if node_t is None else node_t.astype(np.float32),
            graph_targets=None if graph_t is None else graph_t.astype(np.float32))
    return out


def _cache_root(cache_dir: str | Path | None) -> Path:
    from swan_jax.data.download import default_cache_dir  # beside the downloads

    return default_cache_dir(cache_dir)


def load_graphprop_raw(cache_dir: str | Path | None = None, seed: int = DEFAULT_SEED,
                       nodes: dict | None = None, per_size: dict | None = None,
                       ) -> tuple[dict[str, GraphDataset], dict[str, np.ndarray]]:
    """Raw splits and training maxima, from the cache when present (shared by all tasks).

    Cache: `<cache_dir>/graphprop/raw_seed<seed>_<config hash>_<split>.npz` (default dir
    `$SWAN_CACHE_DIR`, else ~/.cache/swan-jax/processed), each file also holding the
    training maxima and the family index (into `FAMILY_NAMES`) of each graph. If any
    split is missing, stale or unreadable, all are regenerated.
    """
    nodes, per_size = _resolve(nodes, per_size)
    config = json.dumps({"nodes": nodes, "per_size": per_size}, sort_keys=True)
    key = hashlib.sha1(config.encode()).hexdigest()[:12]
    root = _cache_root(cache_dir) / "graphprop"
    paths = {s: root / f"raw_seed{int(seed)}_{key}_{s}.npz" for s in SPLITS}
    loaded = {s: GraphDataset.load(p) for s, p in paths.items()}
    if all(v is not None and {"train_max_node", "train_max_graph"} <= set(v[1])
           for v in loaded.values()):
        raw = {s: v[0] for s, v in loaded.items() if v is not None}  # every split's
        _, extra = cast(tuple[GraphDataset, dict[str, np.ndarray]], loaded["train"])
        return raw, {"node": extra["train_max_node"], "graph": extra["train_max_graph"]}
    raw, families = {}, {}
    for i, split in enumerate(SPLITS):
        raw[split], families[split] = _generate_split(i, nodes[split], per_size[split], seed)
    stats = train_max(raw["train"])
    for split in SPLITS:
        raw[split].save(paths[split], train_max_node=stats["node"],
                        train_max_graph=stats["graph"], families=families[split])
    return raw, stats


def load_graphprop(task: str, label_columns: str | None = None,
                   cache_dir: str | Path | None = None, seed: int = DEFAULT_SEED,
                   nodes: dict | None = None, per_size: dict | None = None, *,
                   labels: str | None = None) -> dict[str, GraphDataset]:
    """Train / val / test for `task` in `TASKS` in one label setting.

    Node tasks: `node_targets [sum N, 1]`, no graph targets; "diameter": `graph_targets
    [G, 1]`, no node targets. `labels` ("paper", "faithful", "swan-code"; default
    "faithful") or the legacy `label_columns` ("paper", "adgn") is explained in the module
    docstring; `nodes` / `per_size` as in `make_graphprop_splits`.
    """
    _check_task(task)
    labels = resolve_labels(labels, label_columns)
    raw, stats = load_graphprop_raw(cache_dir, seed, nodes, per_size)
    return select_task(raw, task, stats=stats, labels=labels)


# ------------------------------------------------------------------ reference scores

def per_graph_squared_error(pred: np.ndarray, target: np.ndarray,
                            n_node: np.ndarray) -> np.ndarray:
    """`[G]` mean squared error of each graph's consecutive rows (`pred`, `target` `[R, T]`,
    `n_node [G]` summing to R; a graph without rows gets NaN)."""
    pred = np.asarray(pred, np.float64).reshape(len(pred), -1)
    target = np.asarray(target, np.float64).reshape(len(target), -1)
    n_node = np.asarray(n_node)
    if pred.shape != target.shape or n_node.sum() != len(pred):
        raise ValueError(f"pred {pred.shape}, target {target.shape} and n_node (sum "
                         f"{int(n_node.sum())}) do not describe the same rows")
    se = ((pred - target) ** 2).mean(axis=1)
    starts = np.concatenate([[0], np.cumsum(n_node)[:-1]])
    sums = np.add.reduceat(se, starts) if len(se) else np.zeros(len(n_node))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_node > 0, sums / np.maximum(n_node, 1), np.nan)


def constant_predictor_scores(splits: dict[str, GraphDataset], task: str,
                              averaging: str = "graph", *, batch_size: int | None = None
                              ) -> dict[str, float]:
    """log10 MSE of the best constant fitted on the training split, for a results row.

    `averaging="graph"` scores like `graph_mean_mse` (per-graph node means, then the mean
    over graphs; the constant is the mean over training graphs of their node-mean label,
    which minimises that loss); `"node"` is the plain MSE over all rows with the plain
    training mean. Graph-level tasks (one row per graph) give the same in both.
    Returns `{"constant", "train", "val", "test"}` (splits that are present); with
    `batch_size`, also `"<split>_authors"`: the authors' batch-averaged score
    (`batch_averaged_log10_mse`) of the same constant.
    """
    _check_task(task)
    if averaging not in ("graph", "node"):
        raise ValueError(f"averaging must be 'graph' or 'node', got {averaging!r}")
    level_node = task in NODE_TASKS

    def rows(data: GraphDataset):
        target = data.node_targets if level_node else data.graph_targets
        if target is None:
            raise ValueError(f"the splits hold no {'node' if level_node else 'graph'} "
                             f"targets for task {task!r}")
        n_node = data.n_node if level_node else np.ones(len(data), np.int64)
        return np.asarray(target, np.float64)[:, :1], n_node

    target, n_node = rows(splits["train"])
    if averaging == "graph":
        per_graph_mean = np.add.reduceat(target[:, 0], np.concatenate(
            [[0], np.cumsum(n_node)[:-1]])) / n_node
        constant = float(per_graph_mean.mean())
    else:
        constant = float(target.mean())
    out = {"constant": constant}
    for split, data in splits.items():
        target, n_node = rows(data)
        pred = np.full_like(target, constant)
        if averaging == "graph":
            mse = float(np.nanmean(per_graph_squared_error(pred, target, n_node)))
        else:
            mse = float(np.mean((pred - target) ** 2))
        out[split] = math.log10(max(mse, 1e-30))
        if batch_size is not None:
            out[f"{split}_authors"] = batch_averaged_log10_mse(pred, target, n_node,
                                                               batch_size=batch_size)
    return out


def constant_predictor(task: str, labels: str = "paper", cache_dir: str | Path | None = None,
                       seed: int = DEFAULT_SEED, nodes: dict | None = None,
                       per_size: dict | None = None) -> dict[str, float]:
    """`constant_predictor_scores` of `load_graphprop(task, labels=labels, ...)`, averaged
    as the setting's loss averages (per graph for every setting in `LABEL_SETTINGS`)."""
    splits = load_graphprop(task, cache_dir=cache_dir, seed=seed, nodes=nodes,
                            per_size=per_size, labels=labels)
    averaging = "graph" if LABEL_SETTINGS[labels].loss == "graph_mean_mse" else "node"
    return constant_predictor_scores(splits, task, averaging)


def batch_averaged_log10_mse(pred: np.ndarray, target: np.ndarray, n_node: np.ndarray, *,
                             batch_size: int) -> float:
    """The authors' score: log10 of the mean over batches of each batch's loss.

    The graphs (`n_node [G]` rows each of `pred`, `target [R, T]`, in the split's order)
    go into consecutive batches of `batch_size` (the authors' unshuffled evaluation
    loader); a batch's loss is the mean over its graphs of each graph's node-mean squared
    error (ADGN's loss; one row per graph for the diameter), and every batch weighs the
    same: at test, 1,280 graphs in batches of 512, 512 and 256, so each graph of the last
    batch counts twice. With one batch (or equal batches) this is the pooled score.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    per_graph = per_graph_squared_error(pred, target, n_node)
    if len(per_graph) == 0:
        raise ValueError("no graphs to score")
    means = [float(np.mean(per_graph[i:i + batch_size]))
             for i in range(0, len(per_graph), batch_size)]
    return math.log10(max(float(np.mean(means)), 1e-30))
