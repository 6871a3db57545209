"""Downloading raw data files: temporary file beside the target, md5 check, atomic rename.

Downloads never go into the raw-data folder (`SWAN_DATA_DIR`, which may be read-only or
shared): they go into a separate, writable download folder, `default_download_dir()`
(env `SWAN_DOWNLOAD_DIR`, else `$XDG_CACHE_HOME/swan-jax`, else `~/.cache/swan-jax`),
which every loader also takes as `download_dir=`. A failed download (network error, md5
mismatch, interrupt) leaves nothing behind: no partial file and no folder it created.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from swan_jax.data.errors import VERIFY_MD5, ChecksumError, DownloadError, switch_hint

__all__ = ["ChecksumError", "DownloadError", "default_cache_dir", "default_data_dir",
           "default_download_dir", "fetch", "fetch_first", "md5_of"]


def default_data_dir() -> Path:
    """The raw-data folder, read only: env `SWAN_DATA_DIR`, else `data/`."""
    return Path(os.environ.get("SWAN_DATA_DIR") or "data")


def default_cache_dir() -> Path:
    """The processed-data cache: env `SWAN_CACHE_DIR`, else `cache/`."""
    return Path(os.environ.get("SWAN_CACHE_DIR") or "cache")


def default_download_dir() -> Path:
    """Env `SWAN_DOWNLOAD_DIR`, else `$XDG_CACHE_HOME/swan-jax`, else `~/.cache/swan-jax`."""
    if os.environ.get("SWAN_DOWNLOAD_DIR"):
        return Path(os.environ["SWAN_DOWNLOAD_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "swan-jax"


def md5_of(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """Hex md5 of the file at `path`, read in chunks."""
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(chunk_size), b""):
            h.update(chunk)
    return h.hexdigest()


def _make_folders(folder: Path) -> list[Path]:
    """Create `folder` and its missing parents; return those created, deepest first."""
    created = []
    current = folder.absolute()
    while not current.exists():
        created.append(current)
        current = current.parent
    for path in reversed(created):
        path.mkdir()
    return created


def _remove_empty(folders: list[Path]) -> None:
    for path in folders:  # deepest first
        try:
            path.rmdir()
        except OSError:
            return  # not empty (another process wrote there) or already gone


def fetch(url: str, dest: str | Path, md5: str | None = None, *, timeout: float = 60.0) -> Path:
    """Download `url` to `dest` and return `dest`.

    Streams into a temporary file in `dest`'s folder, checks its md5 against `md5` (when
    given), then renames it onto `dest`, so `dest` is either absent or complete. On any
    failure the temporary file and every folder this call created are removed. Raises
    ChecksumError on an md5 mismatch and DownloadError when the URL cannot be reached,
    both naming the URL and the path to put the file at by hand.
    """
    dest = Path(dest)
    manual = (f"If this machine cannot reach it, download {url} elsewhere and put it at "
              f"{dest.absolute()}" + (f" (md5 {md5})." if md5 else "."))
    created: list[Path] = []
    tmp = None
    try:
        try:
            created = _make_folders(dest.parent)
            fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.",
                                       suffix=".part")
        except OSError as err:
            raise DownloadError(f"cannot write into {dest.parent} ({err}). {manual}",
                                path=dest, url=url, reason=str(err)) from err
        with os.fdopen(fd, "wb") as out:
            _stream(url, out, timeout, dest, manual)
        if md5 is not None:
            got = md5_of(tmp)
            if got != md5:
                raise ChecksumError(
                    f"downloaded {url} has md5 {got}, expected {md5}; not saved to {dest}. "
                    "The server may have served another file (or an error page): retry, "
                    f"fetch it by hand, or {switch_hint(*VERIFY_MD5)} to accept it. {manual}",
                    path=dest, url=url, expected=md5, got=got)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 -> what open() would have made
        os.replace(tmp, dest)
        tmp = None
        created = []
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)
        _remove_empty(created)
    return dest


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _stream(url: str, out, timeout: float, dest: Path, manual: str) -> None:
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "swan-jax"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            shutil.copyfileobj(response, out, 1 << 20)
    except (urllib.error.URLError, OSError, ValueError) as err:
        if isinstance(err, urllib.error.HTTPError):
            reason = f"HTTP {err.code} {err.reason}"
        else:
            reason = str(getattr(err, "reason", err))
        raise DownloadError(f"could not download {url} ({reason}). {manual}",
                            path=dest, url=url, reason=reason) from err


def fetch_first(urls: Sequence[str], dest: str | Path, md5: str | None = None, *,
                timeout: float = 60.0) -> Path:
    """`fetch` from the first of `urls` (mirrors of one file) that succeeds.

    A mirror that fails (unreachable, or serving a file with another md5) is skipped; when
    all fail, the last error is raised with every mirror's failure in its message.
    """
    if not urls:
        raise ValueError("fetch_first needs at least one URL")
    failures = []
    for url in urls:
        try:
            return fetch(url, dest, md5, timeout=timeout)
        except (DownloadError, ChecksumError) as err:
            failures.append(err)
    if len(failures) == 1:
        raise failures[0]
    last = failures[-1]
    summary = "; ".join(f"{e.url}: {getattr(e, 'reason', None) or 'md5 ' + str(e.got)}"
                        for e in failures)
    if isinstance(last, ChecksumError):
        raise ChecksumError(f"no mirror served the expected file ({summary}). {last}",
                            path=dest, url=last.url, expected=md5, got=last.got) from last
    raise DownloadError(f"every mirror failed ({summary}). {last}", path=dest, url=last.url,
                        reason=last.reason) from last
