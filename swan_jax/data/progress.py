"""Progress of a long featurisation (Peptides' 15k molecules: minutes on a CPU).

A tqdm bar where someone watches it (a terminal of a usable width, or a notebook); else
(a redirected log, a batch job, a terminal that reports no width) a plain line at most
every `every` seconds and at the end, so that a log holds no carriage returns and a
0-column terminal does not stay silent for minutes.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")
MIN_COLUMNS = 20  # narrower than this, a bar shows nothing useful


def watched() -> bool:
    """stderr is a terminal of at least `MIN_COLUMNS` columns, or a Jupyter kernel."""
    if "ipykernel" in sys.modules:
        return True
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty()) and shutil.get_terminal_size().columns >= MIN_COLUMNS


def progress(items: Sequence[T], *, desc: str, unit: str, enabled: bool = True,
             every: float = 30.0) -> Iterator[T]:
    """Iterate `items`, showing how far (nothing when not `enabled`)."""
    if not enabled:
        yield from items
        return
    if watched():
        from tqdm.auto import tqdm

        yield from tqdm(items, desc=desc, unit=unit, mininterval=1.0)
        return
    total, last, said = len(items), time.monotonic(), 0
    for i, item in enumerate(items):
        yield item
        if time.monotonic() - last >= every or i + 1 == total:
            last, said = time.monotonic(), i + 1
            print(f"{desc}: {said} of {total} {unit}(s)", file=sys.stderr, flush=True)
