"""One run per output folder: an OS-level lock on each results and checkpoint folder.

Two runs writing one results folder log every epoch twice and drop each other's records
from `results.json`. `folder_lock` takes `fcntl.flock` on `<folder>/.swan-lock`; the kernel
releases it when the process ends in any way (an exception, Ctrl-C, SIGTERM, SIGKILL),
so a crashed run never blocks the next one. The lock file names the holder (pid and
command), which is what a refused second run prints. flock is advisory and per open file:
a lock taken twice in one process conflicts too, as it should for two sweeps.

Kept hand-written (about 60 lines) rather than `filelock`: that library waits or times
out, and it does not say who holds the lock, which is the one line the user needs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

LOCK_NAME = ".swan-lock"


class FolderInUse(RuntimeError):
    """Another live process holds the folder's lock (one line: who, and what to do)."""


def holder_line() -> str:
    """`pid <n>: <command line>` of this process (what a lock file holds)."""
    return f"pid {os.getpid()}: {shlex.join([sys.executable, *sys.argv])}"


def _created_parts(folder: Path) -> list[Path]:
    """The folders `mkdir(parents=True)` would create, deepest first."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    return missing


@contextlib.contextmanager
def folder_lock(folder: str | Path, *, flag: str) -> Iterator[Path]:
    """Hold the lock of `folder` (created if needed) for the `with` block.

    Raises `FolderInUse` at once when another run holds it. On leaving, the lock file is
    removed, and so are the folders this call created if they are still empty: a run
    refused after taking the lock leaves the tree as it found it.
    """
    folder = Path(folder).absolute()
    created = _created_parts(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    fd = _acquire(path, flag, created)
    try:
        try:
            os.ftruncate(fd, 0)
            os.write(fd, (holder_line() + "\n").encode())
        except OSError as err:  # a full disk: name the file, as every other write does
            raise OSError(err.errno, err.strerror, str(path)) from None
        yield folder
    finally:
        with contextlib.suppress(OSError):
            path.unlink()  # while still held: a waiting run then finds a new inode
        os.close(fd)  # releases the flock
        for part in created:
            with contextlib.suppress(OSError):
                part.rmdir()  # only if empty


def _acquire(path: Path, flag: str, created: list[Path]) -> int:
    """An fd of `path` holding its exclusive flock; the file we lock is the one at `path`."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = _read_holder(path)
            raise FolderInUse(
                f"{flag} {path.parent} is in use by another run ({holder}); wait for it to "
                f"finish or stop it, or choose another {flag}") from None
        # The holder may have removed the file between our open and our flock: retry on
        # the file now at `path`, else two runs would hold locks on different inodes.
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def _read_holder(path: Path) -> str:
    try:
        text = path.read_text().strip()
    except OSError:
        text = ""
    return text or "pid unknown"


@contextlib.contextmanager
def lock_outputs(cfg) -> Iterator[None]:
    """Lock a sweep's results folder and its checkpoint folder (both: another run may name
    this run's checkpoint folder, inside its results folder, as its own)."""
    with folder_lock(cfg.results_dir, flag="--results-dir"), \
            folder_lock(cfg.checkpoint_root(), flag="--checkpoint-dir"):
        yield
