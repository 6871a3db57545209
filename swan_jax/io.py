"""Files a run writes: atomic JSON and text, and checks that an output folder is usable.

Every results file is written to a temporary sibling and renamed into place, so a run cut
short never leaves half a file. `check_output_dir` is what every experiment calls on its
output folders before the first training step: a path that is a file, or a folder that
cannot be created or written, is refused with one line naming the flag.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np


def json_default(value: Any):
    """JSON for NumPy scalars / arrays (as lists) and anything else (as its `str`)."""
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    return str(value)


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write `text` via a temporary file and a rename (creates the parent folder)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def save_json_atomic(path: str | Path, payload: Any, overwrite: bool = False) -> None:
    """Write JSON via a temporary file and a rename; refuse to replace unless `overwrite`."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; pass --overwrite to replace it")
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
