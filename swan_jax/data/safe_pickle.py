"""Unpickling untrusted files that should only hold NumPy arrays (or torch tensors).

`pickle.load` imports and calls whatever globals a file names, so a downloaded pickle can
run arbitrary code. `SafeUnpickler.find_class` admits only what NumPy arrays, NumPy
scalars and plain containers (dict, list, tuple, set) need, and refuses every other global
*before* importing or calling it, raising `UnsafePickleError` that names the file and the
refused global.

With `allow_torch=True` (the default) it also reads plain CPU torch tensors written by
`pickle.dump` (LRGB's PascalVOC-SP files), without torch: exactly
`torch._utils._rebuild_tensor_v2` and `torch.storage._load_from_bytes` are mapped to the
NumPy builders of `torch_legacy` (the storage type names are admitted only inside a
storage's own record there); a tensor comes back as a NumPy array. Any other torch global
is refused like every other.
"""

from __future__ import annotations

import builtins
import collections
import functools
import io
import pickle
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from swan_jax.data import torch_legacy
from swan_jax.data.errors import CorruptPickleError, DataError, UnsafePickleError

try:  # NumPy >= 2
    from numpy._core import multiarray as _multiarray
    from numpy._core import numeric as _numeric
except ImportError:  # pragma: no cover - NumPy 1.x (the checker sees the NumPy 2 names)
    from numpy.core import multiarray as _multiarray  # type: ignore[no-redef]
    from numpy.core import numeric as _numeric  # type: ignore[no-redef]


__all__ = ["ALLOWED_GLOBALS", "TORCH_GLOBALS", "SafeUnpickler", "UnsafePickleError",
           "safe_load", "safe_load_file", "safe_loads"]


def _latin1_encode(obj, encoding="utf-8", errors="strict"):
    # Protocol-2 pickles store bytes as `_codecs.encode(str, "latin1")`; admit just that.
    if encoding not in ("latin1", "latin-1", "iso-8859-1") or not isinstance(obj, str):
        raise UnsafePickleError(f"_codecs.encode with encoding {encoding!r} is not admitted")
    return obj.encode(encoding, errors)


_NUMPY = {
    "_reconstruct": _multiarray._reconstruct,
    "scalar": _multiarray.scalar,
    "_frombuffer": _numeric._frombuffer,  # type: ignore[attr-defined]  # private: no stub
}
_ALLOWED: dict[tuple[str, str], object] = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("_codecs", "encode"): _latin1_encode,
}
for _module in ("numpy.core.multiarray", "numpy._core.multiarray"):
    for _name in ("_reconstruct", "scalar"):
        _ALLOWED[(_module, _name)] = _NUMPY[_name]
for _module in ("numpy.core.numeric", "numpy._core.numeric"):
    _ALLOWED[(_module, "_frombuffer")] = _NUMPY["_frombuffer"]
for _name in ("dict", "list", "tuple", "set", "frozenset", "int", "float", "complex", "bool",
              "str", "bytes", "bytearray", "slice"):
    _ALLOWED[("builtins", _name)] = getattr(builtins, _name)

ALLOWED_GLOBALS = frozenset(_ALLOWED)
# Mapped to NumPy builders (bound to the file's name for error messages).
_TORCH: dict[tuple[str, str], Callable[..., Any]] = {
    ("torch._utils", "_rebuild_tensor_v2"): torch_legacy.rebuild_tensor_v2,
    ("torch.storage", "_load_from_bytes"): torch_legacy.load_from_bytes,
}
TORCH_GLOBALS = frozenset(_TORCH)


class SafeUnpickler(pickle.Unpickler):
    """`pickle.Unpickler` that resolves only the globals in `ALLOWED_GLOBALS`.

    `source` names the file in error messages; `allow_torch` admits `TORCH_GLOBALS`.
    """

    def __init__(self, file, *, source: str = "<pickle>", allow_torch: bool = True,
                 **kwargs) -> None:
        super().__init__(file, **kwargs)
        self.source = source
        self.allow_torch = allow_torch

    def find_class(self, module: str, name: str):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            pass
        if self.allow_torch and (module, name) in _TORCH:
            return functools.partial(_TORCH[(module, name)], source=self.source)
        hint = ""
        if module.split(".")[0] == "torch":
            hint = (" Of PyTorch, only plain CPU tensors written by pickle.dump are read "
                    "(torch._utils._rebuild_tensor_v2 over torch.storage._load_from_bytes)"
                    + ("" if self.allow_torch else ", and only with allow_torch=True") + ".")
        raise UnsafePickleError(
            f"{self.source}: refused to load the global {module}.{name}; only NumPy arrays, "
            f"NumPy scalars, plain containers and torch tensors are admitted (it was not "
            f"imported or run)." + hint, path=self.source, global_name=f"{module}.{name}")

    def persistent_load(self, pid):
        raise UnsafePickleError(f"{self.source}: refused a persistent id ({type(pid).__name__}); "
                                "only NumPy arrays and plain containers are admitted",
                                path=self.source)


def safe_loads(data: bytes, source: str = "<bytes>", *, allow_torch: bool = True):
    """Unpickle `data` with `SafeUnpickler`."""
    return safe_load_file(io.BytesIO(data), source, allow_torch=allow_torch)


def safe_load(path: str | Path, *, allow_torch: bool = True):
    """Unpickle the file at `path` with `SafeUnpickler`.

    Raises UnsafePickleError for a refused global; CorruptPickleError (a
    `pickle.UnpicklingError` and a `DataFormatError`) naming the file when it is truncated
    or corrupt, torch storages included.
    """
    with open(path, "rb") as f:
        return safe_load_file(f, str(path), allow_torch=allow_torch)


def safe_load_file(f, source: str, *, allow_torch: bool = True):
    """Unpickle the open binary file `f` (named `source` in errors) with `SafeUnpickler`."""
    try:
        return SafeUnpickler(f, source=source, allow_torch=allow_torch).load()
    except DataError:
        raise
    except (EOFError, pickle.UnpicklingError, ValueError, TypeError, IndexError,
            KeyError, AttributeError, struct.error, MemoryError) as err:
        raise CorruptPickleError(
            f"{source}: truncated or corrupt pickle ({type(err).__name__}: {err})",
            path=source) from err
