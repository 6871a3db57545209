"""Downloading raw data files with pooch: md5 check, retries, progress bar, atomic rename.

Downloads never go into the raw-data folder (`SWAN_DATA_DIR`, which may be read-only or
shared): they go into a separate, writable download folder, `default_download_dir()`
(env `SWAN_DOWNLOAD_DIR`, else the user cache folder `pooch.os_cache("swan-jax")`:
`$XDG_CACHE_HOME/swan-jax` or `~/.cache/swan-jax` on Linux), which every loader also takes
as `download_dir=`. Processed data sets are cached beside them, in `default_cache_dir()`
(env `SWAN_CACHE_DIR`, else `<user cache>/swan-jax/processed`).

`fetch` hands the transfer to pooch (`pooch.HTTPDownloader`: streaming into a temporary
file beside the target, the md5 check before the rename, `retries` further attempts with a
growing pause, a tqdm progress bar on a terminal), and keeps this package's guarantees
around it: a failed download (network error, md5 mismatch, interrupt) leaves nothing
behind, no partial file and no folder it created, and raises one `DownloadError` /
`ChecksumError` line naming the URL and where to put the file by hand.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

import pooch

from swan_jax.data.errors import HINT, ChecksumError, DownloadError

__all__ = ["ChecksumError", "DownloadError", "default_cache_dir", "default_data_dir",
           "default_download_dir", "default_retries", "fetch", "fetch_first", "md5_of",
           "user_cache_dir"]

PROJECT = "swan-jax"


def default_data_dir() -> Path:
    """The raw-data folder, read only: env `SWAN_DATA_DIR`, else `data/`."""
    return Path(os.environ.get("SWAN_DATA_DIR") or "data")


def user_cache_dir() -> Path:
    """This user's cache folder for swan-jax (`pooch.os_cache`, platformdirs' rules)."""
    return Path(pooch.os_cache(PROJECT))


def default_download_dir() -> Path:
    """Env `SWAN_DOWNLOAD_DIR`, else `user_cache_dir()` (`~/.cache/swan-jax` on Linux)."""
    if os.environ.get("SWAN_DOWNLOAD_DIR"):
        return Path(os.environ["SWAN_DOWNLOAD_DIR"])
    return user_cache_dir()


def default_cache_dir(cache_dir: str | Path | None = None) -> Path:
    """The processed-data cache: `cache_dir` when given, else env `SWAN_CACHE_DIR`, else
    `user_cache_dir() / "processed"` (beside the downloads)."""
    if cache_dir is not None:
        return Path(cache_dir)
    if os.environ.get("SWAN_CACHE_DIR"):
        return Path(os.environ["SWAN_CACHE_DIR"])
    return user_cache_dir() / "processed"


def default_retries() -> int:
    """Further attempts after a failed download: env `SWAN_DOWNLOAD_RETRIES`, else 2."""
    value = os.environ.get("SWAN_DOWNLOAD_RETRIES", "2")
    if not value.isdigit():
        raise ValueError(f"SWAN_DOWNLOAD_RETRIES must be a whole number >= 0, got {value!r}")
    return int(value)


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


def fetch(url: str, dest: str | Path, md5: str | None = None, *, timeout: float = 60.0,
          retries: int | None = None, progress: bool | None = None) -> Path:
    """Download `url` to `dest` through pooch and return `dest`.

    `md5` (when given) is checked before the file is renamed onto `dest`, so `dest` is
    either absent or complete; `retries` (default `default_retries()`) further attempts
    follow a network error or an md5 mismatch; `progress` (default: stderr is a terminal)
    shows pooch's tqdm bar. On failure every folder this call created is removed. Raises
    ChecksumError on an md5 mismatch and DownloadError when the URL cannot be reached,
    both naming the URL and the path to put the file at by hand.
    """
    dest = Path(dest)
    manual = (f"If this machine cannot reach it, download {url} elsewhere and put it at "
              f"{dest.absolute()}" + (f" (md5 {md5})." if md5 else "."))
    created: list[Path] = []
    try:
        try:
            created = _make_folders(dest.parent)
            if not os.access(dest.parent, os.W_OK):
                raise PermissionError(f"[Errno 13] Permission denied: '{dest.parent}'")
        except OSError as err:
            raise DownloadError(f"cannot write into {dest.parent} ({err}). {manual}",
                                path=dest, url=url, reason=str(err)) from err
        _retrieve(url, dest, md5, timeout=timeout,
                  retries=default_retries() if retries is None else retries,
                  progress=sys.stderr.isatty() if progress is None else progress,
                  manual=manual)
        os.chmod(dest, 0o666 & ~_umask())  # pooch's temporary file is 0600
        created = []
    finally:
        _remove_empty(created)
    return dest


def _retrieve(url: str, dest: Path, md5: str | None, *, timeout: float, retries: int,
              progress: bool, manual: str) -> None:
    """One pooch registry entry for `dest`, fetched; pooch's errors as ours."""
    import requests.exceptions

    registry = pooch.create(path=dest.parent, base_url="", registry={dest.name: (
        f"md5:{md5}" if md5 else None)}, urls={dest.name: url}, retry_if_failed=retries)
    downloader = pooch.HTTPDownloader(progressbar=progress, timeout=timeout,
                                      headers={"User-Agent": PROJECT})
    logger = pooch.get_logger()  # our loaders print their own "Downloading" line
    level = logger.level
    logger.setLevel("WARNING")
    try:
        registry.fetch(dest.name, downloader=downloader)
    except ValueError as err:  # pooch: "... expected <md5> but got <md5> ..."
        found = re.search(r"but got (\w+)", str(err))
        got = found.group(1) if found else "unknown"
        raise ChecksumError(
            f"downloaded {url} has md5 {got}, expected {md5}; not saved to {dest}. "
            "The server may have served another file (or an error page): retry, "
            f"fetch it by hand, or {HINT}. {manual}",
            path=dest, url=url, expected=md5, got=got) from None
    except (requests.exceptions.RequestException, OSError) as err:
        reason = _reason(err, url)
        raise DownloadError(f"could not download {url} ({reason}). {manual}",
                            path=dest, url=url, reason=reason) from err
    finally:
        logger.setLevel(level)


def _reason(err: Exception, url: str = "") -> str:
    """A short reason: `HTTP 404 Not Found`, `cannot resolve zenodo.org (no network?)`,
    or the error's own words (urllib3's are a paragraph: its cause is what a user needs)."""
    response = getattr(err, "response", None)
    if response is not None and getattr(response, "status_code", None):
        return f"HTTP {response.status_code} {response.reason}"
    text, host = str(err) or type(err).__name__, urllib.parse.urlsplit(url).hostname
    if any(words in text for words in ("Failed to resolve", "Name or service not known",
                                       "failure in name resolution")):
        return f"cannot resolve {host} (no network?)"
    if "timed out" in text.lower() or "Timeout" in type(err).__name__:
        return f"{host} did not answer in time"
    if "Connection refused" in text:
        return f"{host} refused the connection"
    return text


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fetch_first(urls: Sequence[str], dest: str | Path, md5: str | None = None, *,
                timeout: float = 60.0, retries: int | None = None,
                progress: bool | None = None) -> Path:
    """`fetch` from the first of `urls` (mirrors of one file) that succeeds.

    A mirror that fails (unreachable, or serving a file with another md5) is skipped; when
    all fail, the last error is raised with every mirror's failure in its message.
    """
    if not urls:
        raise ValueError("fetch_first needs at least one URL")
    failures = []
    for url in urls:
        try:
            return fetch(url, dest, md5, timeout=timeout, retries=retries, progress=progress)
        except (DownloadError, ChecksumError) as err:
            failures.append(err)
    if len(failures) == 1:
        raise failures[0]
    last = failures[-1]
    summary = "; ".join(
        f"{e.url}: {getattr(e, 'reason', None) or 'md5 ' + str(getattr(e, 'got', None))}"
        for e in failures)
    if isinstance(last, ChecksumError):
        # `template`: the last error's words with its hint still a placeholder
        raise ChecksumError(f"no mirror served the expected file ({summary}). "
                            f"{last.template}",
                            path=dest, url=last.url, expected=md5, got=last.got) from last
    raise DownloadError(f"every mirror failed ({summary}). {last.template}", path=dest,
                        url=last.url, reason=f"every mirror failed ({summary})") from last
