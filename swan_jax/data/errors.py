"""Errors of the data layer, with the facts a command line needs to print one clear line.

Every error here derives from `DataError`, so a command line can catch them all in one
`except DataError`. Each carries structured attributes besides its message:

* `path`: the file concerned (str), or None;
* `switch`: the API keyword that changes the behaviour, as a user would pass it (e.g.
  `"verify_md5=False"`), or None;
* `flag`: the command-line flag that sets that keyword (e.g. `"--no-verify-md5"`), or None.

Messages name both, as "pass verify_md5=False (CLI: --no-verify-md5)", so they are
accurate for API and CLI users alike; a command line may also rebuild its own message from
the attributes.
"""

from __future__ import annotations

import dataclasses
import pickle

# The behaviour switches of the loaders and the CLI flags that set them.
VERIFY_MD5 = ("verify_md5=False", "--no-verify-md5")
SKIP_BAD_ROWS = ("skip_bad_rows=True", "--skip-bad-rows")
NO_DOWNLOAD = ("download=False", "--no-download")


def switch_hint(switch: str, flag: str | None) -> str:
    """'pass verify_md5=False (CLI: --no-verify-md5)'."""
    return f"pass {switch}" + (f" (CLI: {flag})" if flag else "")


class DataError(Exception):
    """Base of every data-layer error; see the module docstring for its attributes."""

    def __init__(self, message: str, *, path=None, switch: str | None = None,
                 flag: str | None = None) -> None:
        super().__init__(message)
        self.path = None if path is None else str(path)
        self.switch = switch
        self.flag = flag


class DataFormatError(DataError, ValueError):
    """A raw file is malformed: the message names the file and, where it is one, the row.

    Extra attributes: `row` (0-based data row), `line` (1-based line of the file),
    `identifier` (the row's own identifier), `item` (e.g. "graph 3"), each or None.
    """

    def __init__(self, message: str, *, path=None, row: int | None = None,
                 line: int | None = None, identifier: str | None = None,
                 item: str | None = None, switch: str | None = None,
                 flag: str | None = None) -> None:
        super().__init__(message, path=path, switch=switch, flag=flag)
        self.row, self.line, self.identifier, self.item = row, line, identifier, item


class CorruptPickleError(DataFormatError, pickle.UnpicklingError):
    """A pickle is truncated or corrupt (also a `pickle.UnpicklingError`)."""


class UnsafePickleError(DataError, pickle.UnpicklingError):
    """A pickle asked for a global outside the allow-list; it was neither imported nor run.

    Extra attribute: `global_name` ("module.name" of the refused global), or None.
    """

    def __init__(self, message: str, *, path=None, global_name: str | None = None) -> None:
        super().__init__(message, path=path)
        self.global_name = global_name


class ChecksumError(DataError, ValueError):
    """A file's md5 differs from the expected one.

    Extra attributes: `url` (where it came from, or None), `expected`, `got` (hex md5).
    `switch` / `flag` are `verify_md5=False` / `--no-verify-md5`.
    """

    def __init__(self, message: str, *, path=None, url: str | None = None,
                 expected: str | None = None, got: str | None = None) -> None:
        super().__init__(message, path=path, switch=VERIFY_MD5[0], flag=VERIFY_MD5[1])
        self.url, self.expected, self.got = url, expected, got


class DownloadError(DataError, RuntimeError):
    """A raw file could not be fetched; the message says which file to put where.

    Extra attributes: `url`, `reason` (why it failed); `path` is where it should go.
    """

    def __init__(self, message: str, *, path=None, url: str | None = None,
                 reason: str | None = None) -> None:
        super().__init__(message, path=path)
        self.url, self.reason = url, reason


@dataclasses.dataclass(frozen=True)
class MissingFile:
    """A raw file that is not on disk, where it was looked for and how to get it.

    Attributes:
      dataset: the data set's name (e.g. "peptides-struct").
      file: the file's path relative to a data folder (e.g. "peptides-structural/x.csv.gz").
      looked_in: absolute paths that were checked, in order.
      url: its official URL, or None.
      md5: its official md5, or None when none is published.
      download_to: where a download would put it (None when it is never downloaded).
      reason: why it is missing ("not found", or a failed download's message).
    """

    dataset: str
    file: str
    looked_in: tuple[str, ...]
    url: str | None
    md5: str | None
    download_to: str | None
    reason: str = "not found"

    @property
    def downloadable(self) -> bool:
        return self.url is not None and self.download_to is not None

    def how_to_get(self) -> str:
        md5 = f" (md5 {self.md5})" if self.md5 else ""
        if self.url is None:
            return f"put it at {self.looked_in[0]}"
        if self.downloadable:
            return (f"it is downloaded from {self.url}{md5} to {self.download_to} where a "
                    f"network allows; otherwise download it elsewhere and put it at "
                    f"{self.looked_in[0]}")
        return f"download {self.url}{md5} and put it at {self.looked_in[0]}"

    def __str__(self) -> str:
        return f"{self.dataset}: {self.file} ({self.reason}; looked in " \
               f"{', '.join(self.looked_in)}): {self.how_to_get()}"


class MissingDataError(DataError, FileNotFoundError):
    """Raw files are missing (and were not, or could not be, downloaded).

    Extra attribute: `missing`, a list of `MissingFile`; `path` is the first one's first
    place looked in.
    """

    def __init__(self, missing: list[MissingFile], *, downloads_off: bool = False) -> None:
        message = f"missing raw file(s): {'; '.join(str(m) for m in missing)}"
        if downloads_off and any(m.downloadable for m in missing):
            message += (f" (downloads are off: {NO_DOWNLOAD[0]} / {NO_DOWNLOAD[1]}; without "
                        "them the loader fetches such files)")
        super().__init__(message, path=missing[0].looked_in[0] if missing else None,
                         switch=NO_DOWNLOAD[0] if downloads_off else None,
                         flag=NO_DOWNLOAD[1] if downloads_off else None)
        self.missing = list(missing)
