"""Node-classification loaders: the real Tolokers graph, and small files in the formats of
the heterophily benchmark (Tolokers, Questions) and of OGB (ogbn-arxiv)."""

from __future__ import annotations

import gzip
import hashlib
import io
from pathlib import Path

import numpy as np
import pytest
import requests

from swan_jax.data import node_classification as nc
from swan_jax.data.errors import ChecksumError, DataFormatError, MissingDataError
from tests.test_download import FakeResponse

TOLOKERS = Path("/work/shared/data/tolokers/tolokers.npz")
REAL = Path(__file__).resolve().parents[2] / "shared" / "data"
if (REAL / "tolokers" / "tolokers.npz").is_file():
    TOLOKERS = REAL / "tolokers" / "tolokers.npz"


def heterophily_arrays(n: int = 6, splits: int = 3, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    train = np.zeros((splits, n), bool)
    val, test = train.copy(), train.copy()
    for s in range(splits):
        order = rng.permutation(n)
        train[s, order[:n // 2]] = True
        val[s, order[n // 2:n // 2 + 1]] = True
        test[s, order[n // 2 + 1:]] = True
    return {
        "node_features": rng.normal(size=(n, 3)).astype(np.float32),
        "node_labels": np.arange(n) % 2,
        # (0, 1) and (1, 0) both stored, and a self-loop: each ordered pair once after
        "edges": np.array([[0, 1], [1, 0], [1, 2], [3, 4], [5, 5], [2, 5]]),
        "train_masks": train, "val_masks": val, "test_masks": test,
    }


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return path


def load(name, data_dir, tmp_path, **kw):
    kw.setdefault("verify_md5", False)
    kw.setdefault("download", False)
    return nc.load_node_dataset(name, data_dir, tmp_path / "cache",
                                download_dir=tmp_path / "dl", **kw)


# ---------------------------------------------------------------------- the real graph

@pytest.mark.skipif(not TOLOKERS.is_file(), reason="the Tolokers release is not present")
def test_real_tolokers_graph_and_splits(tmp_path):
    d = nc.load_tolokers(TOLOKERS.parents[1], tmp_path / "cache",
                         download_dir=tmp_path / "dl", download=False)  # md5 checked
    g = d.graph
    assert len(g) == 1 and int(g.n_node[0]) == 11_758
    assert int(g.n_edge[0]) == 2 * 519_000  # stored once, no self-loops or duplicates
    pairs = set(zip(g.senders.tolist(), g.receivers.tolist(), strict=True))
    assert len(pairs) == 1_038_000 and all((v, u) in pairs for u, v in list(pairs)[:5000])
    degree = np.bincount(g.receivers, minlength=11_758)
    assert degree.max() == 2_138 and degree.mean() == pytest.approx(88.28, abs=0.01)
    assert g.nodes.shape == (11_758, 10) and g.nodes.dtype == np.float32
    assert g.node_targets.shape == (11_758, 1) and int(g.node_targets.sum()) == 2_566
    assert d.num_splits == 10 and d.train_masks.shape == (10, 11_758)
    assert (d.metric, d.loss, d.num_outputs) == ("roc_auc", "bce", 1)
    masks = d.split(3)
    assert not np.any(masks["train"] & masks["test"]) and masks["val"].sum() == 2_939
    assert not (tmp_path / "dl").exists()


# ------------------------------------------------------------------ heterophily format

@pytest.mark.parametrize("name", ["tolokers", "questions"])
def test_heterophily_npz_bidirected_with_masks(tmp_path, name):
    arrays = heterophily_arrays()
    write_npz(tmp_path / "data" / name / f"{name}.npz", arrays)
    d = load(name, tmp_path / "data", tmp_path)
    g = d.graph
    pairs = sorted(zip(g.senders.tolist(), g.receivers.tolist(), strict=True))
    assert pairs == [(0, 1), (1, 0), (1, 2), (2, 1), (2, 5), (3, 4), (4, 3), (5, 2), (5, 5)]
    np.testing.assert_array_equal(g.nodes, arrays["node_features"])
    np.testing.assert_array_equal(g.node_targets[:, 0], arrays["node_labels"])
    assert g.node_targets.dtype == np.float32  # BCE-ready
    for s in range(3):
        for k, m in d.split(s).items():
            np.testing.assert_array_equal(m, arrays[f"{k}_masks"][s])
    with pytest.raises(IndexError, match="splits 0..2"):
        d.split(3)
    assert g.meta["edges"].startswith("both directions") and g.meta["dataset"] == name
    directed = load(name, tmp_path / "data", tmp_path, symmetrize=False)
    assert list(zip(directed.graph.senders.tolist(), directed.graph.receivers.tolist(),
                    strict=True)) == [tuple(e) for e in arrays["edges"].tolist()]
    assert directed.graph.meta["edges"] == "as stored"


def _bad(arrays, **changes):
    out = dict(arrays)
    out.update(changes)
    return out


BASE = heterophily_arrays()


@pytest.mark.parametrize("arrays, message", [
    (_bad(BASE, edges=np.array([[0, 1], [1, 2], [2, 3], [2, 7]])),
     r"edges\[3\] = \(2, 7\) refers to a node outside 0..5"),
    (_bad(BASE, edges=np.array([[0, -1]])), r"edges\[0\] = \(0, -1\) refers to a node"),
    (_bad(BASE, edges=np.zeros((4, 3), np.int64)), r"edges has shape \(4, 3\)"),
    (_bad(BASE, edges=np.zeros((4, 2))), r"edges has shape \(4, 2\) and dtype float64"),
    (_bad(BASE, node_labels=np.array([0, 1, 2, 0, 1, 0])),
     r"node_labels\[2\] = 2 is outside 0..1"),
    (_bad(BASE, node_labels=np.zeros(5, np.int64)), r"node_labels has shape \(5,\)"),
    (_bad(BASE, val_masks=BASE["val_masks"][:, :5]), r"val_masks has shape \(3, 5\)"),
    (_bad(BASE, test_masks=BASE["test_masks"].astype(np.int8)), r"test_masks .* dtype int8"),
    (_bad(BASE, test_masks=BASE["test_masks"][:2]), "different or no numbers of splits"),
    (_bad(BASE, val_masks=BASE["val_masks"] | BASE["train_masks"]),
     r"split 0: node \d is in both train_masks and val_masks"),
    (_bad(BASE, val_masks=np.zeros_like(BASE["val_masks"])), r"val_masks\[0\] selects no node"),
    (_bad(BASE, node_features=np.where(np.eye(6, 3) > 0, np.nan, 1.0).astype(np.float32)),
     r"node_features\[0, 0\] = nan is not finite"),
    ({k: v for k, v in BASE.items() if k != "edges"}, r"lacks the array\(s\) \['edges'\]"),
])
def test_bad_heterophily_files_are_named(tmp_path, arrays, message):
    path = write_npz(tmp_path / "data" / "tolokers" / "tolokers.npz", arrays)
    with pytest.raises(DataFormatError, match=message) as err:
        load("tolokers", tmp_path / "data", tmp_path)
    assert str(err.value).startswith(f"{path}: ") and err.value.path == str(path)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "cache").exists()  # refused before anything was processed


def test_truncated_npz_and_wrong_md5_are_named(tmp_path):
    path = write_npz(tmp_path / "data" / "tolokers" / "tolokers.npz", BASE)
    with pytest.raises(ChecksumError, match=r"expected 8d23e7819e472e2efb23ab6bab61bb1a .*"
                                            r"pass verify_md5=False to use a file of your own"):
        load("tolokers", tmp_path / "data", tmp_path, verify_md5=True)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(DataFormatError, match=r"tolokers\.npz: not a readable \.npz"):
        load("tolokers", tmp_path / "data", tmp_path)


# --------------------------------------------------------------------------- OGB format

def write_csv_gz(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write("".join(",".join(str(v) for v in row) + "\n" for row in rows))


def make_arxiv(root: Path, *, features=None, labels=None, edges=None, splits=None) -> Path:
    rng = np.random.default_rng(1)
    n = 8
    features = rng.normal(size=(n, 4)).round(4) if features is None else features
    labels = [[v] for v in (np.arange(n) * 5) % 40] if labels is None else labels
    edges = [[0, 1], [1, 2], [2, 0], [3, 7], [6, 5]] if edges is None else edges
    splits = splits or {"train": [0, 1, 2, 3], "valid": [4, 5], "test": [6, 7]}
    folder = root / "ogbn_arxiv"
    write_csv_gz(folder / "raw/node-feat.csv.gz", features)
    write_csv_gz(folder / "raw/node-label.csv.gz", labels)
    write_csv_gz(folder / "raw/edge.csv.gz", edges)
    for name, idx in splits.items():
        write_csv_gz(folder / f"split/time/{name}.csv.gz", [[i] for i in idx])
    return folder


def test_ogbn_arxiv_raw_files(tmp_path):
    make_arxiv(tmp_path / "data")
    d = load("ogbn-arxiv", tmp_path / "data", tmp_path)
    g = d.graph
    assert g.nodes.shape == (8, 4) and g.nodes.dtype == np.float32
    np.testing.assert_array_equal(g.node_targets[:, 0], (np.arange(8) * 5) % 40)
    assert g.node_targets.dtype == np.int32
    pairs = set(zip(g.senders.tolist(), g.receivers.tolist(), strict=True))
    assert pairs == {(0, 1), (1, 0), (1, 2), (2, 1), (2, 0), (0, 2), (3, 7), (7, 3), (6, 5),
                     (5, 6)}
    assert d.num_splits == 1 and (d.metric, d.loss, d.num_classes) == ("accuracy", "ce", 40)
    np.testing.assert_array_equal(np.flatnonzero(d.split(0)["val"]), [4, 5])
    directed = load("ogbn-arxiv", tmp_path / "data", tmp_path, symmetrize=False)
    assert directed.graph.senders.tolist() == [0, 1, 2, 3, 6]


@pytest.mark.parametrize("change, file, message", [
    ({"features": [[0.1, 0.2]] * 7 + [[0.3]]}, "node-feat", "malformed CSV"),
    ({"labels": [[0]] * 7 + [[40]]}, "node-label", r"node labels\[7\] = 40 is outside 0..39"),
    ({"labels": [[0]] * 7}, "node-label", r"node labels has shape \(7,\)"),
    ({"edges": [[0, 1], [1, 8]]}, "edge", r"edge\[1\] = \(1, 8\) refers to a node outside"),
    ({"edges": [[0, "x"]]}, "edge", "malformed CSV"),
    ({"splits": {"train": [0, 9], "valid": [4], "test": [6]}}, "train",
     "node index 9 is outside 0..7"),
    ({"splits": {"train": [0, 0, 1], "valid": [4], "test": [6]}}, "train",
     "lists a node more than once"),
    ({"splits": {"train": [0, 1], "valid": [1, 4], "test": [6]}}, "split/time",
     "node 1 is in both train_masks and val_masks"),
])
def test_bad_arxiv_files_are_named(tmp_path, change, file, message):
    make_arxiv(tmp_path / "data", **change)
    with pytest.raises(DataFormatError, match=message) as err:
        load("ogbn-arxiv", tmp_path / "data", tmp_path)
    assert file in err.value.path


# ----------------------------------------------------------- availability and downloads

def test_missing_files_say_where_and_how(tmp_path):
    data, dl = tmp_path / "data", tmp_path / "dl"
    (q,) = nc.missing_files("questions", data, dl)
    assert not q.downloadable and "heterophilous-graphs" in q.url
    assert q.looked_in[0] == str((data / "questions" / "questions.npz").absolute())
    arxiv = nc.missing_files("ogbn-arxiv", data, dl)
    assert [m.file for m in arxiv] == [f"ogbn_arxiv/{f}" for f in nc.ARXIV_FILES]
    assert "arxiv.zip" in str(arxiv[0])
    (t,) = nc.missing_files("tolokers", data, dl)
    assert t.downloadable and t.download_to == str((dl / "tolokers/tolokers.npz").absolute())
    with pytest.raises(MissingDataError, match="questions.npz") as err:
        load("questions", data, tmp_path)
    assert isinstance(err.value, FileNotFoundError) and err.value.missing == [q]
    with pytest.raises(ValueError, match="unknown node-classification data set 'cora'"):
        nc.missing_files("cora")
    assert not data.exists() and not dl.exists()


def test_tolokers_download_lands_in_the_download_folder_or_nowhere(tmp_path, monkeypatch):
    payload = io.BytesIO()
    np.savez(payload, **BASE)
    good = payload.getvalue()
    monkeypatch.setitem(nc._SPECS, "tolokers", nc._SPECS["tolokers"].__class__(
        ("tolokers", "."), ("tolokers.npz",), "https://example.invalid/tolokers.npz",
        hashlib.md5(good).hexdigest(), ""))
    calls = []

    def offline(url, timeout=None, **kwargs):
        calls.append(url)
        raise requests.exceptions.ConnectionError("no network")

    monkeypatch.setattr(requests, "get", offline)
    data, dl = tmp_path / "data", tmp_path / "dl"
    (m,) = nc.ensure_available(["tolokers"], data, dl)
    assert m.reason == "download failed: no network" and calls  # the cause, not advice
    assert not dl.exists() and not data.exists()  # nothing left behind, no empty folder

    monkeypatch.setattr(requests, "get", lambda url, timeout=None, **kwargs: FakeResponse(
        url, good[:-10] + b"x" * 10))
    with pytest.raises(MissingDataError, match="download failed: downloaded .* has md5"):
        load("tolokers", data, tmp_path, download=True, verify_md5=True)
    assert not dl.exists() and not data.exists()

    monkeypatch.setattr(requests, "get",
                        lambda url, timeout=None, **kwargs: FakeResponse(url, good))
    d = load("tolokers", data, tmp_path, download=True, verify_md5=True)
    assert (dl / "tolokers" / "tolokers.npz").read_bytes() == good
    assert int(d.graph.n_node[0]) == 6 and not data.exists()
