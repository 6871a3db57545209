"""LRGB loaders on small synthetic raw files, safe unpickling, downloads from a local server."""

from __future__ import annotations

import csv
import functools
import gzip
import http.server
import io
import json
import os
import pickle
import socket
import threading
from pathlib import Path

import numpy as np
import pytest

from swan_jax.data import dataset as dataset_module
from swan_jax.data import lrgb, molecules
from swan_jax.data.download import ChecksumError, DownloadError, fetch, md5_of
from swan_jax.data.safe_pickle import UnsafePickleError, safe_load, safe_loads

REPO = Path(__file__).resolve().parents[1]

SMILES = ["CCO", "c1ccccc1", "CC(=O)[O-]", "N[C@@H](C)C(=O)O", "CCN", "O=C=O", "CC(C)C"]


def _labels(k: int) -> list[int]:
    return [(k + c) % 2 if c < 5 else int(c == k % 10) for c in range(10)]


def write_csv_gz(path: Path, header: list[str], rows: list[list]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(header)
    writer.writerows(rows)
    with gzip.open(path, "wt", newline="") as f:
        f.write(buf.getvalue())
    return path


def write_pickle(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(obj, f)
    return path


SPLIT = {"train": np.array([3, 0, 1, 2]), "val": np.array([5, 4]), "test": np.array([6])}


def make_func(data_dir: Path, smiles=SMILES, rows=None, split=SPLIT) -> Path:
    if rows is None:
        rows = [[i, s, "PEP", json.dumps(_labels(i)), 1000 + i] for i, s in enumerate(smiles)]
    folder = data_dir / "peptides-functional"
    write_csv_gz(folder / "peptide_multi_class_dataset.csv.gz",
                 ["", "smiles", "peptide_seq", "labels", "identifier"], rows)
    write_pickle(folder / "splits_random_stratified_peptide.pickle", split)
    return folder


def load_func(data_dir, cache_dir, **kw):
    kw.setdefault("verify_md5", False)
    kw.setdefault("download", False)
    return lrgb.load_peptides_func(data_dir, cache_dir, progress=False, **kw)


# ------------------------------------------------------------------------- safe pickle

class _Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_safe_unpickler_refuses_os_system_without_running_it(tmp_path):
    marker = tmp_path / "pwned"
    path = write_pickle(tmp_path / "evil.pickle", {"train": _Evil(marker)})
    with pytest.raises(UnsafePickleError, match=r"evil\.pickle.*(posix|os)\.system"):
        safe_load(path)
    assert not marker.exists()
    with pytest.raises(pickle.UnpicklingError, match="builtins.eval"):
        safe_loads(b"\x80\x02cbuiltins\neval\nX\x04\x00\x00\x001+1\x85R.")


def test_safe_unpickler_refuses_other_torch_globals_and_torch_when_off():
    # Only plain tensors are read (test_torch_pickle.py); any other torch global is refused.
    with pytest.raises(UnsafePickleError, match=r"train\.pickle: refused .*torch\.load.*"
                                                r"Of PyTorch, only plain CPU tensors") as err:
        safe_loads(b"\x80\x02ctorch\nload\n.", source="train.pickle")
    assert err.value.global_name == "torch.load" and err.value.path == "train.pickle"
    with pytest.raises(UnsafePickleError, match="only with allow_torch=True"):
        safe_loads(b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n.", source="train.pickle",
                   allow_torch=False)


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_safe_unpickler_loads_numpy_containers(protocol):
    obj = {"a": np.arange(5), "b": [np.float32(1.5), np.ones((2, 3), np.float32).T,
                                    (np.int64(7), {"c": np.array([True, False])})]}
    out = safe_loads(pickle.dumps(obj, protocol=protocol))
    np.testing.assert_array_equal(out["a"], obj["a"])
    np.testing.assert_array_equal(out["b"][1], obj["b"][1])
    assert out["b"][0] == np.float32(1.5) and out["b"][2][0] == 7
    assert out["b"][2][1]["c"].dtype == bool


def test_safe_unpickler_names_a_truncated_file(tmp_path):
    path = write_pickle(tmp_path / "split.pickle", {"train": np.arange(100)})
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(pickle.UnpicklingError, match=r"split\.pickle.*truncated"):
        safe_load(path)


# ---------------------------------------------------------------------------- peptides

def test_peptides_func_shapes_targets_and_split_order(tmp_path):
    make_func(tmp_path / "data")
    d = load_func(tmp_path / "data", tmp_path / "cache")
    assert [len(d[s]) for s in lrgb.SPLITS] == [4, 2, 1]
    for s in lrgb.SPLITS:
        rows = SPLIT[s]
        expect = [molecules.smiles_to_graph(SMILES[r]) for r in rows]
        np.testing.assert_array_equal(d[s].nodes, np.concatenate([g["nodes"] for g in expect]))
        np.testing.assert_array_equal(d[s].edges, np.concatenate([g["edges"] for g in expect]))
        np.testing.assert_array_equal(d[s].senders,
                                      np.concatenate([g["senders"] for g in expect]))
        np.testing.assert_array_equal(d[s].graph_targets, [_labels(r) for r in rows])
        assert d[s].graph_targets.dtype == np.float32
    assert d["train"].nodes.shape[1] == 9 and d["train"].edges.shape[1] == 3


def test_peptides_struct_columns_by_name(tmp_path):
    names = list(lrgb.PEPTIDES_STRUCT_TARGETS)
    # column order differs from LRGB's list; a field longer than csv's default limit
    header = ["", "smiles", *reversed(names), "peptide_seq", "self_dist_matrix"]
    rows = []
    for i, s in enumerate(SMILES):
        values = {n: i + 0.01 * k for k, n in enumerate(names)}
        rows.append([i, s, *[values[n] for n in reversed(names)], "PEP", "1.5," * 50_000])
    folder = tmp_path / "data" / "peptides-structural"
    write_csv_gz(folder / "peptide_structure_normalized_dataset.csv.gz", header, rows)
    write_pickle(folder / "splits_random_stratified_peptide_structure.pickle", SPLIT)
    d = lrgb.load_peptides_struct(tmp_path / "data", tmp_path / "cache", verify_md5=False,
                                  download=False, progress=False)
    assert d["train"].graph_targets.shape == (4, 11)
    np.testing.assert_allclose(d["val"].graph_targets[0], 5 + 0.01 * np.arange(11), rtol=1e-6)
    np.testing.assert_allclose(d["train"].graph_targets[:, 0], [3, 0, 1, 2])


def test_malformed_row_is_named_and_skip_counts(tmp_path):
    rows = [[i, s, "PEP", json.dumps(_labels(i)), 1000 + i] for i, s in enumerate(SMILES)]
    rows[2][3] = "[0, 1, 2]"  # not ten 0/1 labels
    rows[4][1] = "C1CC"  # invalid SMILES
    make_func(tmp_path / "data", rows=rows)
    with pytest.raises(lrgb.DataFormatError, match=r"peptide_multi_class_dataset\.csv\.gz: "
                                                   r"row 2 \(line 4, identifier 1002\)"):
        load_func(tmp_path / "data", tmp_path / "cache")
    with pytest.warns(UserWarning, match="skipped 2 malformed row"):
        d = load_func(tmp_path / "data", tmp_path / "cache", skip_bad_rows=True)
    # rows 2 (train) and 4 (val) are dropped from their splits
    assert [len(d[s]) for s in lrgb.SPLITS] == [3, 1, 1]
    np.testing.assert_array_equal(d["train"].graph_targets, [_labels(r) for r in (3, 0, 1)])


def test_invalid_smiles_error_names_identifier(tmp_path):
    rows = [[i, s, "PEP", json.dumps(_labels(i)), 1000 + i] for i, s in enumerate(SMILES)]
    rows[5][1] = "not-a-smiles"
    make_func(tmp_path / "data", rows=rows)
    with pytest.raises(lrgb.DataFormatError, match="row 5 .*identifier 1005.*could not parse"):
        load_func(tmp_path / "data", tmp_path / "cache")


def test_wrong_field_count_is_named(tmp_path):
    rows = [[i, s, "PEP", json.dumps(_labels(i)), 1000 + i] for i, s in enumerate(SMILES)]
    rows[3] = rows[3][:3]
    make_func(tmp_path / "data", rows=rows)
    with pytest.raises(lrgb.DataFormatError, match="row 3 .*has 3 fields"):
        load_func(tmp_path / "data", tmp_path / "cache")


def test_truncated_gzip_is_named(tmp_path):
    smiles = SMILES * 40  # long enough that half the gzip stream cuts into the data
    split = {"train": np.arange(200), "val": np.arange(200, 250), "test": np.arange(250, 280)}
    folder = make_func(tmp_path / "data", smiles=smiles, split=split)
    path = folder / "peptide_multi_class_dataset.csv.gz"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(lrgb.DataFormatError, match=r"csv\.gz: truncated or corrupt gzip"):
        load_func(tmp_path / "data", tmp_path / "cache")


def test_wrong_md5_is_refused(tmp_path):
    make_func(tmp_path / "data")
    with pytest.raises(ChecksumError, match=r"csv\.gz has md5 .*expected "
                                            "701eb743e899f4d793f0e13c8fa5a1b4"):
        load_func(tmp_path / "data", tmp_path / "cache", verify_md5=True)


def test_missing_file_without_download_names_url_and_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"peptides-functional.*dropbox\.com/s/ol2v01"):
        load_func(tmp_path / "data", tmp_path / "cache")


def test_split_index_out_of_range_is_named(tmp_path):
    make_func(tmp_path / "data", split={**SPLIT, "test": np.array([6, 99])})
    with pytest.raises(lrgb.DataFormatError, match="split 'test' indexes row 99"):
        load_func(tmp_path / "data", tmp_path / "cache")


def test_limit_takes_first_rows(tmp_path):
    make_func(tmp_path / "data")
    d = load_func(tmp_path / "data", tmp_path / "cache", limit=3)
    assert [len(d[s]) for s in lrgb.SPLITS] == [3, 0, 0]
    np.testing.assert_array_equal(d["train"].graph_targets, [_labels(r) for r in (0, 1, 2)])


def test_cache_hit_then_stale_version_rebuilds(tmp_path, monkeypatch):
    make_func(tmp_path / "data")
    calls = []
    real = molecules.smiles_to_graph

    def counting(smiles, name=None):
        calls.append(smiles)
        return real(smiles, name=name)

    monkeypatch.setattr(molecules, "smiles_to_graph", counting)
    first = load_func(tmp_path / "data", tmp_path / "cache")
    assert len(calls) == len(SMILES)
    second = load_func(tmp_path / "data", tmp_path / "cache")
    assert len(calls) == len(SMILES)  # served from the cache
    for s in lrgb.SPLITS:
        np.testing.assert_array_equal(first[s].nodes, second[s].nodes)
        np.testing.assert_array_equal(first[s].graph_targets, second[s].graph_targets)

    (cached,) = (tmp_path / "cache" / "lrgb").glob("*.npz")
    with np.load(cached) as f:
        arrays = dict(f)
    arrays["cache_version"] = np.asarray(dataset_module.CACHE_VERSION - 1)
    np.savez(cached, **arrays)
    load_func(tmp_path / "data", tmp_path / "cache")
    assert len(calls) == 2 * len(SMILES)  # stale stamp: rebuilt
    load_func(tmp_path / "data", tmp_path / "cache")
    assert len(calls) == 2 * len(SMILES)

    make_func(tmp_path / "data", smiles=["CC"] + SMILES[1:])  # new raw md5: new cache entry
    d = load_func(tmp_path / "data", tmp_path / "cache")
    assert len(calls) == 3 * len(SMILES)
    assert d["train"].n_node[1] == 2


# ---------------------------------------------------------------------------- PascalVOC

def _voc_split(rng, n_graphs, shift):
    graphs = []
    for _ in range(n_graphs):
        n = int(rng.integers(3, 8))
        e = int(rng.integers(1, 10))
        graphs.append((
            (rng.normal(size=(n, 14)) * 3 + shift).astype(np.float32),
            rng.random((e, 2)).astype(np.float32),
            rng.integers(0, n, size=(2, e)),
            rng.integers(0, 21, size=n),
        ))
    return graphs


def test_pascalvoc_normalises_with_training_statistics(tmp_path):
    rng = np.random.default_rng(0)
    raw = {"train": _voc_split(rng, 6, 1.0), "val": _voc_split(rng, 3, 5.0),
           "test": _voc_split(rng, 2, -4.0)}
    for s, graphs in raw.items():
        write_pickle(tmp_path / "data" / "pascalvoc-sp" / f"{s}.pickle", graphs)
    d = lrgb.load_pascalvoc_sp(tmp_path / "data", tmp_path / "cache", standardize=True,
                               progress=False)
    assert d["test"].meta["node_features"] == "standardized"
    train_x = np.concatenate([g[0] for g in raw["train"]]).astype(np.float64)
    mean, std = train_x.mean(0), train_x.std(0)
    np.testing.assert_allclose(d["train"].nodes.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(d["train"].nodes.std(0), 1, atol=1e-5)
    for s in ("val", "test"):
        x = np.concatenate([g[0] for g in raw[s]])
        np.testing.assert_allclose(d[s].nodes, (x - mean) / std, rtol=1e-5, atol=1e-5)
        # val/test were not standardised with their own statistics
        assert np.abs(d[s].nodes.mean(0)).min() > 0.5
        np.testing.assert_array_equal(d[s].node_targets[:, 0],
                                      np.concatenate([g[3] for g in raw[s]]))
        np.testing.assert_array_equal(d[s].senders, np.concatenate([g[2][0] for g in raw[s]]))
        np.testing.assert_array_equal(d[s].receivers, np.concatenate([g[2][1] for g in raw[s]]))
        np.testing.assert_allclose(d[s].edges, np.concatenate([g[1] for g in raw[s]]))
    assert [len(d[s]) for s in lrgb.SPLITS] == [6, 3, 2]
    assert d["train"].node_targets.shape[1] == 1
    assert d["train"].node_targets.dtype == np.int32 and d["train"].nodes.dtype == np.float32

    again = lrgb.load_pascalvoc_sp(tmp_path / "data", tmp_path / "cache", standardize=True,
                                   progress=False)  # from the cache
    np.testing.assert_array_equal(again["val"].nodes, d["val"].nodes)
    assert again["val"].meta["node_features"] == "standardized"
    # the default: LRGB's raw features
    plain = lrgb.load_pascalvoc_sp(tmp_path / "data", tmp_path / "cache", limit=2,
                                   progress=False)
    np.testing.assert_array_equal(plain["train"].nodes,
                                  np.concatenate([g[0] for g in raw["train"][:2]]))
    assert plain["train"].meta["node_features"] == "raw"


def test_pascalvoc_bad_graph_and_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"pascalvoc-sp/voc_superpixels_edge_wt_region"
                                                 r"_boundary\.zip.*zenodo\.org"):
        lrgb.load_pascalvoc_sp(tmp_path / "data", tmp_path / "cache", download=False,
                               progress=False)
    rng = np.random.default_rng(1)
    raw = {s: _voc_split(rng, 2, 0.0) for s in lrgb.SPLITS}
    x, ea, ei, y = raw["val"][1]
    raw["val"][1] = (x[:, :5], ea, ei, y)
    for s, graphs in raw.items():
        write_pickle(tmp_path / "data" / "pascalvoc-sp" / f"{s}.pickle", graphs)
    with pytest.raises(lrgb.DataFormatError, match=r"val\.pickle: graph 1: x has shape"):
        lrgb.load_pascalvoc_sp(tmp_path / "data", tmp_path / "cache", progress=False)


# ----------------------------------------------------------------------------- download

@pytest.fixture
def http_root(tmp_path):
    root = tmp_path / "served"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_checks_md5_and_leaves_nothing_on_mismatch(tmp_path, http_root):
    root, base = http_root
    (root / "blob.bin").write_bytes(b"x" * 100_000)
    dest = tmp_path / "dl" / "blob.bin"
    assert fetch(f"{base}/blob.bin", dest, md5_of(root / "blob.bin")) == dest
    assert dest.read_bytes() == b"x" * 100_000

    bad = tmp_path / "dl2" / "blob.bin"
    with pytest.raises(ChecksumError, match=r"md5 .*expected 0{32}"):
        fetch(f"{base}/blob.bin", bad, "0" * 32)
    assert not bad.parent.exists()  # neither a partial file nor the folder it created

    with pytest.raises(DownloadError, match=r"404.*put it at .*dl3/missing\.bin"):
        fetch(f"{base}/missing.bin", tmp_path / "dl3" / "missing.bin")
    assert not (tmp_path / "dl3").exists()


def test_fetch_without_network_says_which_file_to_put_where(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/peptide_multi_class_dataset.csv.gz"
    dest = tmp_path / "data" / "x.csv.gz"
    with pytest.raises(DownloadError) as err:
        fetch(url, dest, "abc", timeout=5)
    assert url in str(err.value) and str(dest) in str(err.value)
    assert not dest.exists()


def test_loader_downloads_missing_raw_files(tmp_path, http_root, monkeypatch):
    root, base = http_root
    folder = make_func(root)
    csv_file = folder / "peptide_multi_class_dataset.csv.gz"
    split_file = folder / "splits_random_stratified_peptide.pickle"
    monkeypatch.setitem(lrgb.RAW_FILES, "peptides_func_csv", lrgb.RawFile(
        lrgb.RAW_FILES["peptides_func_csv"].path,
        f"{base}/peptides-functional/{csv_file.name}", md5_of(csv_file)))
    monkeypatch.setitem(lrgb.RAW_FILES, "peptides_func_split", lrgb.RawFile(
        lrgb.RAW_FILES["peptides_func_split"].path,
        f"{base}/peptides-functional/{split_file.name}", md5_of(split_file)))
    d = lrgb.load_peptides_func(tmp_path / "data", tmp_path / "cache",
                                download_dir=tmp_path / "dl", progress=False)
    assert [len(d[s]) for s in lrgb.SPLITS] == [4, 2, 1]
    # downloaded into the download folder, never into the data folder
    assert (tmp_path / "dl" / "peptides-functional" / csv_file.name).exists()
    assert not (tmp_path / "data").exists()


# ---------------------------------------------------------------------------- real data

def _real_data_dir() -> Path | None:
    for candidate in (Path("/work/shared/data"), REPO.parent / "shared" / "data"):
        if (candidate / "peptides-functional" / "peptide_multi_class_dataset.csv.gz").exists():
            return candidate
    return None


def test_first_50_real_peptides(tmp_path):
    data_dir = _real_data_dir()
    if data_dir is None:
        pytest.skip("the official Peptides-func files are not present")
    d = lrgb.load_peptides_func(data_dir, tmp_path / "cache", limit=50, progress=False)
    assert sum(len(d[s]) for s in lrgb.SPLITS) == 50  # the splits partition the rows
    for s in lrgb.SPLITS:
        g = d[s]
        assert g.nodes.shape == (int(g.n_node.sum()), 9)
        assert g.edges.shape == (int(g.n_edge.sum()), 3)
        assert g.graph_targets.shape == (len(g), 10)
        assert set(np.unique(g.graph_targets)) <= {0.0, 1.0}
        assert np.all(g.nodes < np.asarray(molecules.ATOM_FEATURE_DIMS))
        if len(g):
            assert g.n_node.min() > 5  # peptides, not fragments
            assert np.all(g.n_edge % 2 == 0)
    assert len(d["train"]) > len(d["val"])
