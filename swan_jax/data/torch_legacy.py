"""PyTorch tensors inside plain pickles, read with NumPy alone (no torch, nothing executed).

`pickle.dump` of a CPU tensor writes

    torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)

whose storage pickles as `torch.storage._load_from_bytes(b)`, `b` being torch's legacy
(non-zip) serialisation of that one storage:

1. a pickle of the magic number `0x1950a86a20f9469cfc6c`,
2. a pickle of the protocol version `1001`,
3. a pickle of a system-info dict (`little_endian`, `type_sizes`, ...),
4. the storage's pickle: only a persistent id `('storage', torch.<T>Storage, key,
   location, numel, view_metadata)`,
5. a pickle of the list of storage keys (one here),
6. per key: its element count as 8-byte little-endian int64, then the raw data.

`SafeUnpickler` maps the two globals to `rebuild_tensor_v2` / `load_from_bytes` below;
the storage type names (`torch.FloatStorage`, ...) are admitted only inside step 4, as
`StorageType` markers. Every count, offset, size and stride is checked against the bytes
actually present, so a corrupt file raises `DataFormatError` naming it instead of
returning a wrong array.
"""

from __future__ import annotations

import dataclasses
import io
import math
import pickle
import struct

import numpy as np

from swan_jax.data.errors import DataError, DataFormatError, UnsafePickleError

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
_PARSE_ERRORS = (EOFError, pickle.UnpicklingError, ValueError, TypeError, IndexError,
                 KeyError, AttributeError, struct.error)
PROTOCOL_VERSION = 1001


@dataclasses.dataclass(frozen=True)
class StorageType:
    """A torch storage class (`torch.<name>`): the NumPy dtype of its little-endian data."""

    name: str
    dtype: np.dtype


# torch.<T>Storage -> dtype of its raw little-endian elements. BFloat16 is read as its
# 16-bit pattern and widened to float32 exactly.
STORAGE_TYPES: dict[str, StorageType] = {
    name: StorageType(name, np.dtype(code)) for name, code in (
        ("DoubleStorage", "<f8"), ("FloatStorage", "<f4"), ("HalfStorage", "<f2"),
        ("BFloat16Storage", "<u2"), ("LongStorage", "<i8"), ("IntStorage", "<i4"),
        ("ShortStorage", "<i2"), ("CharStorage", "i1"), ("ByteStorage", "u1"),
        ("BoolStorage", "u1"),
    )
}


@dataclasses.dataclass(frozen=True)
class TorchStorage:
    """A storage read from its bytes: a 1-D NumPy array of `numel` elements."""

    array: np.ndarray
    type_name: str


class _NoGlobals(pickle.Unpickler):
    """For the header and key-list pickles: plain data only."""

    def __init__(self, file, source: str) -> None:
        super().__init__(file)
        self.source = source

    def find_class(self, module: str, name: str):
        raise UnsafePickleError(f"{self.source}: refused the global {module}.{name} inside a "
                                "torch storage's header (it was not imported or run)",
                                path=self.source, global_name=f"{module}.{name}")

    def persistent_load(self, pid):
        raise DataFormatError(f"{self.source}: unexpected persistent id {pid!r} in a torch "
                              "storage's header", path=self.source)


class _StorageRecord(_NoGlobals):
    """For step 4: admits only `torch.<T>Storage` names and the storage's persistent id."""

    def find_class(self, module: str, name: str):
        if module == "torch" and name in STORAGE_TYPES:
            return STORAGE_TYPES[name]
        if module == "torch" and name.endswith("Storage"):
            raise DataFormatError(
                f"{self.source}: unknown storage type torch.{name}; only "
                f"{', '.join(sorted(STORAGE_TYPES))} are read", path=self.source)
        return super().find_class(module, name)

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 6 and pid[0] == "storage"):
            raise DataFormatError(f"{self.source}: a torch storage record must be the "
                                  f"persistent id ('storage', type, key, location, numel, "
                                  f"view), got {pid!r:.200}", path=self.source)
        _, storage_type, key, location, numel, view = pid
        if not isinstance(storage_type, StorageType):
            raise DataFormatError(f"{self.source}: storage type {storage_type!r:.80} is not a "
                                  "torch storage class", path=self.source)
        if not isinstance(key, str) or not isinstance(location, str):
            raise DataFormatError(f"{self.source}: storage key {key!r:.80} / location "
                                  f"{location!r:.80} must be strings", path=self.source)
        if not _is_count(numel):
            raise DataFormatError(f"{self.source}: storage element count {numel!r:.80} is not "
                                  "a non-negative integer", path=self.source)
        if view is not None:
            raise DataFormatError(f"{self.source}: storage views (view metadata {view!r:.80}) "
                                  "are not supported", path=self.source)
        return _Record(storage_type, key, numel)


@dataclasses.dataclass(frozen=True)
class _Record:
    storage_type: StorageType
    key: str
    numel: int


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _read_exact(f: io.BytesIO, n: int, what: str, source: str) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise DataFormatError(f"{source}: truncated torch storage: {n} bytes needed for "
                              f"{what}, only {len(data)} remain", path=source)
    return data


def _header(f: io.BytesIO, source: str) -> bool:
    """Read steps 1-3; return whether the data is little-endian."""
    try:
        magic = _NoGlobals(f, source).load()
        protocol = _NoGlobals(f, source).load()
        sys_info = _NoGlobals(f, source).load()
    except DataError:
        raise
    except _PARSE_ERRORS as err:
        raise DataFormatError(f"{source}: corrupt torch storage header ({type(err).__name__}: "
                              f"{err})", path=source) from err
    if magic != MAGIC_NUMBER:
        raise DataFormatError(f"{source}: not a torch legacy storage (magic number "
                              f"{magic!r:.40})", path=source)
    if protocol != PROTOCOL_VERSION:
        raise DataFormatError(f"{source}: torch storage protocol {protocol!r:.40}, expected "
                              f"{PROTOCOL_VERSION}", path=source)
    if not isinstance(sys_info, dict):
        raise DataFormatError(f"{source}: torch storage system info is "
                              f"{type(sys_info).__name__}, expected a dict", path=source)
    little_endian = sys_info.get("little_endian", True)
    if not isinstance(little_endian, bool):
        raise DataFormatError(f"{source}: little_endian = {little_endian!r:.40} is not a bool",
                              path=source)
    return little_endian


def load_from_bytes(data, *, source: str = "<pickle>") -> TorchStorage:
    """`torch.storage._load_from_bytes(data)`, read with NumPy: the storage's elements.

    Raises DataFormatError (naming `source`) when `data` is not exactly one legacy storage
    record followed by its key list and that key's element count and data.
    """
    if not isinstance(data, bytes | bytearray):
        raise DataFormatError(f"{source}: _load_from_bytes got {type(data).__name__}, "
                              "expected bytes", path=source)
    if bytes(data[:4]) == b"PK\x03\x04":
        raise DataFormatError(f"{source}: storage in torch's zip format; only the legacy "
                              "format that pickle.dump writes is read", path=source)
    f = io.BytesIO(data)
    little_endian = _header(f, source)
    try:
        record = _StorageRecord(f, source).load()
        keys = _NoGlobals(f, source).load()
    except DataError:
        raise
    except _PARSE_ERRORS as err:
        raise DataFormatError(f"{source}: corrupt torch storage record ({type(err).__name__}: "
                              f"{err})", path=source) from err
    if not isinstance(record, _Record):
        raise DataFormatError(f"{source}: the storage pickle holds a "
                              f"{type(record).__name__}, not a storage record", path=source)
    storage_type, key, numel = record.storage_type, record.key, record.numel
    if keys != [key]:
        raise DataFormatError(f"{source}: storage key list {keys!r:.80} does not match its "
                              f"record's key {key!r}", path=source)
    (count,) = struct.unpack("<q", _read_exact(f, 8, "the element count", source))
    if count != numel:
        raise DataFormatError(f"{source}: storage {key} holds {count} elements but its record "
                              f"declares {numel}", path=source)
    dtype = storage_type.dtype
    raw = _read_exact(f, numel * dtype.itemsize,
                      f"{numel} elements of {storage_type.name}", source)
    if f.read(1):
        raise DataFormatError(f"{source}: {len(data) - f.tell() + 1} unexpected bytes after "
                              f"storage {key}'s {numel} elements", path=source)
    array = np.frombuffer(raw, dtype if little_endian else dtype.newbyteorder(">"))
    return TorchStorage(_native(array, storage_type, source), storage_type.name)


def _native(array: np.ndarray, storage_type: StorageType, source: str) -> np.ndarray:
    if storage_type.name == "BFloat16Storage":  # the upper half of a float32
        return (array.astype(np.uint32) << 16).view(np.float32)
    if storage_type.name == "BoolStorage":
        if np.any(array > 1):
            raise DataFormatError(f"{source}: BoolStorage holds a byte other than 0/1",
                                  path=source)
        return array.astype(bool)
    return array.astype(array.dtype.newbyteorder("="))


def rebuild_tensor_v2(*args, source: str = "<pickle>") -> np.ndarray:
    """`torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
    backward_hooks[, metadata])` as a NumPy array (a copy, C-contiguous).

    Refuses (DataFormatError naming `source`) a storage that is not one read by
    `load_from_bytes`, a size / stride that does not fit the storage, and backward hooks.
    """
    if len(args) not in (6, 7):
        raise DataFormatError(f"{source}: _rebuild_tensor_v2 got {len(args)} arguments, "
                              "expected 6 or 7", path=source)
    storage, offset, size, stride, _requires_grad, hooks = args[:6]
    if not isinstance(storage, TorchStorage):
        raise DataFormatError(f"{source}: _rebuild_tensor_v2 got a {type(storage).__name__} "
                              "as its storage", path=source)
    if not (_is_count(offset) and isinstance(size, tuple) and isinstance(stride, tuple)
            and len(size) == len(stride) and all(map(_is_count, size + stride))):
        raise DataFormatError(f"{source}: tensor offset {offset!r:.40}, size {size!r:.80} and "
                              f"stride {stride!r:.80} are not non-negative integers of equal "
                              "rank", path=source)
    if hooks:
        raise DataFormatError(f"{source}: tensor with backward hooks is not admitted",
                              path=source)
    if len(args) == 7 and args[6] not in (None, {}):
        raise DataFormatError(f"{source}: tensor metadata {args[6]!r:.80} is not admitted",
                              path=source)
    array = storage.array
    if math.prod(size) == 0:
        return np.empty(size, array.dtype)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
    if last >= array.size:
        raise DataFormatError(f"{source}: tensor of size {size}, stride {stride} at offset "
                              f"{offset} reads element {last} of a {storage.type_name} of "
                              f"{array.size} elements", path=source)
    view = np.lib.stride_tricks.as_strided(
        array[offset:], shape=size, strides=[s * array.itemsize for s in stride],
        writeable=False)
    return np.ascontiguousarray(view)
