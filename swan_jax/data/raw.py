"""Raw files of a data set: where they are looked for, their md5, their download, and the
message when one is missing -- the one helper every loader uses (`lrgb`,
`node_classification`).

A `RawFile` is a path under a data folder (`data/peptides-functional/x.csv.gz`), its
official URL(s) and md5. It is looked for in the read-only data folder (its path, then its
`alternatives`), then in the writable download folder; a missing one is downloaded into
the download folder when it is `downloadable` and downloads are on, else reported as a
`MissingFile` that says where it was looked for and how to get it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

from swan_jax.data.download import (
    default_data_dir,
    default_download_dir,
    fetch_first,
    md5_of,
)
from swan_jax.data.errors import (
    HINT,
    ChecksumError,
    DataError,
    MissingDataError,
    MissingFile,
)


@dataclasses.dataclass(frozen=True)
class RawFile:
    """A raw file: its path under a data folder, official URL(s) and md5 (if known).

    Attributes:
      path: where it sits under a data folder (and under the download folder).
      url: its official URL, tried first, then `mirrors`; None when there is none.
      md5: its official md5, or None when none is published.
      mirrors: other URLs of the same file.
      alternatives: other paths under the data folder holding the same file (as other
        tools lay it out).
      downloadable: whether a loader fetches it (False: the user fetches it by hand,
        `note` says how).
      note: how to get it by hand, for the missing-file message.
    """

    path: str
    url: str | None
    md5: str | None
    mirrors: tuple[str, ...] = ()
    alternatives: tuple[str, ...] = ()
    downloadable: bool = True
    note: str = ""

    @property
    def urls(self) -> tuple[str, ...]:
        return (() if self.url is None else (self.url,)) + self.mirrors

    def candidates(self, data_dir: Path, download_dir: Path) -> list[Path]:
        """Where it is looked for, in order: the data folder, then the download folder."""
        return ([data_dir / self.path] + [data_dir / alt for alt in self.alternatives]
                + [download_dir / self.path])

    def find(self, data_dir: Path, download_dir: Path) -> Path | None:
        return next((p for p in self.candidates(data_dir, download_dir) if p.is_file()), None)

    def missing(self, dataset: str, data_dir: Path, download_dir: Path, *,
                reason: str = "not found", also_looked: Iterable[str] = ()) -> MissingFile:
        """The `MissingFile` report (`also_looked`: further places, listed second)."""
        looked = [str(p.absolute()) for p in self.candidates(data_dir, download_dir)]
        looked[1:1] = list(also_looked)
        fetches = self.downloadable and self.url is not None
        if not fetches and self.note:
            reason = f"{reason}; {self.note}"
        return MissingFile(dataset, self.path, tuple(looked), self.url,
                           self.md5 if fetches else None,
                           str((download_dir / self.path).absolute()) if fetches else None,
                           reason)


def folders(data_dir, download_dir) -> tuple[Path, Path]:
    """`(data_dir, download_dir)` as paths, each defaulting as `swan_jax.data.download`."""
    return (Path(data_dir) if data_dir is not None else default_data_dir(),
            Path(download_dir) if download_dir is not None else default_download_dir())


_MD5_MEMO: dict[tuple[str, int, int], str] = {}


def cached_md5(path: Path) -> str:
    """md5 of `path`, remembered per (path, size, mtime) within the process."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _MD5_MEMO:
        _MD5_MEMO[key] = md5_of(path)
    return _MD5_MEMO[key]


def download(raw: RawFile, download_dir: Path, *, verify_md5: bool) -> Path:
    """Fetch `raw` into the download folder (its mirrors in turn); md5-checked when known."""
    dest = download_dir / raw.path
    print(f"Downloading {raw.url} -> {dest}", flush=True)
    return fetch_first(raw.urls, dest, raw.md5 if verify_md5 else None)


def check_md5(raw: RawFile, path: Path, download_dir: Path, *, verify_md5: bool) -> str:
    """`path`'s md5; ChecksumError (one line) when it is not the official one."""
    got = cached_md5(path)
    if verify_md5 and raw.md5 is not None and got != raw.md5:
        fix = ("delete it to download it again" if path.is_relative_to(download_dir)
               else "replace it with the official file")
        raise ChecksumError(
            f"{path} has md5 {got}, expected {raw.md5} (the official release): {fix}, or "
            f"{HINT}.",
            path=path, url=raw.url, expected=raw.md5, got=got)
    return got


def locate(dataset: str, raw: RawFile, data_dir: Path, download_dir: Path, *,
           verify_md5: bool, download_missing: bool) -> tuple[Path, str]:
    """The raw file's local path (downloaded if missing and allowed) and its md5.

    Raises MissingDataError (where it was looked for, how to get it) or ChecksumError.
    """
    path = raw.find(data_dir, download_dir)
    if path is None:
        if not (download_missing and raw.downloadable and raw.url is not None):
            raise MissingDataError([raw.missing(dataset, data_dir, download_dir)],
                                   downloads_off=not download_missing)
        path = download(raw, download_dir, verify_md5=verify_md5)
    return path, check_md5(raw, path, download_dir, verify_md5=verify_md5)


def fetch_missing(missing: Iterable[tuple[RawFile, MissingFile]], download_dir: Path, *,
                  download_missing: bool, verify_md5: bool) -> list[MissingFile]:
    """Download each missing file that can be; return those still missing.

    A failed download is not raised: its `MissingFile.reason` holds the error's message.
    """
    still = []
    for raw, report in missing:
        if not (download_missing and report.downloadable):
            still.append(report)
            continue
        try:
            download(raw, download_dir, verify_md5=verify_md5)
        except DataError as err:
            reason = getattr(err, "reason", None) or str(err)  # the cause, not the advice
            still.append(dataclasses.replace(report, reason=f"download failed: {reason}"))
    return still
