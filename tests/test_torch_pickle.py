"""Torch-pickled tensors read with NumPy alone: the fixture exactly, and corrupt variants.

The fixture (`shared/fixtures/pascalvoc-torch-pickle/`) was written by torch with
`pickle.dump`, as LRGB's PascalVOC-SP files. Other variants are written here by
`torch_pickle`, a byte-level writer of the same format (checked against the fixture's own
bytes below); corrupt ones are built in temporary folders.
"""

from __future__ import annotations

import os
import pickle
import pickletools
import shutil
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from swan_jax.data import lrgb
from swan_jax.data.errors import (
    ChecksumError,
    CorruptPickleError,
    DataError,
    DataFormatError,
    UnsafePickleError,
)
from swan_jax.data.safe_pickle import safe_load, safe_loads

REPO = Path(__file__).resolve().parents[1]


def _fixture_dir() -> Path | None:
    for candidate in (REPO.parent / "shared" / "fixtures" / "pascalvoc-torch-pickle",
                      Path("/work/shared/fixtures/pascalvoc-torch-pickle")):
        if (candidate / "train.pickle").is_file():
            return candidate
    return None


FIXTURE = _fixture_dir()
needs_fixture = pytest.mark.skipif(FIXTURE is None, reason="the torch-pickle fixture is absent")


def expected_graphs() -> list[tuple[np.ndarray, ...]]:
    with np.load(FIXTURE / "expected.npz") as f:
        return [tuple(f[f"{k}{g}"] for k in ("x", "ea", "ei", "y")) for g in range(3)]


# ------------------------------------------------------------------- a writer of the format

STORAGE_NAMES = {np.dtype("<f8"): "DoubleStorage", np.dtype("<f4"): "FloatStorage",
                 np.dtype("<f2"): "HalfStorage", np.dtype("<i8"): "LongStorage",
                 np.dtype("<i4"): "IntStorage", np.dtype("<i2"): "ShortStorage",
                 np.dtype("i1"): "CharStorage", np.dtype("u1"): "ByteStorage",
                 np.dtype(bool): "BoolStorage"}


def _pint(i: int) -> bytes:  # pickle protocol 2 int, as torch's pickler writes it
    if 0 <= i < 256:
        return b"K" + bytes([i])
    if 0 <= i < 65536:
        return b"M" + struct.pack("<H", i)
    return b"J" + struct.pack("<i", i)


def _pstr(text: str, memo: int) -> bytes:
    data = text.encode()
    return b"X" + struct.pack("<I", len(data)) + data + b"q" + bytes([memo])


def storage_blob(data: np.ndarray, *, type_name: str | None = None, key: str = "0",
                 numel: int | None = None, count: int | None = None,
                 little_endian: bool = True, sys_info: bytes | None = None,
                 trailing: bytes = b"", record_global: bytes | None = None) -> bytes:
    """torch's legacy serialisation of one storage holding `data` (1-D)."""
    type_name = type_name or STORAGE_NAMES[data.dtype]
    numel = data.size if numel is None else numel
    count = data.size if count is None else count
    header = pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) + pickle.dumps(1001, protocol=2)
    header += sys_info if sys_info is not None else pickle.dumps(
        {"protocol_version": 1001, "little_endian": little_endian,
         "type_sizes": {"short": 2, "int": 4, "long": 4}}, protocol=2)
    glob = record_global if record_global is not None else \
        b"ctorch\n" + type_name.encode() + b"\n"
    record = (b"\x80\x02(" + _pstr("storage", 0) + glob + b"q\x01" + _pstr(key, 2)
              + _pstr("cpu", 3) + _pint(numel) + b"Ntq\x04Q.")
    keys = b"\x80\x02]q\x00" + _pstr(key, 1) + b"a."
    raw = data.astype(data.dtype.newbyteorder("<" if little_endian else ">")).tobytes()
    return header + record + keys + struct.pack("<q", count) + raw + trailing


def _glob(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def _bytes(data: bytes) -> bytes:
    return b"B" + struct.pack("<I", len(data)) + data


def _tuple(items) -> bytes:
    return b"(" + b"".join(items) + b"t"


def tensor_op(blob: bytes, size, stride, offset: int = 0, hooks: bytes = b")") -> bytes:
    """Opcodes of `_rebuild_tensor_v2(_load_from_bytes(blob), offset, size, stride, False,
    OrderedDict(*hooks))`."""
    storage = _glob("torch.storage", "_load_from_bytes") + b"(" + _bytes(blob) + b"tR"
    return (_glob("torch._utils", "_rebuild_tensor_v2") + b"(" + storage + _pint(offset)
            + _tuple(map(_pint, size)) + _tuple(map(_pint, stride)) + b"\x89"
            + _glob("collections", "OrderedDict") + hooks + b"R" + b"tR")


def tensor(array: np.ndarray, **blob_options) -> bytes:
    array = np.ascontiguousarray(array)
    stride = tuple(s // array.itemsize for s in array.strides)
    return tensor_op(storage_blob(array.reshape(-1), **blob_options), array.shape, stride)


def torch_pickle(graphs) -> bytes:
    """A protocol-3 pickle of a list of tuples of tensors (each item: opcodes of one)."""
    body = b"".join(_tuple(items) for items in graphs)
    return b"\x80\x03](" + body + b"e."


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# ------------------------------------------------------------------------------ the fixture

@needs_fixture
def test_fixture_reads_exactly_as_expected():
    graphs = safe_load(FIXTURE / "train.pickle")
    expected = expected_graphs()
    assert isinstance(graphs, list) and len(graphs) == 3
    for got, want in zip(graphs, expected, strict=True):
        assert isinstance(got, tuple) and len(got) == 4
        for a, b in zip(got, want, strict=True):
            assert isinstance(a, np.ndarray)
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
    assert graphs[0][0].flags.c_contiguous


@needs_fixture
def test_writer_reproduces_torch_storage_bytes_of_the_fixture():
    """The test writer emits torch's own bytes, so the variants below are in its format."""
    blobs = [arg for op, arg, _ in pickletools.genops((FIXTURE / "train.pickle").read_bytes())
             if op.name == "BINBYTES"]
    expected = expected_graphs()
    arrays = [a for graph in expected for a in graph]
    assert len(blobs) == len(arrays) == 12
    for blob, array in zip(blobs, arrays, strict=True):
        key = blob.split(b"cpu")[0].rsplit(b"X\x0e\x00\x00\x00", 1)[1][:14].decode()
        assert storage_blob(array.reshape(-1), key=key) == blob
    graphs = safe_loads(torch_pickle([[tensor(a) for a in g] for g in expected]))
    for got, want in zip(graphs, expected, strict=True):
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)
            assert a.dtype == b.dtype


@needs_fixture
def test_pascalvoc_loader_reads_the_fixture_from_folder_and_from_zip(tmp_path):
    expected = expected_graphs()
    folder = tmp_path / "data" / "pascalvoc-sp"
    folder.mkdir(parents=True)
    for s in lrgb.SPLITS:
        shutil.copy(FIXTURE / "train.pickle", folder / f"{s}.pickle")
    d = lrgb.load_pascalvoc_sp(tmp_path / "data", tmp_path / "cache", download=False,
                               progress=False)
    for s in lrgb.SPLITS:
        np.testing.assert_array_equal(d[s].nodes, np.concatenate([g[0] for g in expected]))
        np.testing.assert_array_equal(d[s].edges, np.concatenate([g[1] for g in expected]))
        np.testing.assert_array_equal(d[s].senders, np.concatenate([g[2][0] for g in expected]))
        np.testing.assert_array_equal(d[s].node_targets[:, 0],
                                      np.concatenate([g[3] for g in expected]))
        assert d[s].meta["node_features"] == "raw"

    # The official zip (LRGB's folder inside), read in place from the download folder.
    zip_path = tmp_path / "dl" / lrgb.RAW_FILES["pascalvoc_zip"].path
    zip_path.parent.mkdir(parents=True)
    with zipfile.ZipFile(zip_path, "w") as archive:
        for s in lrgb.SPLITS:
            archive.write(FIXTURE / "train.pickle",
                          f"voc_superpixels_edge_wt_region_boundary/{s}.pickle")
    with pytest.raises(ChecksumError, match=r"expected 9a535cb17ab5c6ca94d0b93f0b5293e7 .*"
                                            r"pass verify_md5=False to use a file") as err:
        lrgb.load_pascalvoc_sp(tmp_path / "nodata", tmp_path / "cache2",
                               download_dir=tmp_path / "dl", download=False, progress=False)
    assert err.value.hint.setting == "verify_md5" and err.value.path == str(zip_path)
    z = lrgb.load_pascalvoc_sp(tmp_path / "nodata", tmp_path / "cache2", download=False,
                               download_dir=tmp_path / "dl", verify_md5=False,
                               standardize=True, progress=False)
    train = np.concatenate([g[0] for g in expected]).astype(np.float64)
    np.testing.assert_allclose(z["val"].nodes, (train - train.mean(0)) / train.std(0),
                               rtol=1e-5, atol=1e-5)
    assert z["val"].meta["node_features"] == "standardized"
    assert not (tmp_path / "nodata").exists()


# --------------------------------------------------------------------- layouts and dtypes

def test_offset_and_strides_are_honoured():
    storage = np.arange(20, dtype=np.float32) * 1.5
    blob = storage_blob(storage)
    got = safe_loads(b"\x80\x03" + tensor_op(blob, (3, 4), (1, 3), offset=3) + b".")
    want = np.array([[storage[3 + i + 3 * j] for j in range(4)] for i in range(3)])
    np.testing.assert_array_equal(got, want)
    assert got.flags.c_contiguous and got.flags.writeable
    empty = safe_loads(b"\x80\x03" + tensor_op(blob, (0, 5), (5, 1), offset=20) + b".")
    assert empty.shape == (0, 5) and empty.dtype == np.float32


@pytest.mark.parametrize("dtype", ["<f8", "<f2", "<i8", "<i4", "<i2", "i1", "u1", "bool"])
def test_every_storage_type_round_trips(dtype):
    rng = np.random.default_rng(0)
    values = (rng.normal(size=(3, 5)) * 50).astype(dtype)
    got = safe_loads(b"\x80\x03" + tensor(values) + b".")
    assert got.dtype == np.dtype(dtype).newbyteorder("=")
    np.testing.assert_array_equal(got, values)


def test_bfloat16_and_big_endian_storages():
    bits = np.array([0x3F80, 0xC020, 0x0000, 0x4049], np.uint16)  # 1.0, -2.5, 0, 3.140625
    got = safe_loads(b"\x80\x03" + tensor_op(
        storage_blob(bits, type_name="BFloat16Storage"), (4,), (1,)) + b".")
    np.testing.assert_array_equal(got, np.array([1.0, -2.5, 0.0, 3.140625], np.float32))
    values = np.array([1.25, -7.0, 1e6], np.float32)
    got = safe_loads(b"\x80\x03" + tensor(values, little_endian=False) + b".")
    np.testing.assert_array_equal(got, values)
    assert got.dtype == np.float32


# ----------------------------------------------------------------------- corrupt variants

@needs_fixture
def test_every_truncation_of_the_fixture_is_named_never_a_crash(tmp_path):
    data = (FIXTURE / "train.pickle").read_bytes()
    path = tmp_path / "train.pickle"
    for cut in list(range(0, len(data), 13)) + [len(data) - 1]:
        path.write_bytes(data[:cut])
        with pytest.raises(DataError) as err:
            safe_load(path)
        assert str(path) in str(err.value), (cut, err.value)
        assert isinstance(err.value, DataFormatError | UnsafePickleError)
    path.write_bytes(data[:1000])
    with pytest.raises(pickle.UnpicklingError, match="truncated"):  # still an UnpicklingError
        safe_load(path)


def _corrupt_fixture(tmp_path: Path, old: bytes, new: bytes, count: int = 1) -> Path:
    data = (FIXTURE / "train.pickle").read_bytes()
    assert len(old) == len(new) and data.count(old) >= count
    return write(tmp_path / "pascalvoc-sp" / "train.pickle", data.replace(old, new, count))


@needs_fixture
@pytest.mark.parametrize("old, new, message, error", [
    # the element count of x0's storage (112 floats) says 111
    (b"a.p\x00\x00\x00\x00\x00\x00\x00", b"a.o\x00\x00\x00\x00\x00\x00\x00",
     r"holds 111 elements but its record declares 112", DataFormatError),
    # ... and 113: the data then runs short
    (b"a.p\x00\x00\x00\x00\x00\x00\x00", b"a.q\x00\x00\x00\x00\x00\x00\x00",
     r"holds 113 elements but its record declares 112", DataFormatError),
    # the record declares 111 elements, the data holds 112
    (b"cpuq\x03Kp", b"cpuq\x03Ko", r"holds 112 elements but its record declares 111",
     DataFormatError),
    (b"torch\nLongStorage", b"torch\nEvilStorage", r"unknown storage type torch\.EvilStorage",
     DataFormatError),
    (b"_rebuild_tensor_v2", b"_rebuild_parameter",
     r"refused to load the global torch\._utils\._rebuild_parameter", UnsafePickleError),
    (b"OrderedDict", b"defaultdict", r"refused to load the global collections\.defaultdict",
     UnsafePickleError),
    (b"_load_from_bytes", b"_load_from_files", r"refused .*torch\.storage\._load_from_files",
     UnsafePickleError),
    # the protocol version of a storage header
    (b"\x80\x02M\xe9\x03.", b"\x80\x02M\xe8\x03.", r"torch storage protocol 1000",
     DataFormatError),
    # the size (8, 14) of x0 becomes (9, 14): it reads past its 112-element storage
    (b"K\x00K\x08K\x0e\x86", b"K\x00K\x09K\x0e\x86",
     r"size \(9, 14\), stride \(14, 1\) at offset 0 reads element 125 of a FloatStorage of "
     r"112 elements", DataFormatError),
])
def test_corrupt_fixture_variants_are_named(tmp_path, old, new, message, error):
    path = _corrupt_fixture(tmp_path, old, new)
    with pytest.raises(error, match=message) as err:
        safe_load(path)
    assert str(err.value).startswith(f"{path}:") and err.value.path == str(path)
    # through the loader, with the other two splits intact: the same error, before any cache
    for s in ("val", "test"):
        shutil.copy(FIXTURE / "train.pickle", path.parent / f"{s}.pickle")
    with pytest.raises(error, match=message):
        lrgb.load_pascalvoc_sp(tmp_path, tmp_path / "cache", download=False, progress=False)
    assert not (tmp_path / "cache").exists()


class _Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _one(blob: bytes, size=(3,), stride=(1,), **kw) -> bytes:
    return b"\x80\x03" + tensor_op(blob, size, stride, **kw) + b"."


def test_written_corrupt_variants_are_named(tmp_path):
    floats = np.arange(3, dtype=np.float32)
    marker = tmp_path / "pwned"
    cases = [
        (storage_blob(floats, trailing=b"\x00"), "1 unexpected bytes after storage 0"),
        (storage_blob(floats)[:-2],
         "truncated torch storage: 12 bytes needed for 3 elements of FloatStorage, only 10"),
        (b"PK\x03\x04" + storage_blob(floats), "zip format"),
        (b"\x80\x02K\x07." + storage_blob(floats)[len(pickle.dumps(0x1950A86A20F9469CFC6C,
                                                                  protocol=2)):],
         "not a torch legacy storage"),
        (storage_blob(floats, sys_info=pickle.dumps(_Evil(marker), protocol=2)),
         r"refused the global (posix|os)\.system inside a torch storage's header"),
        (storage_blob(floats, record_global=_glob("posix", "system")),
         r"refused the global posix\.system"),
        (storage_blob(np.array([0, 2, 1], np.uint8), type_name="BoolStorage"),
         "BoolStorage holds a byte other than 0/1"),
        (storage_blob(floats, numel=-1), "storage element count -1"),
        (storage_blob(floats).replace(b"]q\x00X\x01\x00\x00\x000", b"]q\x00X\x01\x00\x00\x001"),
         r"storage key list \['1'\] does not match its record's key '0'"),
    ]
    for blob, message in cases:
        with pytest.raises(DataError, match=message):
            safe_loads(_one(blob), source="voc.pickle")
    assert not marker.exists()

    blob = storage_blob(floats)
    with pytest.raises(DataFormatError, match="backward hooks"):
        safe_loads(_one(blob, hooks=b"(](K\x01K\x02tat"))  # OrderedDict([(1, 2)])
    with pytest.raises(DataFormatError, match=r"size \(3, 2\) and stride \(1,\)"):
        safe_loads(_one(blob, size=(3, 2), stride=(1,)))
    not_a_storage = (b"\x80\x03" + _glob("torch._utils", "_rebuild_tensor_v2")
                     + b"(" + _bytes(b"raw") + b"K\x00(K\x01t(K\x01t\x89)tR.")
    with pytest.raises(DataFormatError, match="got a bytes as its storage"):
        safe_loads(not_a_storage)
    with pytest.raises(DataFormatError, match="got 3 arguments"):
        safe_loads(b"\x80\x03" + _glob("torch._utils", "_rebuild_tensor_v2")
                   + b"(K\x00K\x00K\x00tR.")
    with pytest.raises(CorruptPickleError, match="voc.pickle: truncated or corrupt pickle"):
        safe_loads(_one(blob)[:-1], source="voc.pickle")
