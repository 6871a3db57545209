"""Long Range Graph Benchmark data sets as `GraphDataset`s: Peptides-func/-struct, PascalVOC-SP.

Every loader returns `{"train": ..., "val": ..., "test": ...}` and

* reads raw files under `data_dir` (default: env `SWAN_DATA_DIR`, else `data/`),
  checking the md5 of each raw file whose official md5 is known (`verify_md5=False` to use
  files of your own);
* downloads a missing raw file from its official URL with `download.fetch` (without
  network it fails with a message saying which URL to put at which path);
* caches the processed graphs as `.npz` under `cache_dir` (default: env `SWAN_CACHE_DIR`,
  else `cache/` in the working directory; git-ignored), keyed by the raw files' md5 and
  the loader options, and stamped with `CACHE_VERSION`; a stale or unreadable cache is
  rebuilt, so only the first run featurises;
* takes `limit=k` to process only the first k rows / graphs (quick tests).

Peptides (Dwivedi et al., 2022): 15,535 peptides as OGB molecular graphs
(`molecules.smiles_to_graph`): node codes int32 `[N, 9]`, edge codes int32 `[E, 3]`, with
the official stratified split (CSV row indices, read with the safe unpickler). Func:
`graph_targets` float32 `[G, 10]` (0/1, multi-label; metric: average precision). Struct:
float32 `[G, 11]` (targets already standardised in the official file; metric: MAE).

PascalVOC-SP (edge_wt_region_boundary, SLIC compactness 30): `nodes` float32 `[N, 14]`,
`edges` float32 `[E, 2]`, `node_targets` int32 `[N, 1]` (21 classes; metric: macro F1).
Node features are standardised channel-wise with the mean and standard deviation over
all *training* nodes, applied to train, val and test alike (`normalize=False` to keep raw
features; a constant channel is only centred).
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import hashlib
import json
import math
import os
import warnings
import zlib
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from swan_jax.data import molecules
from swan_jax.data.dataset import GraphDataset
from swan_jax.data.download import ChecksumError, fetch, md5_of
from swan_jax.data.safe_pickle import safe_load

SPLITS = ("train", "val", "test")


@dataclasses.dataclass(frozen=True)
class RawFile:
    """A raw file: its path under the data directory, official URL and md5 (if known)."""

    path: str
    url: str | None
    md5: str | None


# As in LRGB's peptides_functional.py / peptides_structural.py (the struct loader uses the
# standardised CSV; its split file has the same md5 as the func one there).
RAW_FILES: dict[str, RawFile] = {
    "peptides_func_csv": RawFile(
        "peptides-functional/peptide_multi_class_dataset.csv.gz",
        "https://www.dropbox.com/s/ol2v01usvaxbsr8/peptide_multi_class_dataset.csv.gz?dl=1",
        "701eb743e899f4d793f0e13c8fa5a1b4",
    ),
    "peptides_func_split": RawFile(
        "peptides-functional/splits_random_stratified_peptide.pickle",
        "https://www.dropbox.com/s/j4zcnx2eipuo0xz/splits_random_stratified_peptide.pickle?dl=1",
        "5a0114bdadc80b94fc7ae974f13ef061",
    ),
    "peptides_struct_csv": RawFile(
        "peptides-structural/peptide_structure_normalized_dataset.csv.gz",
        "https://www.dropbox.com/s/0d4aalmq4b4e2nh/"
        "peptide_structure_normalized_dataset.csv.gz?dl=1",
        "c240c1c15466b5c907c63e180fa8aa89",
    ),
    "peptides_struct_split": RawFile(
        "peptides-structural/splits_random_stratified_peptide_structure.pickle",
        "https://www.dropbox.com/s/9dfifzft1hqgow6/"
        "splits_random_stratified_peptide_structure.pickle?dl=1",
        "5a0114bdadc80b94fc7ae974f13ef061",
    ),
}

PEPTIDES_FUNC_NUM_CLASSES = 10
PEPTIDES_STRUCT_TARGETS = (
    "Inertia_mass_a", "Inertia_mass_b", "Inertia_mass_c",
    "Inertia_valence_a", "Inertia_valence_b", "Inertia_valence_c",
    "length_a", "length_b", "length_c", "Spherocity", "Plane_best_fit",
)

# LRGB's VOCSuperpixels zip (slic 30, edge_wt_region_boundary). Its pickles hold torch
# tensors, which the safe unpickler refuses: they must be converted to NumPy first.
PASCALVOC_URL = ("https://www.dropbox.com/s/8x722ai272wqwl4/"
                 "voc_superpixels_edge_wt_region_boundary.zip?dl=1")
PASCALVOC_DIR = "pascalvoc-sp"
PASCALVOC_LRGB_DIR = "VOCSuperpixels/slic_compactness_30/edge_wt_region_boundary/raw"
PASCALVOC_NUM_CLASSES = 21
PASCALVOC_IGNORE_LABEL = 255
PASCALVOC_NODE_DIM = 14


def default_data_dir() -> Path:
    return Path(os.environ.get("SWAN_DATA_DIR") or "data")


def default_cache_dir() -> Path:
    return Path(os.environ.get("SWAN_CACHE_DIR") or "cache")


class DataFormatError(ValueError):
    """A raw file is malformed; the message names the file (and the row when it is one)."""


# ----------------------------------------------------------------------------- raw files

def _raw_path(data_dir: Path, key: str, *, verify_md5: bool, download: bool) -> tuple[Path, str]:
    """The raw file's local path (downloaded if missing) and its md5 (checked if known)."""
    spec = RAW_FILES[key]
    path = data_dir / spec.path
    lrgb_layout = path.parent / "raw" / path.name  # where LRGB's own loaders keep the CSV
    if not path.exists() and lrgb_layout.exists():
        path = lrgb_layout
    if not path.exists():
        if not download or spec.url is None:
            raise FileNotFoundError(
                f"missing raw file {path.resolve()}: download {spec.url} and put it there"
                + (f" (md5 {spec.md5})." if spec.md5 else ".")
            )
        print(f"Downloading {spec.url} -> {path}")
        fetch(spec.url, path, spec.md5 if verify_md5 else None)
    got = md5_of(path)
    if verify_md5 and spec.md5 is not None and got != spec.md5:
        raise ChecksumError(
            f"{path} has md5 {got}, expected {spec.md5} (the official release). Delete it "
            "to download it again, or pass verify_md5=False to use a file of your own."
        )
    return path, got


def _cache_file(cache_dir: Path, name: str, *parts) -> Path:
    key = hashlib.md5(":".join(map(str, parts)).encode()).hexdigest()[:16]
    return cache_dir / "lrgb" / f"{name}-{key}.npz"


# ------------------------------------------------------------------------------ peptides

def _read_csv_rows(path: Path, limit: int | None, columns: tuple[str, ...],
                   optional: tuple[str, ...] = ()) -> tuple[int, list[tuple[int, int, list]]]:
    """Read the first `limit` data rows of a gzipped CSV, keeping only some columns.

    Returns the header's field count and, per row, `(line number, field count, values of
    `columns` then `optional`)`; a value is None where the row is too short or an optional
    column is absent. Other columns (possibly huge) are dropped as rows are read.
    """
    rows: list[tuple[int, int, list]] = []
    old_limit = csv.field_size_limit()
    csv.field_size_limit(max(old_limit, 1 << 30))  # some LRGB CSVs carry very long fields
    reader = None
    try:
        with gzip.open(path, "rt", newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise DataFormatError(f"{path}: empty CSV (no header)")
            missing = [c for c in columns if c not in header]
            if missing:
                raise DataFormatError(f"{path}: header {header[:20]} lacks the column(s) "
                                      f"{missing}")
            absent = 1 << 62  # an absent optional column: an index past any row's end
            index = [header.index(c) if c in header else absent for c in columns + optional]
            for fields in reader:
                if limit is not None and len(rows) >= limit:
                    break
                n = len(fields)
                rows.append((reader.line_num, n, [fields[i] if i < n else None for i in index]))
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise DataFormatError(
            f"{path}: truncated or corrupt gzip file ({err}); delete it and download it again"
        ) from err
    except csv.Error as err:
        line = reader.line_num if reader is not None else "?"
        raise DataFormatError(f"{path}: malformed CSV near line {line}: {err}") from err
    except UnicodeDecodeError as err:
        raise DataFormatError(f"{path}: not UTF-8 text ({err})") from err
    finally:
        csv.field_size_limit(old_limit)
    return len(header), rows


def _parse_labels(text: str) -> np.ndarray:
    try:
        labels = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f"labels {text[:60]!r} are not a list of 0/1") from None
    if (not isinstance(labels, list) or len(labels) != PEPTIDES_FUNC_NUM_CLASSES
            or any(v not in (0, 1) or isinstance(v, bool) for v in labels)):
        raise ValueError(f"labels {text[:60]!r} are not a list of "
                         f"{PEPTIDES_FUNC_NUM_CLASSES} values 0/1")
    return np.asarray(labels, np.float32)


def _parse_floats(fields: list[str], names) -> np.ndarray:
    out = np.empty(len(fields), np.float32)
    for k, (text, name) in enumerate(zip(fields, names, strict=True)):
        try:
            out[k] = value = float(text)
        except ValueError:
            raise ValueError(f"target {name} = {text[:30]!r} is not a number") from None
        if not math.isfinite(value):
            raise ValueError(f"target {name} = {text[:30]!r} is not finite")
    return out


def _featurise_peptides(path: Path, target_columns, parse_targets, *, limit, skip_bad_rows,
                        progress, desc) -> tuple[GraphDataset, np.ndarray, int, int, str]:
    """Graphs of the CSV's valid rows, their row indices, #rows read, #bad rows, 1st error."""
    n_header, rows = _read_csv_rows(path, limit, ("smiles", *target_columns), ("identifier",))
    n_targets = len(target_columns)

    graphs, kept, n_bad, first_error = [], [], 0, ""
    for r, (line, n_fields, values) in enumerate(tqdm(rows, desc=desc, disable=not progress,
                                                      unit="mol", mininterval=1.0)):
        ident = f", identifier {values[-1]}" if values[-1] is not None else ""
        where = f"{path}: row {r} (line {line}{ident})"
        try:
            if n_fields != n_header:
                raise ValueError(f"has {n_fields} fields, the header has {n_header}")
            targets = parse_targets(values[1:1 + n_targets])
            graph = molecules.smiles_to_graph(values[0], name=where)
        except ValueError as err:
            message = str(err) if str(err).startswith(where) else f"{where}: {err}"
            if not skip_bad_rows:
                raise DataFormatError(message + " (skip_bad_rows=True skips such rows)") from None
            n_bad += 1
            first_error = first_error or message
            continue
        graph["graph_targets"] = targets[None, :]
        graphs.append(graph)
        kept.append(r)
    if not graphs:
        raise DataFormatError(f"{path}: no valid rows" + (f" ({first_error})" if n_bad else ""))
    return GraphDataset.from_graphs(graphs), np.asarray(kept, np.int64), len(rows), n_bad, \
        first_error


def _read_split(path: Path, n_rows: int, limited: bool) -> dict[str, np.ndarray]:
    splits = safe_load(path)
    if not isinstance(splits, dict) or not all(s in splits for s in SPLITS):
        keys = list(splits) if isinstance(splits, dict) else type(splits).__name__
        raise DataFormatError(f"{path}: expected a dict with keys {SPLITS}, got {keys}")
    out = {}
    for s in SPLITS:
        idx = np.asarray(splits[s])
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
            raise DataFormatError(f"{path}: split {s!r} is not a 1-D integer index array "
                                  f"(shape {idx.shape}, dtype {idx.dtype})")
        idx = idx.astype(np.int64)
        if limited:
            idx = idx[(idx >= 0) & (idx < n_rows)]
        elif idx.size and (idx.min() < 0 or idx.max() >= n_rows):
            bad = int(idx[(idx < 0) | (idx >= n_rows)][0])
            raise DataFormatError(f"{path}: split {s!r} indexes row {bad} "
                                  f"but the CSV has {n_rows} rows")
        out[s] = idx
    return out


def _load_peptides(name: str, csv_key: str, split_key: str, target_columns, parse_targets, *,
                   data_dir, cache_dir, limit, skip_bad_rows, verify_md5, download,
                   progress) -> dict[str, GraphDataset]:
    data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    csv_path, csv_md5 = _raw_path(data_dir, csv_key, verify_md5=verify_md5, download=download)
    split_path, _ = _raw_path(data_dir, split_key, verify_md5=verify_md5, download=download)

    cache = _cache_file(cache_dir, name, csv_md5, limit, skip_bad_rows)
    hit = GraphDataset.load(cache)
    if hit is not None:
        full, extra = hit
        rows, n_rows = extra["rows"], int(extra["n_rows"])
        n_bad, first_error = int(extra["n_bad"]), str(extra["first_error"])
    else:
        full, rows, n_rows, n_bad, first_error = _featurise_peptides(
            csv_path, target_columns, parse_targets, limit=limit,
            skip_bad_rows=skip_bad_rows, progress=progress,
            desc=f"{name}: SMILES -> graphs")
        full.save(cache, rows=rows, n_rows=np.asarray(n_rows), n_bad=np.asarray(n_bad),
                  first_error=np.asarray(first_error))
    if n_bad:
        warnings.warn(f"{csv_path}: skipped {n_bad} malformed row(s); first: {first_error}",
                      stacklevel=3)

    splits = _read_split(split_path, n_rows, limited=limit is not None)
    position = np.full(n_rows, -1, np.int64)
    position[rows] = np.arange(len(rows))
    out = {}
    for s in SPLITS:
        pos = position[splits[s]]
        out[s] = full.subset(pos[pos >= 0])
    return out


def load_peptides_func(data_dir: str | Path | None = None, cache_dir: str | Path | None = None,
                       *, limit: int | None = None, skip_bad_rows: bool = False,
                       verify_md5: bool = True, download: bool = True,
                       progress: bool = True) -> dict[str, GraphDataset]:
    """LRGB Peptides-func: 10-way multi-label graph classification (metric: AP).

    Raw files under `data_dir`: `peptides-functional/peptide_multi_class_dataset.csv.gz`
    and `peptides-functional/splits_random_stratified_peptide.pickle`. Returns train/val/
    test `GraphDataset`s with `nodes` int32 `[N, 9]` and `edges` int32 `[E, 3]` (OGB atom /
    bond codes, vocabulary sizes `molecules.ATOM_FEATURE_DIMS` / `BOND_FEATURE_DIMS`) and
    `graph_targets` float32 `[G, 10]`.

    A malformed row (wrong field count, labels not a list of ten 0/1, invalid SMILES)
    raises DataFormatError naming the file and row; `skip_bad_rows=True` drops such rows
    (and their split entries) with a warning giving the count.
    """
    return _load_peptides(
        "peptides-func", "peptides_func_csv", "peptides_func_split", ("labels",),
        lambda fields: _parse_labels(fields[0]), data_dir=data_dir, cache_dir=cache_dir,
        limit=limit, skip_bad_rows=skip_bad_rows, verify_md5=verify_md5, download=download,
        progress=progress)


def load_peptides_struct(data_dir: str | Path | None = None,
                         cache_dir: str | Path | None = None, *, limit: int | None = None,
                         skip_bad_rows: bool = False, verify_md5: bool = True,
                         download: bool = True, progress: bool = True
                         ) -> dict[str, GraphDataset]:
    """LRGB Peptides-struct: 11-target graph regression (metric: MAE).

    Raw files under `data_dir`: `peptides-structural/peptide_structure_normalized_dataset
    .csv.gz` (targets in the columns `PEPTIDES_STRUCT_TARGETS`, already standardised) and
    `peptides-structural/splits_random_stratified_peptide_structure.pickle`. Same graphs
    as `load_peptides_func`; `graph_targets` float32 `[G, 11]`.
    """
    return _load_peptides(
        "peptides-struct", "peptides_struct_csv", "peptides_struct_split",
        PEPTIDES_STRUCT_TARGETS, lambda fields: _parse_floats(fields, PEPTIDES_STRUCT_TARGETS),
        data_dir=data_dir, cache_dir=cache_dir, limit=limit, skip_bad_rows=skip_bad_rows,
        verify_md5=verify_md5, download=download, progress=progress)


# ---------------------------------------------------------------------------- PascalVOC

def _voc_raw_paths(data_dir: Path) -> dict[str, Path]:
    for folder in (data_dir / PASCALVOC_DIR, data_dir / PASCALVOC_LRGB_DIR):
        paths = {s: folder / f"{s}.pickle" for s in SPLITS}
        if all(p.exists() for p in paths.values()):
            return paths
    want = data_dir / PASCALVOC_DIR
    raise FileNotFoundError(
        f"missing PascalVOC-SP raw files: put train.pickle, val.pickle and test.pickle in "
        f"{want.resolve()}. They come from LRGB's {PASCALVOC_URL} (folder "
        "voc_superpixels_edge_wt_region_boundary), whose pickles hold torch tensors: convert "
        "each graph tuple (x, edge_attr, edge_index, y) to NumPy arrays (t.numpy()) where "
        "torch is installed and pickle.dump the list. Not downloaded automatically, since "
        "the official files cannot be read without torch."
    )


def _voc_graphs(path: Path, limit: int | None, progress: bool) -> list[dict]:
    graphs = safe_load(path)
    if not isinstance(graphs, list | tuple):
        raise DataFormatError(f"{path}: expected a list of graph tuples, "
                              f"got {type(graphs).__name__}")
    if limit is not None:
        graphs = graphs[:limit]
    out = []
    for g, item in enumerate(tqdm(graphs, desc=f"PascalVOC-SP {path.name}",
                                  disable=not progress, unit="graph", mininterval=1.0)):
        where = f"{path}: graph {g}"
        if not isinstance(item, list | tuple) or len(item) != 4:
            raise DataFormatError(f"{where}: expected a tuple (x, edge_attr, edge_index, y)")
        x, edge_attr, edge_index, y = (np.asarray(a) for a in item)
        n = x.shape[0] if x.ndim == 2 else -1
        if x.ndim != 2 or x.shape[1] != PASCALVOC_NODE_DIM:
            raise DataFormatError(f"{where}: x has shape {x.shape}, "
                                  f"expected [n, {PASCALVOC_NODE_DIM}]")
        if edge_attr.ndim == 1:
            edge_attr = edge_attr[:, None]
        if edge_index.ndim != 2 or edge_index.shape[0] != 2 \
                or not np.issubdtype(edge_index.dtype, np.integer):
            raise DataFormatError(f"{where}: edge_index has shape {edge_index.shape} and dtype "
                                  f"{edge_index.dtype}, expected int [2, e]")
        if edge_attr.ndim != 2 or edge_attr.shape[0] != edge_index.shape[1]:
            raise DataFormatError(f"{where}: edge_attr has shape {edge_attr.shape} for "
                                  f"{edge_index.shape[1]} edges")
        if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer):
            raise DataFormatError(f"{where}: y has shape {y.shape} and dtype {y.dtype}, "
                                  f"expected int [{n}]")
        bad = ((y < 0) | (y >= PASCALVOC_NUM_CLASSES)) & (y != PASCALVOC_IGNORE_LABEL)
        if np.any(bad):
            raise DataFormatError(f"{where}: node label {int(y[bad][0])} is outside "
                                  f"0..{PASCALVOC_NUM_CLASSES - 1}")
        if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= n):
            raise DataFormatError(f"{where}: edge_index refers to a node outside 0..{n - 1}")
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(edge_attr))):
            raise DataFormatError(f"{where}: non-finite node or edge feature")
        out.append({"nodes": x.astype(np.float32), "edges": edge_attr.astype(np.float32),
                    "senders": edge_index[0], "receivers": edge_index[1],
                    "node_targets": y.astype(np.int32)[:, None]})
    if not out:
        raise DataFormatError(f"{path}: no graphs")
    return out


def load_pascalvoc_sp(data_dir: str | Path | None = None, cache_dir: str | Path | None = None,
                      *, limit: int | None = None, normalize: bool = True,
                      progress: bool = True) -> dict[str, GraphDataset]:
    """LRGB PascalVOC-SP: 21-class superpixel node classification (metric: macro F1).

    Raw files: `train.pickle`, `val.pickle`, `test.pickle` in `<data_dir>/pascalvoc-sp/`
    (or LRGB's layout `<data_dir>/VOCSuperpixels/slic_compactness_30/
    edge_wt_region_boundary/raw/`), each a list of tuples `(x float [n, 14], edge_attr
    float [e, 2], edge_index int [2, e], y int [n])` of NumPy arrays (8498 / 1428 / 1429
    graphs in the release). Returns `nodes` float32 `[N, 14]`, `edges` float32 `[E, 2]`,
    `senders = edge_index[0]`, `receivers = edge_index[1]`, `node_targets` int32 `[N, 1]`.

    With `normalize` (default), node features are standardised channel-wise with the mean
    and (population) standard deviation over all training nodes -- the same statistics for
    train, val and test, so nothing leaks from val/test.
    """
    data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    paths = _voc_raw_paths(data_dir)
    md5s = [md5_of(paths[s]) for s in SPLITS]
    cache = {s: _cache_file(cache_dir, f"pascalvoc-sp-{s}", *md5s, limit, normalize)
             for s in SPLITS}
    hits = {s: GraphDataset.load(cache[s]) for s in SPLITS}
    if all(h is not None for h in hits.values()):
        return {s: hits[s][0] for s in SPLITS}

    out = {s: GraphDataset.from_graphs(_voc_graphs(paths[s], limit, progress)) for s in SPLITS}
    mean = np.zeros(PASCALVOC_NODE_DIM)
    std = np.ones(PASCALVOC_NODE_DIM)
    if normalize:
        train_nodes = out["train"].nodes.astype(np.float64)
        mean = train_nodes.mean(axis=0)
        std = train_nodes.std(axis=0)
        std = np.where(std > 0, std, 1.0)
        for s in SPLITS:
            out[s].nodes = ((out[s].nodes - mean) / std).astype(np.float32)
    for s in SPLITS:
        out[s].save(cache[s], feature_mean=mean, feature_std=std)
    return out
