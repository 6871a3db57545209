"""Issue 14's data items: the raw-data folder is only read, downloads go to a separate folder
and leave nothing behind when they fail, an up-front availability check lists everything
missing, and data errors carry the file, row and the switch / flag that changes them.

The network is mocked (`requests.get`, what pooch calls): nothing downloads in these tests.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import shutil
import stat
import zipfile
from pathlib import Path

import numpy as np
import pytest
import requests

from swan_jax.data import download, lrgb
from swan_jax.data.errors import (
    ChecksumError,
    DataError,
    DataFormatError,
    DownloadError,
    MissingDataError,
    UnsafePickleError,
)
from swan_jax.data.safe_pickle import safe_loads
from tests.test_download import FakeWeb
from tests.test_lrgb_data import SMILES, _labels, make_func

FIXTURE = Path("/work/shared/fixtures/pascalvoc-torch-pickle/train.pickle")
if (Path(__file__).resolve().parents[2] / "shared/fixtures/pascalvoc-torch-pickle").is_dir():
    FIXTURE = Path(__file__).resolve().parents[2] / \
        "shared/fixtures/pascalvoc-torch-pickle/train.pickle"


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under `root` with its kind, size and mtime (folders included)."""
    out = {}
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        out[str(path)] = (stat.S_IFMT(st.st_mode), st.st_size if path.is_file() else 0,
                          st.st_mtime_ns)
    return out


@pytest.fixture
def read_only(tmp_path):
    """`make(folder)` strips every write bit under `folder`; restored after the test."""
    made = []

    def make(folder: Path) -> Path:
        for path in [folder, *folder.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
        made.append(folder)
        return folder

    yield make
    for folder in made:
        for path in [folder, *folder.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)


@pytest.fixture
def network(monkeypatch):
    net = FakeWeb()
    monkeypatch.setattr(requests, "get", net.get)
    return net


def test_loading_from_a_read_only_data_folder_writes_nothing_there(tmp_path, read_only,
                                                                   network):
    data = tmp_path / "data"
    make_func(data)
    read_only(data)
    before = snapshot(data)
    d = lrgb.load_peptides_func(data, tmp_path / "cache", download_dir=tmp_path / "dl",
                                verify_md5=False, progress=False)
    assert [len(d[s]) for s in lrgb.SPLITS] == [4, 2, 1]
    assert snapshot(data) == before
    assert list((tmp_path / "cache").rglob("*.npz")) and not (tmp_path / "dl").exists()
    assert network.requests == []


def test_failed_download_leaves_nothing_in_data_or_download_folder(tmp_path, read_only,
                                                                   network):
    """The reported bug: a failed Peptides-struct download created an empty
    `peptides-structural/` folder inside the data folder."""
    data = tmp_path / "data"
    make_func(data)
    read_only(data)
    before = snapshot(data)
    dl = tmp_path / "home" / ".cache" / "swan-jax"
    with pytest.raises(DownloadError, match=r"could not download https://www\.dropbox\.com/s/"
                                            r"0d4aalmq4b4e2nh.*cannot resolve www\.dropbox"
                                            r"\.com") as err:
        lrgb.load_peptides_struct(data, tmp_path / "cache", download_dir=dl, progress=False)
    assert err.value.url.startswith("https://www.dropbox.com/s/0d4aalmq4b4e2nh")
    assert err.value.path == str(dl / lrgb.RAW_FILES["peptides_struct_csv"].path)
    assert snapshot(data) == before
    assert not (tmp_path / "home").exists()  # not even the empty folders of the download dir
    assert not (tmp_path / "cache").exists()

    # md5 mismatch: the same
    network.files[lrgb.RAW_FILES["peptides_struct_csv"].url] = b"<html>quota exceeded</html>"
    with pytest.raises(ChecksumError, match="has md5 .*expected c240c1c15466b5c907c63e180fa8aa89"
                                            r".*pass verify_md5=False to "):
        lrgb.load_peptides_struct(data, tmp_path / "cache", download_dir=dl, progress=False)
    assert snapshot(data) == before and not (tmp_path / "home").exists()


def test_download_dir_defaults_to_a_per_user_cache_overridable_by_env(monkeypatch, tmp_path):
    monkeypatch.delenv("SWAN_DOWNLOAD_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    assert download.default_download_dir() == tmp_path / "me" / ".cache" / "swan-jax"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert download.default_download_dir() == tmp_path / "xdg" / "swan-jax"
    monkeypatch.setenv("SWAN_DOWNLOAD_DIR", str(tmp_path / "mine"))
    assert download.default_download_dir() == tmp_path / "mine"
    assert lrgb.missing_files("peptides-func", tmp_path / "data")[0].download_to.startswith(
        str(tmp_path / "mine"))


def test_availability_check_lists_everything_without_network_or_writes(tmp_path, network):
    data, dl = tmp_path / "data", tmp_path / "dl"
    data.mkdir()
    everything = [m for d in lrgb.DATASETS for m in lrgb.missing_files(d, data, dl)]
    assert [(m.dataset, m.file) for m in everything] == [
        ("peptides-func", "peptides-functional/peptide_multi_class_dataset.csv.gz"),
        ("peptides-func", "peptides-functional/splits_random_stratified_peptide.pickle"),
        ("peptides-struct", "peptides-structural/peptide_structure_normalized_dataset.csv.gz"),
        ("peptides-struct",
         "peptides-structural/splits_random_stratified_peptide_structure.pickle"),
        ("pascalvoc-sp", "pascalvoc-sp/voc_superpixels_edge_wt_region_boundary.zip"),
    ]
    assert all(m.downloadable and m.md5 for m in everything)
    voc = everything[-1]
    assert voc.looked_in[0] == str((data / "pascalvoc-sp/voc_superpixels_edge_wt_region_"
                                            "boundary.zip").absolute())
    assert any("VOCSuperpixels" in p for p in voc.looked_in)
    # one place to put it (the data folder), not the download folder as well
    assert "zenodo.org/records/6975830" in str(voc) and str(voc).count("put it at") == 1
    assert str(dl.absolute()) not in str(voc) and voc.looked_in[0] in str(voc)

    make_func(data)  # now Peptides-func is there
    assert lrgb.missing_files("peptides-func", data, dl) == []
    # the extracted VOC pickles count as VOC's files
    for s in lrgb.SPLITS:
        (data / "VOCSuperpixels/slic_compactness_30/edge_wt_region_boundary/raw").mkdir(
            parents=True, exist_ok=True)
        (data / f"VOCSuperpixels/slic_compactness_30/edge_wt_region_boundary/raw/{s}.pickle"
         ).write_bytes(b"")
    assert lrgb.missing_files("pascalvoc-sp", data, dl) == []
    assert network.requests == [] and not dl.exists()
    with pytest.raises(ValueError, match="unknown LRGB data set 'zinc'"):
        lrgb.missing_files("zinc", data, dl)


def test_ensure_available_downloads_what_it_can_and_lists_the_rest(tmp_path, read_only,
                                                                   network, monkeypatch):
    data, dl = tmp_path / "data", tmp_path / "dl"
    make_func(data)
    read_only(data)
    before = snapshot(data)
    csv_spec = lrgb.RAW_FILES["peptides_struct_csv"]
    served = b"struct csv bytes"
    monkeypatch.setitem(lrgb.RAW_FILES, "peptides_struct_csv", lrgb.RawFile(
        csv_spec.path, csv_spec.url, hashlib.md5(served).hexdigest(),
        alternatives=csv_spec.alternatives))
    network.files[csv_spec.url] = served
    still = lrgb.ensure_available(lrgb.DATASETS, data, dl)
    assert [(m.dataset, m.file.rsplit("/", 1)[1]) for m in still] == [
        ("peptides-struct", "splits_random_stratified_peptide_structure.pickle"),
        ("pascalvoc-sp", "voc_superpixels_edge_wt_region_boundary.zip")]
    assert all(m.reason.startswith("download failed: ") for m in still)
    assert "every mirror failed" in still[1].reason  # Zenodo, then LRGB's Dropbox link
    assert (dl / csv_spec.path).read_bytes() == served
    assert oct((dl / csv_spec.path).stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    assert sorted(p.relative_to(dl).as_posix() for p in dl.rglob("*")) == [
        "peptides-structural", csv_spec.path]  # nothing else left behind
    assert snapshot(data) == before

    # downloads off: nothing fetched, every missing file listed
    network.requests.clear()
    off = lrgb.ensure_available(lrgb.DATASETS, data, dl, download=False)
    assert [m.reason for m in off] == ["not found", "not found"] and network.requests == []
    with pytest.raises(MissingDataError, match=r"splits_random_stratified_peptide_structure"
                                               r".*\(downloads are off: download=False; "
                                               r"without them") as err:
        lrgb.load_peptides_struct(data, tmp_path / "cache", download_dir=dl, download=False,
                                  progress=False)
    assert err.value.hint.setting == "download" and len(err.value.missing) == 1
    assert isinstance(err.value, FileNotFoundError)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.skipif(not FIXTURE.is_file(), reason="the torch-pickle fixture is absent")
def test_pascalvoc_zip_is_downloaded_from_a_mirror_and_read_in_place(tmp_path, read_only,
                                                                     network, monkeypatch):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for s in lrgb.SPLITS:
            archive.write(FIXTURE, f"voc_superpixels_edge_wt_region_boundary/{s}.pickle")
    zipped = buf.getvalue()
    spec = lrgb.RAW_FILES["pascalvoc_zip"]
    monkeypatch.setitem(lrgb.RAW_FILES, "pascalvoc_zip", lrgb.RawFile(
        spec.path, spec.url, hashlib.md5(zipped).hexdigest(), mirrors=spec.mirrors))
    (tmp_path / "data").mkdir()
    data = read_only(tmp_path / "data")
    dl = tmp_path / "dl"

    network.files[spec.mirrors[0]] = zipped[:-1] + b"?"  # Dropbox serves a damaged copy
    with pytest.raises(ChecksumError, match="no mirror served the expected file") as err:
        lrgb.load_pascalvoc_sp(data, tmp_path / "cache", download_dir=dl, progress=False)
    assert err.value.hint.setting == "verify_md5" and not dl.exists()

    network.files[spec.mirrors[0]] = zipped  # Zenodo unreachable, Dropbox fine
    d = lrgb.load_pascalvoc_sp(data, tmp_path / "cache", download_dir=dl, progress=False)
    assert network.requests[-2:] == [spec.url, spec.mirrors[0]]
    assert (dl / spec.path).read_bytes() == zipped
    assert [len(d[s]) for s in lrgb.SPLITS] == [3, 3, 3]
    assert d["train"].meta == {"dataset": "pascalvoc-sp", "node_features": "raw",
                               "source": str(dl / spec.path)}
    assert list(data.iterdir()) == []

    # a damaged zip on disk is named, with the way out
    (dl / spec.path).write_bytes(zipped[: len(zipped) // 2])
    with pytest.raises(DataFormatError, match=r"\.zip: truncated or corrupt zip"):
        lrgb.load_pascalvoc_sp(data, tmp_path / "cache2", download_dir=dl, verify_md5=False,
                               progress=False)


def test_errors_carry_file_row_and_the_switch_that_changes_them(tmp_path):
    rows = [[i, s, "PEP", json.dumps(_labels(i)), 1000 + i] for i, s in enumerate(SMILES)]
    rows[4][1] = "C1CC"
    make_func(tmp_path / "data", rows=rows)
    with pytest.raises(DataFormatError) as err:
        lrgb.load_peptides_func(tmp_path / "data", tmp_path / "cache", verify_md5=False,
                                download=False, progress=False)
    e = err.value
    assert (e.row, e.line, e.identifier) == (4, 6, "1004")
    assert e.path.endswith("peptide_multi_class_dataset.csv.gz")
    assert (e.switch, e.hint.setting) == ("skip_bad_rows=True", "skip_bad_rows")
    assert str(e).endswith("(pass skip_bad_rows=True to skip such rows)")
    assert isinstance(e, DataError) and isinstance(e, ValueError)

    with pytest.raises(ChecksumError) as err:
        lrgb.load_peptides_func(tmp_path / "data", tmp_path / "cache", download=False,
                                progress=False)
    e = err.value
    assert (e.switch, e.hint.setting, e.expected) == ("verify_md5=False", "verify_md5",
                                              "701eb743e899f4d793f0e13c8fa5a1b4")
    assert "replace it with the official file" in str(e)  # it is in the data folder

    with pytest.raises(UnsafePickleError) as err:
        safe_loads(b"\x80\x02cos\nsystem\n.", source="x.pickle")
    assert err.value.global_name == "os.system" and err.value.path == "x.pickle"
    assert isinstance(err.value, DataError)


def test_voc_label_outside_classes_is_named_but_255_is_kept(tmp_path):
    rng = np.random.default_rng(0)
    graphs = []
    for _ in range(2):
        y = rng.integers(0, 21, size=5)
        y[0] = 255
        graphs.append((rng.normal(size=(5, 14)).astype(np.float32),
                       rng.random((3, 2)).astype(np.float32), rng.integers(0, 5, (2, 3)), y))
    folder = tmp_path / "data" / "pascalvoc-sp"
    folder.mkdir(parents=True)
    for s in lrgb.SPLITS:
        (folder / f"{s}.pickle").write_bytes(pickle.dumps(graphs))
    d = lrgb.load_pascalvoc_sp(tmp_path / "data", tmp_path / "cache", progress=False)
    assert d["val"].node_targets[0, 0] == 255 and d["val"].node_targets[5, 0] == 255
    bad = list(graphs)
    bad[1] = (*bad[1][:3], np.array([0, 1, 2, 21, 3]))
    (folder / "test.pickle").write_bytes(pickle.dumps(bad))
    shutil.rmtree(tmp_path / "cache")
    with pytest.raises(DataFormatError, match=r"test\.pickle: graph 1: node label 21 is outside "
                                              r"0..20 and is not the ignore label 255") as err:
        lrgb.load_pascalvoc_sp(tmp_path / "data", tmp_path / "cache", progress=False)
    assert err.value.item == "graph 1"
