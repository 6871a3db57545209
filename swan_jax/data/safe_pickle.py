"""Unpickling untrusted files that should only hold NumPy arrays.

`pickle.load` imports and calls whatever globals a file names, so a downloaded pickle can
run arbitrary code. `SafeUnpickler.find_class` admits only what NumPy arrays, NumPy
scalars and plain containers (dict, list, tuple, set) need, and refuses every other global
*before* importing or calling it, raising `UnsafePickleError` that names the file and the
refused global.
"""

from __future__ import annotations

import builtins
import collections
import io
import pickle
from pathlib import Path

import numpy as np

try:  # NumPy >= 2
    from numpy._core import multiarray as _multiarray
    from numpy._core import numeric as _numeric
except ImportError:  # pragma: no cover - NumPy 1.x
    from numpy.core import multiarray as _multiarray
    from numpy.core import numeric as _numeric


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle asked for a global outside the allow-list; it was neither imported nor run."""


def _latin1_encode(obj, encoding="utf-8", errors="strict"):
    # Protocol-2 pickles store bytes as `_codecs.encode(str, "latin1")`; admit just that.
    if encoding not in ("latin1", "latin-1", "iso-8859-1") or not isinstance(obj, str):
        raise UnsafePickleError(f"_codecs.encode with encoding {encoding!r} is not admitted")
    return obj.encode(encoding, errors)


_NUMPY = {
    "_reconstruct": _multiarray._reconstruct,
    "scalar": _multiarray.scalar,
    "_frombuffer": _numeric._frombuffer,
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


class SafeUnpickler(pickle.Unpickler):
    """`pickle.Unpickler` that resolves only the globals in `ALLOWED_GLOBALS`.

    `source` names the file in error messages.
    """

    def __init__(self, file, *, source: str = "<pickle>", **kwargs) -> None:
        super().__init__(file, **kwargs)
        self.source = source

    def find_class(self, module: str, name: str):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            pass
        hint = ""
        if module.split(".")[0] == "torch":
            hint = (" It holds PyTorch tensors: convert it where torch is installed, e.g. "
                    "replace each tensor t by t.numpy() and pickle.dump the result.")
        raise UnsafePickleError(
            f"{self.source}: refused to load the global {module}.{name}; only NumPy arrays, "
            f"NumPy scalars and plain containers are admitted (it was not imported or run)."
            + hint
        )

    def persistent_load(self, pid):
        raise UnsafePickleError(f"{self.source}: refused a persistent id ({type(pid).__name__}); "
                                "only NumPy arrays and plain containers are admitted")


def safe_loads(data: bytes, source: str = "<bytes>"):
    """Unpickle `data` with `SafeUnpickler`."""
    return _load(io.BytesIO(data), source)


def safe_load(path: str | Path):
    """Unpickle the file at `path` with `SafeUnpickler`.

    Raises UnsafePickleError for a refused global, and pickle.UnpicklingError naming the
    file when it is truncated or corrupt.
    """
    with open(path, "rb") as f:
        return _load(f, str(path))


def _load(f, source: str):
    try:
        return SafeUnpickler(f, source=source).load()
    except UnsafePickleError:
        raise
    except (EOFError, pickle.UnpicklingError, ValueError, TypeError, IndexError,
            KeyError, AttributeError) as err:
        raise pickle.UnpicklingError(
            f"{source}: truncated or corrupt pickle ({type(err).__name__}: {err})"
        ) from err
