"""Errors of the data layer, with the facts a command line needs to print one clear line.

Every error here derives from `DataError`, so a command line can catch them all in one
`except DataError`. Each carries structured attributes besides its message:

* `path`: the file concerned (str), or None;
* `hint`: a `Hint`, what to change about it: a loader setting, the value that helps and
  the sentence around it (e.g. `Hint("skip_bad_rows", True, "pass {switch} to skip such
  rows")`), or None; `switch` is its keyword as an API user passes it
  (`"skip_bad_rows=True"`).

The library names settings, never command-line flags: `str(err)` spells the hint's
switch as a keyword (`skip_bad_rows=True`); a command line renders the same error with
`err.render(spell)`, `spell(setting, value)` giving its flag (`--skip-bad-rows`).
"""

from __future__ import annotations

import dataclasses
import pickle

# `Hint` and its spelling are the settings layer's (any library error may carry one);
# re-exported here, where the data errors' users import them.
from swan_jax.settings import HINT, Hint, HintedError, Spelling, keyword  # noqa: F401

# The behaviour switches of the loaders, with what each one does.
VERIFY_MD5 = Hint("verify_md5", False, "pass {switch} to use a file of your own")
SKIP_BAD_ROWS = Hint("skip_bad_rows", True, "pass {switch} to skip such rows")
NO_DOWNLOAD = Hint("download", False, "put the file there by hand; {switch} never downloads")
DOWNLOADS_OFF = Hint("download", False, "downloads are off: {switch}; without them the "
                                        "loader fetches such files")


class DataError(HintedError):
    """Base of every data-layer error; see the module docstring for its attributes.

    `message` may hold `HINT` (`"{hint}"`) where the hint's sentence goes; without it, a
    hint follows the message in parentheses (`settings.HintedError`).
    """

    def __init__(self, message: str, *, path=None, hint: Hint | None = None) -> None:
        self.path = None if path is None else str(path)
        super().__init__(message, hint)

    @property
    def hint(self) -> Hint | None:
        return self.hints[0] if self.hints else None

    @property
    def switch(self) -> str | None:
        """The hint's keyword as an API user passes it (`"verify_md5=False"`), or None."""
        return None if self.hint is None else self.hint.switch


class DataFormatError(DataError, ValueError):
    """A raw file is malformed: the message names the file and, where it is one, the row.

    Extra attributes: `row` (0-based data row), `line` (1-based line of the file),
    `identifier` (the row's own identifier), `item` (e.g. "graph 3"), each or None.
    """

    def __init__(self, message: str, *, path=None, row: int | None = None,
                 line: int | None = None, identifier: str | None = None,
                 item: str | None = None, hint: Hint | None = None) -> None:
        super().__init__(message, path=path, hint=hint)
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
    Its hint is `VERIFY_MD5` (`verify_md5=False`).
    """

    def __init__(self, message: str, *, path=None, url: str | None = None,
                 expected: str | None = None, got: str | None = None) -> None:
        super().__init__(message, path=path, hint=VERIFY_MD5)
        self.url, self.expected, self.got = url, expected, got


class DownloadError(DataError, RuntimeError):
    """A raw file could not be fetched; the message says which file to put where.

    Extra attributes: `url`, `reason` (why it failed); `path` is where it should go. Its
    hint is `NO_DOWNLOAD` (put the file there, and turn downloads off).
    """

    def __init__(self, message: str, *, path=None, url: str | None = None,
                 reason: str | None = None) -> None:
        super().__init__(message, path=path, hint=NO_DOWNLOAD)
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
        """One place to put it: the first place looked in (the data folder); after a
        failed download, the place the download was to write (the "Downloading URL ->
        PATH" line named it: one folder in both lines)."""
        md5 = f" (md5 {self.md5})" if self.md5 else ""
        if self.url is None:
            return f"put it at {self.looked_in[0]}"
        tried = self.download_to is not None and self.reason.startswith("download failed")
        place = self.download_to if tried else self.looked_in[0]
        return f"download {self.url}{md5} and put it at {place}"

    def __str__(self) -> str:
        # Short: what, why, and one place; every place looked in is `looked_in`.
        return f"{self.dataset}: {self.file} ({self.reason}): {self.how_to_get()}"


class MissingDataError(DataError, FileNotFoundError):
    """Raw files are missing (and were not, or could not be, downloaded).

    Extra attribute: `missing`, a list of `MissingFile`; `path` is the first one's first
    place looked in.
    """

    def __init__(self, missing: list[MissingFile], *, downloads_off: bool = False) -> None:
        # The hint only where turning downloads on would fetch something.
        off = downloads_off and any(m.downloadable for m in missing)
        super().__init__(f"missing raw file(s): {'; '.join(str(m) for m in missing)}",
                         path=missing[0].looked_in[0] if missing else None,
                         hint=DOWNLOADS_OFF if off else None)
        self.missing = list(missing)


class MissingReport(str):
    """Why a cell's data is missing, as experiments' `missing_data` return it: the full
    text (the str itself: every file, why, and how to get it), a `short` line (per data
    set: how many files and why, the reason cut at its first parenthesis when long) and
    `details` (per file: how to get it), so that a sweep prints one short line per data
    set and the details once."""

    short: str
    details: tuple[str, ...]


def missing_report(missing: list[MissingFile]) -> MissingReport:
    """The `MissingReport` of some missing raw files."""
    report = MissingReport("missing raw file(s): " + "; ".join(str(m) for m in missing))
    by_dataset: dict[str, list[MissingFile]] = {}
    for m in missing:
        by_dataset.setdefault(m.dataset, []).append(m)
    parts = []
    for dataset, files in by_dataset.items():
        reason = files[0].reason
        reason = reason.split(" (")[0] if len(reason) > 60 else reason
        parts.append(f"{dataset}: {len(files)} raw file(s) missing, {reason}")
    report.short = "; ".join(parts)
    report.details = tuple(f"{m.dataset}: {m.file}: {m.how_to_get()}" for m in missing)
    return report
