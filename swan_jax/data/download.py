"""Downloading raw data files: temporary file beside the target, md5 check, atomic rename."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from pathlib import Path


class DownloadError(RuntimeError):
    """A raw file could not be fetched; the message says which file to put where."""


class ChecksumError(ValueError):
    """A file's md5 differs from the expected one."""


def md5_of(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """Hex md5 of the file at `path`, read in chunks."""
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(chunk_size), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(url: str, dest: str | Path, md5: str | None = None, *, timeout: float = 60.0) -> Path:
    """Download `url` to `dest` and return `dest`.

    Streams into a temporary file in `dest`'s folder, checks its md5 against `md5` (when
    given), then renames it onto `dest`, so `dest` is either absent or complete. Raises
    ChecksumError on an md5 mismatch (nothing left behind) and DownloadError when the URL
    cannot be reached, naming the URL and the path to put the file at by hand.
    """
    dest = Path(dest)
    manual = (f"If this machine cannot reach it, download {url} elsewhere and put it at "
              f"{dest.resolve()}" + (f" (md5 {md5})." if md5 else "."))
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    except OSError as err:
        raise DownloadError(f"cannot write into {dest.parent} ({err}). {manual}") from err
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                request = urllib.request.Request(url, headers={"User-Agent": "swan-jax"})
                with urllib.request.urlopen(request, timeout=timeout) as response:
                    shutil.copyfileobj(response, out, 1 << 20)
            except (urllib.error.URLError, OSError, ValueError) as err:
                if isinstance(err, urllib.error.HTTPError):
                    reason = f"HTTP {err.code} {err.reason}"
                else:
                    reason = getattr(err, "reason", err)
                raise DownloadError(f"could not download {url} ({reason}). {manual}") from err
        if md5 is not None:
            got = md5_of(tmp)
            if got != md5:
                raise ChecksumError(
                    f"downloaded {url} has md5 {got}, expected {md5}; not saved to {dest}. "
                    "The server may have served another file (or an error page): retry, or "
                    f"fetch it by hand. {manual}"
                )
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return dest
