"""Work that a Ctrl-C or SIGTERM must not cut in half: held, then delivered.

A checkpoint is written in several steps (orbax writes a temporary folder, renames it,
then deletes the checkpoint that falls out of `max_to_keep`; `history.jsonl` is appended
after it), and the final scores of a run are read once training is over. An interrupt
raised in the middle of either left a temporary folder that the save on the way out
could not replace ("Directory not empty", reported as a full disk) or was swallowed by
a callback ("Exception ignored in ..."). Inside `held()` a SIGINT or SIGTERM whose
handler is Python's (Python's default `KeyboardInterrupt` for Ctrl-C, the command
line's `experiments.signals` handler, the campaign's) is recorded instead; when the block
ends, the handler runs with the first signal held, so the interrupt arrives between two
whole steps. Signals that are ignored or left to the operating system are not touched
(a SIGTERM without a handler still ends the process, as SIGKILL would: the checkpoint
folders survive that by orbax's rename).

`holding()` tells a watchdog that ends a stuck process (`experiments.signals`) to wait.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

HELD = (signal.SIGINT, signal.SIGTERM)
_depth = 0  # nested `held()` blocks of the main thread (a save inside the final scoring)


def holding() -> bool:
    """Whether the main thread is inside `held()` now."""
    return _depth > 0


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Run the block with SIGINT and SIGTERM held; deliver the first one after it.

    The held signal is delivered (its handler run) when the block ends normally; when the
    block raises, its own error ends the run and the signal is dropped. A no-op outside the
    main thread, where Python never runs signal handlers.
    """
    global _depth
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)

    previous: dict[int, Callable[[int, FrameType | None], Any]] = {}
    for sig in HELD:
        handler = signal.getsignal(sig)
        if callable(handler):  # Python's: hold it; SIG_IGN / SIG_DFL stay as they are
            signal.signal(sig, hold)
            previous[sig] = handler
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        for held_sig, held_handler in previous.items():
            signal.signal(held_sig, held_handler)
    if caught:
        previous[caught[0]](caught[0], None)
