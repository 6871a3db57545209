"""Long Range Graph Benchmark data sets as `GraphDataset`s: Peptides-func/-struct, PascalVOC-SP.

Every loader returns `{"train": ..., "val": ..., "test": ...}` and

* reads raw files from `data_dir` (default: env `SWAN_DATA_DIR`, else `data/`) and never
  writes there (it may be read-only or shared);
* looks for a file missing there in `download_dir` (default
  `download.default_download_dir()`: env `SWAN_DOWNLOAD_DIR`, else `~/.cache/swan-jax`)
  and, with `download=True`, downloads it there from its official URL through pooch (md5,
  retries, a progress bar; a failed download leaves nothing behind); without network it
  fails with a message saying which URL to put at which path. `missing_files` /
  `ensure_available` check all of it up front;
* checks the md5 of each raw file whose official md5 is known (`verify_md5=False`, CLI
  `--no-verify-md5`, to use files of your own);
* caches the processed graphs as `.npz` under `cache_dir` (default: env `SWAN_CACHE_DIR`,
  else `processed/` in the user cache folder, beside the downloads), keyed by the raw
  files' md5 and the loader options, and stamped with `CACHE_VERSION`; a stale or
  unreadable cache is rebuilt, so only the first run featurises;
* takes `limit=k` to process only the first k rows / graphs (quick tests).

Peptides (Dwivedi et al., 2022): 15,535 peptides as OGB molecular graphs
(`molecules.smiles_to_graph`): node codes int32 `[N, 9]`, edge codes int32 `[E, 3]`, with
the official stratified split (CSV row indices, read with the safe unpickler). Func:
`graph_targets` float32 `[G, 10]` (0/1, multi-label; metric: average precision). Struct:
float32 `[G, 11]` (targets already standardised in the official file; metric: MAE).

PascalVOC-SP (edge_wt_region_boundary, SLIC compactness 30): `nodes` float32 `[N, 14]`,
`edges` float32 `[E, 2]`, `node_targets` int32 `[N, 1]` (21 classes, 255 = "ignore", which
the loss and macro F1 mask; metric: macro F1). Read straight from LRGB's official zip of
torch-pickled tensors, without torch (`safe_pickle` / `torch_legacy`). Node features are
LRGB's raw 14 features by default (what LRGB's baselines feed to their linear encoder);
`standardize=True` standardises them channel-wise with the mean and standard deviation
over all *training* nodes. `GraphDataset.meta["node_features"]` says which ("raw" or
"standardized").
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import hashlib
import json
import math
import sys
import warnings
import zipfile
import zlib
from pathlib import Path

import numpy as np

from swan_jax.data import molecules
from swan_jax.data.dataset import GraphDataset
from swan_jax.data.download import default_cache_dir
from swan_jax.data.errors import (
    SKIP_BAD_ROWS,
    ChecksumError,
    DataFormatError,
    MissingDataError,
    MissingFile,
)
from swan_jax.data.progress import progress as show_progress
from swan_jax.data.progress import watched
from swan_jax.data.raw import RawFile, cached_md5, fetch_missing, folders, locate
from swan_jax.data.safe_pickle import safe_load, safe_load_file

__all__ = ["DATASETS", "ChecksumError", "DataFormatError", "MissingDataError", "MissingFile",
           "ensure_available", "load_pascalvoc_sp", "load_peptides_func",
           "load_peptides_struct", "missing_files"]

SPLITS = ("train", "val", "test")
FEATURISE_LINE_SECONDS = 15.0  # off a terminal: a line of the featurisation this often


def _peptides_file(folder: str, name: str, url: str, md5: str) -> RawFile:
    return RawFile(f"{folder}/{name}", url, md5, alternatives=(f"{folder}/raw/{name}",))


# As in LRGB's peptides_functional.py / peptides_structural.py (the struct loader uses the
# standardised CSV; its split file has the same md5 as the func one there).
RAW_FILES: dict[str, RawFile] = {
    "peptides_func_csv": _peptides_file(
        "peptides-functional", "peptide_multi_class_dataset.csv.gz",
        "https://www.dropbox.com/s/ol2v01usvaxbsr8/peptide_multi_class_dataset.csv.gz?dl=1",
        "701eb743e899f4d793f0e13c8fa5a1b4"),
    "peptides_func_split": _peptides_file(
        "peptides-functional", "splits_random_stratified_peptide.pickle",
        "https://www.dropbox.com/s/j4zcnx2eipuo0xz/splits_random_stratified_peptide.pickle?dl=1",
        "5a0114bdadc80b94fc7ae974f13ef061"),
    "peptides_struct_csv": _peptides_file(
        "peptides-structural", "peptide_structure_normalized_dataset.csv.gz",
        "https://www.dropbox.com/s/0d4aalmq4b4e2nh/"
        "peptide_structure_normalized_dataset.csv.gz?dl=1",
        "c240c1c15466b5c907c63e180fa8aa89"),
    "peptides_struct_split": _peptides_file(
        "peptides-structural", "splits_random_stratified_peptide_structure.pickle",
        "https://www.dropbox.com/s/9dfifzft1hqgow6/"
        "splits_random_stratified_peptide_structure.pickle?dl=1",
        "5a0114bdadc80b94fc7ae974f13ef061"),
    # LRGB's VOCSuperpixels zip (slic 30, edge_wt_region_boundary): a folder
    # voc_superpixels_edge_wt_region_boundary/ with {train,val,test}.pickle of torch
    # tensors. URL: Zenodo record 6975830 (LRGB's release there), then the Dropbox link of
    # LRGB's voc_superpixels.py. LRGB publishes no md5 for it; this one is the md5 that a
    # public dataset-preparation script checks for the Zenodo file (not verified here).
    "pascalvoc_zip": RawFile(
        "pascalvoc-sp/voc_superpixels_edge_wt_region_boundary.zip",
        "https://zenodo.org/records/6975830/files/"
        "voc_superpixels_edge_wt_region_boundary.zip?download=1",
        "9a535cb17ab5c6ca94d0b93f0b5293e7",
        mirrors=("https://www.dropbox.com/s/8x722ai272wqwl4/"
                 "voc_superpixels_edge_wt_region_boundary.zip?dl=1",)),
}
DATASET_FILES: dict[str, tuple[str, ...]] = {
    "peptides-func": ("peptides_func_csv", "peptides_func_split"),
    "peptides-struct": ("peptides_struct_csv", "peptides_struct_split"),
    "pascalvoc-sp": ("pascalvoc_zip",),
}
DATASETS = tuple(DATASET_FILES)

PEPTIDES_FUNC_NUM_CLASSES = 10
PEPTIDES_STRUCT_TARGETS = (
    "Inertia_mass_a", "Inertia_mass_b", "Inertia_mass_c",
    "Inertia_valence_a", "Inertia_valence_b", "Inertia_valence_c",
    "length_a", "length_b", "length_c", "Spherocity", "Plane_best_fit",
)

PASCALVOC_URL = RAW_FILES["pascalvoc_zip"].url
PASCALVOC_DIR = "pascalvoc-sp"
# Folders of extracted pickles that are read instead of the zip, in this order.
PASCALVOC_FOLDERS = (PASCALVOC_DIR,
                     "VOCSuperpixels/slic_compactness_30/edge_wt_region_boundary/raw",
                     "voc_superpixels_edge_wt_region_boundary")
PASCALVOC_NUM_CLASSES = 21
PASCALVOC_IGNORE_LABEL = 255
PASCALVOC_NODE_DIM = 14


_dirs = folders
_md5 = cached_md5


def _missing(dataset: str, key: str, data_dir: Path, download_dir: Path) -> MissingFile:
    also = ([str((data_dir / f).absolute()) + "/{train,val,test}.pickle"
             for f in PASCALVOC_FOLDERS] if key == "pascalvoc_zip" else [])
    return RAW_FILES[key].missing(dataset, data_dir, download_dir, also_looked=also)


def _voc_folder(data_dir: Path) -> Path | None:
    for folder in PASCALVOC_FOLDERS:
        if all((data_dir / folder / f"{s}.pickle").is_file() for s in SPLITS):
            return data_dir / folder
    return None


def missing_files(dataset: str, data_dir: str | Path | None = None,
                  download_dir: str | Path | None = None) -> list[MissingFile]:
    """The raw files of `dataset` found neither in `data_dir` nor in `download_dir`.

    No network, no writes, no hashing: a quick check to run for every requested data set
    before any training. Each `MissingFile` says where it was looked for and how to get it
    (`.downloadable` when a loader with `download=True` would fetch it). `dataset` is one
    of `DATASETS`.
    """
    if dataset not in DATASET_FILES:
        raise ValueError(f"unknown LRGB data set {dataset!r}; valid: {', '.join(DATASETS)}")
    data_dir, download_dir = _dirs(data_dir, download_dir)
    out = []
    for key in DATASET_FILES[dataset]:
        if key == "pascalvoc_zip" and _voc_folder(data_dir) is not None:
            continue
        if RAW_FILES[key].find(data_dir, download_dir) is None:
            out.append(_missing(dataset, key, data_dir, download_dir))
    return out


def ensure_available(datasets, data_dir: str | Path | None = None,
                     download_dir: str | Path | None = None, *, download: bool = True,
                     verify_md5: bool = True) -> list[MissingFile]:
    """Download what `datasets` miss (when `download`); return what is still missing.

    Runs `missing_files` for every data set, then, with `download=True`, fetches each
    downloadable one into `download_dir` (md5-checked unless `verify_md5=False`). A failed
    download is not raised: its `MissingFile.reason` holds the error's message. An empty
    list means every raw file is on disk (their md5 is checked when they are loaded).
    """
    data_dir, download_dir = _dirs(data_dir, download_dir)
    missing = [(next(RAW_FILES[k] for k in DATASET_FILES[dataset]
                     if RAW_FILES[k].path == m.file), m)
               for dataset in datasets for m in missing_files(dataset, data_dir, download_dir)]
    return fetch_missing(missing, download_dir, download_missing=download,
                         verify_md5=verify_md5)


def _raw_path(dataset: str, key: str, data_dir: Path, download_dir: Path, *, verify_md5: bool,
              download: bool) -> tuple[Path, str]:
    """The raw file's local path (downloaded if missing) and its md5 (checked if known)."""
    return locate(dataset, RAW_FILES[key], data_dir, download_dir, verify_md5=verify_md5,
                  download_missing=download)


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
                raise DataFormatError(f"{path}: empty CSV (no header)", path=path)
            missing = [c for c in columns if c not in header]
            if missing:
                raise DataFormatError(f"{path}: header {header[:20]} lacks the column(s) "
                                      f"{missing}", path=path)
            absent = 1 << 62  # an absent optional column: an index past any row's end
            index = [header.index(c) if c in header else absent for c in columns + optional]
            for fields in reader:
                if limit is not None and len(rows) >= limit:
                    break
                n = len(fields)
                rows.append((reader.line_num, n, [fields[i] if i < n else None for i in index]))
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise DataFormatError(
            f"{path}: truncated or corrupt gzip file ({err}); replace it with the official "
            "file", path=path) from err
    except csv.Error as err:
        line = reader.line_num if reader is not None else "?"
        raise DataFormatError(f"{path}: malformed CSV near line {line}: {err}", path=path,
                              line=reader.line_num if reader is not None else None) from err
    except UnicodeDecodeError as err:
        raise DataFormatError(f"{path}: not UTF-8 text ({err})", path=path) from err
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
    if progress and not watched():  # a log hears of the minutes ahead before they pass
        print(f"{desc}: {len(rows):,} molecules to featurise, once (the graphs are cached)",
              file=sys.stderr, flush=True)
    for r, (line, n_fields, values) in enumerate(show_progress(
            rows, desc=desc, unit="mol", enabled=progress, every=FEATURISE_LINE_SECONDS)):
        identifier = values[-1]
        ident = f", identifier {identifier}" if identifier is not None else ""
        where = f"{path}: row {r} (line {line}{ident})"
        try:
            if n_fields != n_header:
                raise ValueError(f"has {n_fields} fields, the header has {n_header}")
            targets = parse_targets(values[1:1 + n_targets])
            graph = molecules.smiles_to_graph(values[0], name=where)
        except ValueError as err:
            message = str(err) if str(err).startswith(where) else f"{where}: {err}"
            if not skip_bad_rows:
                raise DataFormatError(message, path=path, row=r, line=line,
                                      identifier=identifier, hint=SKIP_BAD_ROWS) from None
            n_bad += 1
            first_error = first_error or message
            continue
        graph["graph_targets"] = targets[None, :]
        graphs.append(graph)
        kept.append(r)
    if not graphs:
        raise DataFormatError(f"{path}: no valid rows" + (f" ({first_error})" if n_bad else ""),
                              path=path)
    return GraphDataset.from_graphs(graphs), np.asarray(kept, np.int64), len(rows), n_bad, \
        first_error


def _read_split(path: Path, n_rows: int, limited: bool) -> dict[str, np.ndarray]:
    splits = safe_load(path)
    if not isinstance(splits, dict) or not all(s in splits for s in SPLITS):
        keys = list(splits) if isinstance(splits, dict) else type(splits).__name__
        raise DataFormatError(f"{path}: expected a dict with keys {SPLITS}, got {keys}",
                              path=path)
    out = {}
    for s in SPLITS:
        idx = np.asarray(splits[s])
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
            raise DataFormatError(f"{path}: split {s!r} is not a 1-D integer index array "
                                  f"(shape {idx.shape}, dtype {idx.dtype})", path=path)
        idx = idx.astype(np.int64)
        if limited:
            idx = idx[(idx >= 0) & (idx < n_rows)]
        elif idx.size and (idx.min() < 0 or idx.max() >= n_rows):
            bad = int(idx[(idx < 0) | (idx >= n_rows)][0])
            raise DataFormatError(f"{path}: split {s!r} indexes row {bad} "
                                  f"but the CSV has {n_rows} rows", path=path)
        out[s] = idx
    return out


def _load_peptides(name: str, csv_key: str, split_key: str, target_columns, parse_targets, *,
                   data_dir, cache_dir, download_dir, limit, skip_bad_rows, verify_md5,
                   download, progress) -> dict[str, GraphDataset]:
    data_dir, download_dir = _dirs(data_dir, download_dir)
    cache_dir = default_cache_dir(cache_dir)
    missing = missing_files(name, data_dir, download_dir)
    if missing and not download:
        raise MissingDataError(missing, downloads_off=True)
    csv_path, csv_md5 = _raw_path(name, csv_key, data_dir, download_dir,
                                  verify_md5=verify_md5, download=download)
    split_path, _ = _raw_path(name, split_key, data_dir, download_dir, verify_md5=verify_md5,
                              download=download)

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
        out[s].meta = {"dataset": name, "source": str(csv_path)}
    return out


def load_peptides_func(data_dir: str | Path | None = None, cache_dir: str | Path | None = None,
                       *, download_dir: str | Path | None = None, limit: int | None = None,
                       skip_bad_rows: bool = False, verify_md5: bool = True,
                       download: bool = True, progress: bool = True
                       ) -> dict[str, GraphDataset]:
    """LRGB Peptides-func: 10-way multi-label graph classification (metric: AP).

    Raw files under `data_dir`: `peptides-functional/peptide_multi_class_dataset.csv.gz`
    and `peptides-functional/splits_random_stratified_peptide.pickle`. Returns train/val/
    test `GraphDataset`s with `nodes` int32 `[N, 9]` and `edges` int32 `[E, 3]` (OGB atom /
    bond codes, vocabulary sizes `molecules.ATOM_FEATURE_DIMS` / `BOND_FEATURE_DIMS`) and
    `graph_targets` float32 `[G, 10]`.

    A malformed row (wrong field count, labels not a list of ten 0/1, invalid SMILES)
    raises DataFormatError naming the file and row; `skip_bad_rows=True` (CLI
    `--skip-bad-rows`) drops such rows (and their split entries) with a warning giving the
    count. Missing raw files are looked for in `download_dir` and downloaded there (module
    docstring); MissingDataError lists what is missing when `download=False`.
    """
    return _load_peptides(
        "peptides-func", "peptides_func_csv", "peptides_func_split", ("labels",),
        lambda fields: _parse_labels(fields[0]), data_dir=data_dir, cache_dir=cache_dir,
        download_dir=download_dir, limit=limit, skip_bad_rows=skip_bad_rows,
        verify_md5=verify_md5, download=download, progress=progress)


def load_peptides_struct(data_dir: str | Path | None = None,
                         cache_dir: str | Path | None = None, *,
                         download_dir: str | Path | None = None, limit: int | None = None,
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
        data_dir=data_dir, cache_dir=cache_dir, download_dir=download_dir, limit=limit,
        skip_bad_rows=skip_bad_rows, verify_md5=verify_md5, download=download,
        progress=progress)


# ---------------------------------------------------------------------------- PascalVOC

@dataclasses.dataclass(frozen=True)
class _VocSource:
    """Where the three PascalVOC-SP pickles are read from: a folder or the official zip."""

    path: Path  # the folder, or the zip
    identity: tuple[str, ...]  # md5s that key the cache

    def read(self, split: str):
        if self.path.is_dir():
            return safe_load(self.path / f"{split}.pickle")
        source = f"{self.path}"
        try:
            with zipfile.ZipFile(self.path) as archive:
                names = [n for n in archive.namelist()
                         if n.rsplit("/", 1)[-1] == f"{split}.pickle"]
                if len(names) != 1:
                    raise DataFormatError(f"{source}: expected one {split}.pickle in the zip, "
                                          f"found {names or 'none'}", path=self.path)
                with archive.open(names[0]) as f:
                    return safe_load_file(f, f"{source}:{names[0]}")
        except (zipfile.BadZipFile, zlib.error, EOFError) as err:
            raise DataFormatError(f"{source}: truncated or corrupt zip ({err}); replace it "
                                  "with the official file (a downloaded copy: delete it to "
                                  "download it again)", path=self.path) from err


def _voc_source(data_dir: Path, download_dir: Path, *, verify_md5: bool,
                download: bool) -> _VocSource:
    folder = _voc_folder(data_dir)
    if folder is not None:
        return _VocSource(folder, tuple(_md5(folder / f"{s}.pickle") for s in SPLITS))
    path, md5 = _raw_path("pascalvoc-sp", "pascalvoc_zip", data_dir, download_dir,
                          verify_md5=verify_md5, download=download)
    return _VocSource(path, (md5,))


def _voc_graphs(graphs, path: str, limit: int | None, progress: bool) -> list[dict]:
    """Check LRGB's graph tuples (NumPy arrays, or torch tensors read as NumPy) and convert."""
    if not isinstance(graphs, list | tuple):
        raise DataFormatError(f"{path}: expected a list of graph tuples, "
                              f"got {type(graphs).__name__}", path=path)
    if limit is not None:
        graphs = graphs[:limit]
    out = []
    for g, item in enumerate(show_progress(graphs, desc=f"PascalVOC-SP {Path(path).name}",
                                           unit="graph", enabled=progress)):
        try:
            out.append(_voc_graph(item))
        except ValueError as err:
            raise DataFormatError(f"{path}: graph {g}: {err}", path=path,
                                  item=f"graph {g}") from None
    if not out:
        raise DataFormatError(f"{path}: no graphs", path=path)
    return out


def _voc_graph(item) -> dict:
    if not isinstance(item, list | tuple) or len(item) != 4 or \
            not all(isinstance(a, np.ndarray) for a in item):
        raise ValueError("expected a tuple of arrays (x, edge_attr, edge_index, y)")
    x, edge_attr, edge_index, y = item
    n = x.shape[0] if x.ndim == 2 else -1
    if x.ndim != 2 or x.shape[1] != PASCALVOC_NODE_DIM:
        raise ValueError(f"x has shape {x.shape}, expected [n, {PASCALVOC_NODE_DIM}]")
    if edge_attr.ndim == 1:
        edge_attr = edge_attr[:, None]
    if edge_index.ndim != 2 or edge_index.shape[0] != 2 \
            or not np.issubdtype(edge_index.dtype, np.integer):
        raise ValueError(f"edge_index has shape {edge_index.shape} and dtype "
                         f"{edge_index.dtype}, expected int [2, e]")
    if edge_attr.ndim != 2 or edge_attr.shape[0] != edge_index.shape[1]:
        raise ValueError(f"edge_attr has shape {edge_attr.shape} for {edge_index.shape[1]} "
                         "edges")
    if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"y has shape {y.shape} and dtype {y.dtype}, expected int [{n}]")
    bad = ((y < 0) | (y >= PASCALVOC_NUM_CLASSES)) & (y != PASCALVOC_IGNORE_LABEL)
    if np.any(bad):
        raise ValueError(f"node label {int(y[bad][0])} is outside 0..{PASCALVOC_NUM_CLASSES - 1}"
                         f" and is not the ignore label {PASCALVOC_IGNORE_LABEL}")
    if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= n):
        raise ValueError(f"edge_index refers to a node outside 0..{n - 1}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(edge_attr))):
        raise ValueError("non-finite node or edge feature")
    return {"nodes": x.astype(np.float32), "edges": edge_attr.astype(np.float32),
            "senders": edge_index[0], "receivers": edge_index[1],
            "node_targets": y.astype(np.int32)[:, None]}


def load_pascalvoc_sp(data_dir: str | Path | None = None, cache_dir: str | Path | None = None,
                      *, download_dir: str | Path | None = None, limit: int | None = None,
                      standardize: bool = False, verify_md5: bool = True,
                      download: bool = True, progress: bool = True
                      ) -> dict[str, GraphDataset]:
    """LRGB PascalVOC-SP: 21-class superpixel node classification (metric: macro F1).

    Raw files, first found of: `train.pickle`, `val.pickle`, `test.pickle` in one of
    `PASCALVOC_FOLDERS` under `data_dir` (`pascalvoc-sp/`, LRGB's layout
    `VOCSuperpixels/slic_compactness_30/edge_wt_region_boundary/raw/`, or the zip's own
    folder `voc_superpixels_edge_wt_region_boundary/`); else the official zip
    `pascalvoc-sp/voc_superpixels_edge_wt_region_boundary.zip` under `data_dir` or
    `download_dir`, downloaded there when missing (`download=True`; md5-checked unless
    `verify_md5=False`) and read in place. Each pickle is a list of tuples `(x float
    [n, 14], edge_attr float [e, 2], edge_index int [2, e], y int [n])` of torch tensors
    (read without torch) or NumPy arrays; 8498 / 1428 / 1429 graphs in the release
    (whose `x` is float16 and `y` an int32 NumPy array: both widened as LRGB's loader does).

    Returns `nodes` float32 `[N, 14]`, `edges` float32 `[E, 2]`, `senders =
    edge_index[0]`, `receivers = edge_index[1]`, `node_targets` int32 `[N, 1]` (255 =
    ignore). Node features are the raw ones (as LRGB's baselines use them) unless
    `standardize=True`: then channel-wise `(x - mean) / std` with the mean and
    (population) standard deviation over all *training* nodes, the same for train, val and
    test (a constant channel is only centred). `meta["node_features"]` is "raw" or
    "standardized".
    """
    data_dir, download_dir = _dirs(data_dir, download_dir)
    cache_dir = default_cache_dir(cache_dir)
    missing = missing_files("pascalvoc-sp", data_dir, download_dir)
    if missing and not download:
        raise MissingDataError(missing, downloads_off=True)
    source = _voc_source(data_dir, download_dir, verify_md5=verify_md5, download=download)
    features = "standardized" if standardize else "raw"
    meta = {"dataset": "pascalvoc-sp", "node_features": features, "source": str(source.path)}
    cache = {s: _cache_file(cache_dir, f"pascalvoc-sp-{s}", *source.identity, limit, features)
             for s in SPLITS}
    hits = {s: GraphDataset.load(cache[s]) for s in SPLITS}
    if all(h is not None for h in hits.values()):
        out = {s: hit[0] for s, hit in hits.items() if hit is not None}  # every split's
    else:
        out = {}
        for s in SPLITS:
            name = f"{source.path}" + ("" if source.path.suffix == ".zip" else f"/{s}.pickle")
            out[s] = GraphDataset.from_graphs(_voc_graphs(source.read(s), name, limit,
                                                          progress))
        mean, std = _standardize(out) if standardize else (np.zeros(PASCALVOC_NODE_DIM),
                                                           np.ones(PASCALVOC_NODE_DIM))
        for s in SPLITS:
            out[s].meta = dict(meta)
            out[s].save(cache[s], feature_mean=mean, feature_std=std)
    for s in SPLITS:
        out[s].meta = dict(meta)
    return out


def _standardize(out: dict[str, GraphDataset]) -> tuple[np.ndarray, np.ndarray]:
    """Standardise every split's nodes in place with the training nodes' mean and std."""
    train_nodes = out["train"].nodes.astype(np.float64)
    mean = train_nodes.mean(axis=0)
    std = train_nodes.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    for s in SPLITS:
        out[s].nodes = ((out[s].nodes - mean) / std).astype(np.float32)
    return mean, std
