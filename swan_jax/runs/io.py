"""Files a run writes: atomic JSON and text, and checks that an output folder is usable.

Every results file is written to a temporary sibling and renamed into place, so a run cut
short never leaves half a file. `check_output_dir` is what every experiment calls on its
output folders before the first training step: a path that is a file, or a folder that
cannot be created or written, is refused with one line naming the flag. The errors of a
write name the setting that helps (`resume`, `overwrite`) as a `settings.Hint`; a
command line spells it as its flag.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from swan_jax.settings import HINT, Hint, HintedError

# What the errors of a write suggest: run again resuming; replace the file.
RESUME = Hint("resume", True)
OVERWRITE = Hint("overwrite", True, "pass {switch} to replace it")


def json_default(value: Any):
    """JSON for NumPy scalars / arrays (as lists) and anything else (as its `str`)."""
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    return str(value)


# The OS error code inside the text of wrapped errors (orbax / tensorstore: "... No space
# left on device [os_error_code='28']").
_OS_CODE = re.compile(r"os_error_code='?(\d+)")


def failure_reason(err: BaseException) -> str:
    """A short reason for a failed write or read: the OS's words when there is an OS error
    inside (`No space left on device`), else the error's first line (at most 160 chars)."""
    code = getattr(err, "errno", None)
    match = _OS_CODE.search(str(err))
    if code is None and match:
        code = int(match.group(1))
    if isinstance(code, int) and code > 0:
        return os.strerror(code)
    lines = str(err).strip().splitlines()
    first = lines[0] if lines else ""
    text = f"{type(err).__name__}: {first}" if first else type(err).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write `text` via a temporary file and a rename (creates the parent folder).

    Raises `OutputWriteError` (one line naming the file) when the write fails, e.g. on a
    full disk; the file at `path` is then as it was, and no temporary file is left.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text)
        tmp.replace(path)
    except OSError as err:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise OutputWriteError(f"could not write {path} ({failure_reason(err)}): free space "
                               f"there or choose another folder, then run the same command "
                               f"again with {HINT}", RESUME) from None


def save_json_atomic(path: str | Path, payload: Any, overwrite: bool = False) -> None:
    """Write JSON via a temporary file and a rename; refuse to replace unless `overwrite`."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise OutputExists(f"{path} exists; {HINT}", OVERWRITE)
    write_text_atomic(path, json.dumps(payload, indent=2, default=json_default))


def check_output_dir(path: str | Path, flag: str) -> None:
    """Raise `OutputPathError` unless `path` is a writable folder or could be created.

    Nothing is created: the first existing ancestor must be a writable folder, and no
    existing part of the path may be a file.
    """
    path = Path(path).absolute()
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        where = "is a file" if probe == path else f"cannot be created: {probe} is a file"
        raise OutputPathError(f"{flag} {path} {where}, not a folder; choose another path")
    if not os.access(probe, os.W_OK | os.X_OK):
        what = "is not writable" if probe == path else f"cannot be created: {probe} is not writable"
        raise OutputPathError(f"{flag} {path} {what}; choose another path")


class OutputPathError(ValueError):
    """An output folder (results, checkpoints, cache) is a file or cannot be written."""


class OutputWriteError(HintedError, RuntimeError):
    """A file a run writes could not be written (a full disk, a quota, an I/O error); the
    message is one line naming the file and what to do (its hint: `resume=True`)."""


class OutputExists(HintedError, FileExistsError):
    """A results file exists and may not be replaced (its hint: `overwrite=True`)."""
