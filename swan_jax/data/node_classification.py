"""Transductive node classification on one large graph: Tolokers, Questions, ogbn-arxiv.

The data sets of the SWAN paper's scalability table (Appendix, "Additional runtimes"),
trained full-batch. Every loader returns a `NodeClassificationData`: ONE graph (a
`GraphDataset` of a single graph, with node features and node targets) and, per official
split, boolean train / val / test node masks, plus the metric and loss of the data set's
own benchmark.

* Tolokers, Questions (Platonov et al., "A critical look at the evaluation of GNNs under
  heterophily", ICLR 2023): one `.npz` each, with `node_features` float `[N, F]`,
  `node_labels` int `[N]` (0/1), `edges` int `[E, 2]` (each undirected edge stored once),
  `train_masks` / `val_masks` / `test_masks` bool `[10, N]`. As that benchmark, the graph
  is made bidirected (both directions, each pair once), the single logit is trained with
  binary cross-entropy and scored by ROC AUC (`metrics.roc_auc`).
* ogbn-arxiv (OGB): the raw files of OGB's `arxiv` folder, `raw/edge.csv.gz` (directed
  citations `u,v`), `raw/node-feat.csv.gz` (128 floats per node), `raw/node-label.csv.gz`
  (40 classes), `split/time/{train,valid,test}.csv.gz` (node indices): one split, cross-
  entropy, accuracy (OGB's `Evaluator`). Edges are made bidirected by default, as OGB's
  GCN baselines (`to_symmetric`); `symmetrize=False` keeps the directed citations.

Raw files are read from `data_dir` (env `SWAN_DATA_DIR`, else `data/`; never written) or
`download_dir` (`download.default_download_dir()`); only Tolokers, whose md5 is known,
is downloaded. Questions and ogbn-arxiv must be fetched by hand: `missing_files` says from
where and to where. Every array is validated (shapes, index ranges, label values, mask
overlaps) with a one-line `DataFormatError` naming the file and the array.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import zipfile
import zlib
from pathlib import Path

import numpy as np

from swan_jax.data.dataset import GraphDataset
from swan_jax.data.download import default_cache_dir, md5_of
from swan_jax.data.errors import DataError, DataFormatError, MissingDataError, MissingFile
from swan_jax.data.raw import RawFile, check_md5, fetch_missing, folders

__all__ = ["DATASETS", "NodeClassificationData", "ensure_available", "load_node_dataset",
           "load_ogbn_arxiv", "load_questions", "load_tolokers", "missing_files"]

HETEROPHILY_URL = "https://github.com/yandex-research/heterophilous-graphs/raw/main/data/"
OGBN_ARXIV_URL = "http://snap.stanford.edu/ogb/data/nodeproppred/arxiv.zip"
OGBN_ARXIV_NUM_CLASSES = 40
ARXIV_FILES = ("raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/node-label.csv.gz",
               "split/time/train.csv.gz", "split/time/valid.csv.gz", "split/time/test.csv.gz")
NPZ_ARRAYS = ("node_features", "node_labels", "edges", "train_masks", "val_masks",
              "test_masks")


@dataclasses.dataclass(frozen=True)
class _Spec:
    folders: tuple[str, ...]  # folders under a data folder that may hold the files, in order
    files: tuple[str, ...]  # paths inside such a folder
    url: str
    md5: str | None  # of files[0], when downloadable
    fetch_note: str  # how to get the files by hand


_SPECS: dict[str, _Spec] = {
    # md5 of the release's tolokers.npz (shared/data/README.md).
    "tolokers": _Spec(("tolokers", "."), ("tolokers.npz",), HETEROPHILY_URL + "tolokers.npz",
                      "8d23e7819e472e2efb23ab6bab61bb1a", ""),
    "questions": _Spec(("questions", "."), ("questions.npz",), HETEROPHILY_URL + "questions.npz",
                       None, "download it from the heterophily benchmark's repository"),
    "ogbn-arxiv": _Spec(("ogbn_arxiv", "arxiv"), ARXIV_FILES, OGBN_ARXIV_URL, None,
                        "download OGB's arxiv.zip and unzip its arxiv/ folder there"),
}
DATASETS = tuple(_SPECS)


@dataclasses.dataclass
class NodeClassificationData:
    """One graph and its official node splits.

    Attributes:
      name: the data set ("tolokers", "questions", "ogbn-arxiv").
      graph: a `GraphDataset` of ONE graph: `nodes` float32 `[N, F]`, `senders` /
        `receivers` int32 `[E]`, `node_targets` `[N, 1]` (float32 0/1 for a binary set,
        int32 classes otherwise), `edges` None; `graph.meta` records the edge handling.
      train_masks, val_masks, test_masks: bool `[S, N]`, one row per official split.
      num_classes: 2 for a binary set (one logit), else the number of classes.
      metric: "roc_auc" or "accuracy" (functions of `swan_jax.metrics`).
      loss: "bce" or "ce" (names of `swan_jax.losses.LOSSES`).
    """

    name: str
    graph: GraphDataset
    train_masks: np.ndarray
    val_masks: np.ndarray
    test_masks: np.ndarray
    num_classes: int
    metric: str
    loss: str

    @property
    def num_splits(self) -> int:
        return int(self.train_masks.shape[0])

    @property
    def num_outputs(self) -> int:
        """Width of the model's output: 1 logit for a binary set, else one per class."""
        return 1 if self.num_classes == 2 else self.num_classes

    def split(self, index: int) -> dict[str, np.ndarray]:
        """`{"train": mask, "val": mask, "test": mask}` (bool `[N]`) of split `index`."""
        if not 0 <= index < self.num_splits:
            raise IndexError(f"{self.name} has splits 0..{self.num_splits - 1}, got {index}")
        return {"train": self.train_masks[index], "val": self.val_masks[index],
                "test": self.test_masks[index]}


# ------------------------------------------------------------------------ where files are

_dirs = folders


def _raw_files(name: str) -> list[RawFile]:
    """The data set's files as `RawFile`s (the md5 is known for the first file only)."""
    spec = _SPECS[name]
    return [RawFile(f"{spec.folders[0]}/{f}", spec.url, spec.md5 if i == 0 else None,
                    alternatives=tuple(f"{folder}/{f}" for folder in spec.folders[1:]),
                    downloadable=spec.md5 is not None, note=spec.fetch_note)
            for i, f in enumerate(spec.files)]


def _folders(name: str, data_dir: Path, download_dir: Path) -> list[Path]:
    spec = _SPECS[name]
    return [data_dir / f for f in spec.folders] + [download_dir / spec.folders[0]]


def _folder_with_files(name: str, data_dir: Path, download_dir: Path) -> Path | None:
    for folder in _folders(name, data_dir, download_dir):
        if all((folder / f).is_file() for f in _SPECS[name].files):
            return folder
    return None


def _check_name(name: str) -> None:
    if name not in _SPECS:
        raise ValueError(f"unknown node-classification data set {name!r}; valid: "
                         f"{', '.join(DATASETS)}")


def missing_files(name: str, data_dir: str | Path | None = None,
                  download_dir: str | Path | None = None) -> list[MissingFile]:
    """The raw files of `name` found in no candidate folder (no network, no writes).

    Each `MissingFile` says where it was looked for and how to get it; only Tolokers is
    `downloadable`.
    """
    _check_name(name)
    data_dir, download_dir = _dirs(data_dir, download_dir)
    if _folder_with_files(name, data_dir, download_dir) is not None:
        return []
    return [raw.missing(name, data_dir, download_dir) for raw in _raw_files(name)
            if raw.find(data_dir, download_dir) is None]


def ensure_available(names, data_dir: str | Path | None = None,
                     download_dir: str | Path | None = None, *, download: bool = True,
                     verify_md5: bool = True) -> list[MissingFile]:
    """Download what `names` miss and can be downloaded; return what is still missing.

    As `lrgb.ensure_available`: a failed download is reported in `MissingFile.reason`,
    not raised.
    """
    data_dir, download_dir = _dirs(data_dir, download_dir)
    missing = []
    for name in names:
        raws = {raw.path: raw for raw in _raw_files(name)}
        missing += [(raws[m.file], m) for m in missing_files(name, data_dir, download_dir)]
    return fetch_missing(missing, download_dir, download_missing=download,
                         verify_md5=verify_md5)


def _raw_folder(name: str, data_dir: Path, download_dir: Path, *, verify_md5: bool,
                download: bool) -> Path:
    missing = ensure_available([name], data_dir, download_dir, download=download,
                               verify_md5=verify_md5)
    if missing:
        raise MissingDataError(missing, downloads_off=not download)
    folder = _folder_with_files(name, data_dir, download_dir)
    assert folder is not None  # every file is there: `missing` is empty
    first = _raw_files(name)[0]
    check_md5(first, folder / _SPECS[name].files[0], download_dir, verify_md5=verify_md5)
    return folder


# --------------------------------------------------------------------------- validation

def _fail(path, message: str) -> DataFormatError:
    return DataFormatError(f"{path}: {message}", path=path)


def _check_edges(path, edges: np.ndarray, n: int, name: str = "edges") -> np.ndarray:
    if edges.ndim != 2 or edges.shape[1] != 2 or not np.issubdtype(edges.dtype, np.integer):
        raise _fail(path, f"{name} has shape {edges.shape} and dtype {edges.dtype}, "
                          "expected int [E, 2]")
    bad = (edges < 0) | (edges >= n)
    if np.any(bad):
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        raise _fail(path, f"{name}[{row}] = ({edges[row, 0]}, {edges[row, 1]}) refers to a "
                          f"node outside 0..{n - 1}")
    return edges.astype(np.int64)


def _check_features(path, x: np.ndarray, name: str) -> np.ndarray:
    if x.ndim != 2 or not (np.issubdtype(x.dtype, np.floating)
                           or np.issubdtype(x.dtype, np.integer)):
        raise _fail(path, f"{name} has shape {x.shape} and dtype {x.dtype}, expected "
                          "numbers [N, F]")
    bad = ~np.isfinite(x)
    if np.any(bad):
        row, col = np.argwhere(bad)[0]
        raise _fail(path, f"{name}[{row}, {col}] = {x[row, col]} is not finite")
    return x.astype(np.float32)


def _check_labels(path, y: np.ndarray, n: int, num_classes: int | None, name: str
                  ) -> np.ndarray:
    y = y.reshape(-1) if y.ndim == 2 and y.shape[1] == 1 else y
    if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer):
        raise _fail(path, f"{name} has shape {y.shape} and dtype {y.dtype}, expected int "
                          f"[{n}]")
    top = num_classes if num_classes is not None else np.iinfo(np.int32).max
    bad = (y < 0) | (y >= top)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise _fail(path, f"{name}[{i}] = {y[i]} is outside 0..{top - 1}")
    return y.astype(np.int64)


def _check_masks(path, masks: dict[str, np.ndarray], n: int) -> None:
    shapes = {k: m.shape for k, m in masks.items()}
    for k, m in masks.items():
        if m.dtype != bool or m.ndim != 2 or m.shape[1] != n:
            raise _fail(path, f"{k} has shape {m.shape} and dtype {m.dtype}, expected bool "
                              f"[splits, {n}]")
    if len({s[0] for s in shapes.values()}) != 1 or next(iter(shapes.values()))[0] == 0:
        raise _fail(path, f"the masks hold different or no numbers of splits: {shapes}")
    names = list(masks)
    for i, a in enumerate(names):
        empty = np.flatnonzero(~masks[a].any(axis=1))
        if empty.size:
            raise _fail(path, f"{a}[{empty[0]}] selects no node")
        for b in names[i + 1:]:
            both = masks[a] & masks[b]
            if np.any(both):
                split, node = np.argwhere(both)[0]
                raise _fail(path, f"split {split}: node {node} is in both {a} and {b}")


def _bidirected(edges: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Both directions of every edge, each ordered pair once (dgl.to_bidirected)."""
    both = np.concatenate([edges, edges[:, ::-1]])
    keys = np.unique(both[:, 0] * n + both[:, 1])
    return keys // n, keys % n


# ------------------------------------------------------------------------------ readers

def _read_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as f:
            absent = [k for k in NPZ_ARRAYS if k not in f.files]
            if absent:
                raise _fail(path, f"lacks the array(s) {absent} (has {f.files})")
            return {k: f[k] for k in NPZ_ARRAYS}
    except DataError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as err:
        raise _fail(path, f"not a readable .npz ({type(err).__name__}: {err})") from err


def _read_heterophily(name: str, folder: Path):
    path = folder / _SPECS[name].files[0]
    raw = _read_npz(path)
    x = _check_features(path, raw["node_features"], "node_features")
    n = x.shape[0]
    y = _check_labels(path, raw["node_labels"], n, 2, "node_labels")
    edges = _check_edges(path, raw["edges"], n)
    masks = {f"{s}_masks": raw[f"{s}_masks"] for s in ("train", "val", "test")}
    _check_masks(path, masks, n)
    targets = y.astype(np.float32)[:, None]
    return x, targets, edges, masks, 2


def _read_csv_gz(path: Path, dtype, ncols: int | None = None) -> np.ndarray:
    try:
        with gzip.open(path, "rt") as f:
            out = np.loadtxt(f, delimiter=",", dtype=dtype, ndmin=2)
    except (OSError, EOFError, zlib.error) as err:
        raise _fail(path, f"truncated or corrupt gzip file ({err})") from err
    except ValueError as err:
        raise _fail(path, f"malformed CSV ({err})") from err
    if ncols is not None and out.shape[1] != ncols and out.size:
        raise _fail(path, f"has {out.shape[1]} columns, expected {ncols}")
    return out


def _read_arxiv(folder: Path):
    feat_path, label_path = folder / "raw/node-feat.csv.gz", folder / "raw/node-label.csv.gz"
    x = _check_features(feat_path, _read_csv_gz(feat_path, np.float32), "node features")
    n = x.shape[0]
    y = _check_labels(label_path, _read_csv_gz(label_path, np.int64, 1), n,
                      OGBN_ARXIV_NUM_CLASSES, "node labels")
    edge_path = folder / "raw/edge.csv.gz"
    edges = _check_edges(edge_path, _read_csv_gz(edge_path, np.int64, 2), n, "edge")
    masks = {}
    for split, ogb in (("train", "train"), ("val", "valid"), ("test", "test")):
        path = folder / f"split/time/{ogb}.csv.gz"
        idx = _read_csv_gz(path, np.int64, 1)[:, 0]
        bad = (idx < 0) | (idx >= n)
        if np.any(bad):
            raise _fail(path, f"node index {idx[bad][0]} is outside 0..{n - 1}")
        mask = np.zeros((1, n), bool)
        mask[0, idx] = True
        if mask.sum() != idx.size:
            raise _fail(path, "lists a node more than once")
        masks[f"{split}_masks"] = mask
    _check_masks(folder / "split/time", masks, n)
    return x, y.astype(np.int32)[:, None], edges, masks, OGBN_ARXIV_NUM_CLASSES


# ------------------------------------------------------------------------------ loaders

def load_node_dataset(name: str, data_dir: str | Path | None = None,
                      cache_dir: str | Path | None = None, *,
                      download_dir: str | Path | None = None, symmetrize: bool = True,
                      verify_md5: bool = True, download: bool = True
                      ) -> NodeClassificationData:
    """Load `name` (one of `DATASETS`) as a `NodeClassificationData` (module docstring).

    `symmetrize=True` (default, as the benchmarks) adds the reverse of every edge and keeps
    each ordered pair once; `graph.meta["edges"]` records it. The processed graph is cached
    under `cache_dir` (default env `SWAN_CACHE_DIR`, else `cache/`), keyed by the raw files'
    md5 and the options.
    """
    _check_name(name)
    data_dir, download_dir = _dirs(data_dir, download_dir)
    cache_dir = default_cache_dir(cache_dir)
    folder = _raw_folder(name, data_dir, download_dir, verify_md5=verify_md5,
                         download=download)
    md5s = [md5_of(folder / f) for f in _SPECS[name].files]
    key = hashlib.md5(":".join([*md5s, str(symmetrize)]).encode()).hexdigest()[:16]
    cache = cache_dir / "node_classification" / f"{name}-{key}.npz"
    meta = {"dataset": name, "source": str(folder),
            "edges": "both directions, each pair once" if symmetrize else "as stored"}
    hit = GraphDataset.load(cache)
    if hit is not None and all(f"{s}_masks" in hit[1] for s in ("train", "val", "test")):
        graph, extra = hit
        masks = {k: extra[k].astype(bool) for k in ("train_masks", "val_masks", "test_masks")}
        num_classes = int(extra["num_classes"])
    else:
        x, targets, edges, masks, num_classes = (
            _read_arxiv(folder) if name == "ogbn-arxiv" else _read_heterophily(name, folder))
        n = x.shape[0]
        senders, receivers = _bidirected(edges, n) if symmetrize else edges.T
        graph = GraphDataset(nodes=x, edges=None, senders=senders, receivers=receivers,
                             n_node=np.asarray([n]), n_edge=np.asarray([senders.size]),
                             node_targets=targets,
                             meta=meta)
        graph.save(cache, num_classes=np.asarray(num_classes), **masks)
    graph.meta = meta
    binary = num_classes == 2
    return NodeClassificationData(name, graph, masks["train_masks"], masks["val_masks"],
                                  masks["test_masks"], num_classes,
                                  "roc_auc" if binary else "accuracy", "bce" if binary else "ce")


def load_tolokers(data_dir=None, cache_dir=None, **options) -> NodeClassificationData:
    """Tolokers (11,758 nodes, 519,000 undirected edges, 10 splits; ROC AUC)."""
    return load_node_dataset("tolokers", data_dir, cache_dir, **options)


def load_questions(data_dir=None, cache_dir=None, **options) -> NodeClassificationData:
    """Questions (48,921 nodes, 153,540 undirected edges, 10 splits; ROC AUC)."""
    return load_node_dataset("questions", data_dir, cache_dir, **options)


def load_ogbn_arxiv(data_dir=None, cache_dir=None, **options) -> NodeClassificationData:
    """ogbn-arxiv (169,343 nodes, 1,166,243 directed citations, 1 time split; accuracy)."""
    return load_node_dataset("ogbn-arxiv", data_dir, cache_dir, **options)
