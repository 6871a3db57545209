"""Ctrl-C and SIGTERM end a command-line run the same way, within seconds.

Python runs a signal handler only when the main thread is back in Python. A compiled
training step (an implicit solver's Newton iterations over a large graph, say) can keep
it inside XLA for minutes, and a batch system's SIGTERM was not handled at all (exit 143,
no message). `interrupts_like_ctrl_c` installs one handler for SIGINT and SIGTERM that
raises `KeyboardInterrupt`, the path that prints what is checkpointed and the resume
command; and a watchdog thread, woken through `signal.set_wakeup_fd` (written by the C
handler even while the main thread is stuck), that ends the process with the caller's
message when that handler has not run within `grace` seconds. Ending it then is as safe
as SIGKILL, which the checkpoints survive: each is written to a temporary folder and
renamed when complete. While a checkpoint or the final scores are written
(`swan_jax.runs.interrupts.held`) the signal waits for them, and so does the watchdog.

A signal that finds the main thread in JAX's own code is put off until it is back in
ours (the handler sends it again every `RESEND` seconds). JAX waits for an XLA
compilation, which runs in XLA's thread pool, in a wait that runs Python's signal
handlers: a `KeyboardInterrupt` raised there abandons the compilation, and JAX's exit
handler then destroyed the client while the compilation still ran (a segmentation fault
after the clean message, 6 runs of 8 interrupted during Peptides-func's first compile;
a few lines reproduce it: jit a function that takes seconds to compile, raise
`KeyboardInterrupt` in its first call, exit). A compilation longer than `grace` ends
through the watchdog, whose `os._exit` runs no such teardown.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator

from swan_jax.runs import interrupts

HANDLED = (signal.SIGINT, signal.SIGTERM)
# In a submitit job SLURM's preemption sends SIGTERM, then the requeue signal: submitit
# ignores SIGTERM so that its requeue handler can checkpoint and resubmit the job, and a
# handler of ours there raced it (a preempted job failed instead of requeueing).
SUBMITIT_JOB = "SUBMITIT_EXECUTOR"  # set in the environment of a submitit job
RESEND = 0.1  # seconds between the tries of a signal put off inside JAX
DEFERRED_IN = ("jax", "jaxlib")  # top-level packages whose code a signal waits out


def handled_signals() -> tuple[int, ...]:
    """What `interrupts_like_ctrl_c` handles: SIGINT, and SIGTERM outside a submitit job."""
    return (signal.SIGINT,) if os.environ.get(SUBMITIT_JOB) else HANDLED


class _State:
    def __init__(self) -> None:
        self.signum: int | None = None
        self.handled = threading.Event()
        self.active = False  # inside `interrupts_like_ctrl_c`: a re-sent signal is ours
        self.resending = threading.Lock()  # held while one re-send is pending


_state = _State()


def exit_code() -> int:
    """128 + the signal that ended the run (130 for Ctrl-C, 143 for SIGTERM)."""
    return 128 + (_state.signum or signal.SIGINT)


def signal_name() -> str:
    """"Ctrl-C" or "SIGTERM": what ended the run (for its message)."""
    return "SIGTERM" if _state.signum == signal.SIGTERM else "Ctrl-C"


def inside_jax(frame) -> bool:
    """Whether the main thread is inside a call into JAX (compiling, dispatching, waiting
    for a result): any frame of its stack is JAX's, not only the innermost, which may be
    the standard library's (a `threading` wait) or a callback JAX runs. `frame` is the
    one a signal handler receives."""
    while frame is not None:
        if frame.f_globals.get("__name__", "").partition(".")[0] in DEFERRED_IN:
            return True
        frame = frame.f_back
    return False


def _resend(signum: int) -> None:
    try:
        if _state.active and not _state.handled.is_set():
            os.kill(os.getpid(), signum)
    finally:
        _state.resending.release()


def _handler(signum: int, frame) -> None:
    _state.signum = signum
    if inside_jax(frame):  # put off (module docstring); one re-send pending at a time
        if _state.resending.acquire(blocking=False):
            timer = threading.Timer(RESEND, _resend, (signum,))
            timer.daemon = True
            timer.start()
        return
    _state.handled.set()
    raise KeyboardInterrupt


def _watch(read_fd: int, grace: float, stuck_message: Callable[[], str],
           stop: threading.Event, handled: tuple[int, ...] = HANDLED) -> None:
    """Wait for a signal byte; give the main thread `grace` seconds to act on it."""
    while not stop.is_set():
        try:
            data = os.read(read_fd, 16)
        except OSError:
            return
        if not data or stop.is_set():
            return
        signum = next((b for b in data if b in handled), None)
        if signum is None:
            continue
        while not _state.handled.wait(grace) and not stop.is_set():
            if not interrupts.holding():
                break  # stuck: end it below
        # (inside `interrupts.held()` a checkpoint or the final scores are being written:
        # the signal is delivered when they are whole, so the watchdog waits for that)
        if _state.handled.is_set() or stop.is_set():
            return  # the main thread took it (or the run is over)
        _state.signum = signum
        with contextlib.suppress(Exception):
            sys.stderr.write(stuck_message() + "\n")
            sys.stderr.flush()
        os._exit(exit_code())


@contextlib.contextmanager
def interrupts_like_ctrl_c(stuck_message: Callable[[], str], *, grace: float = 5.0
                           ) -> Iterator[None]:
    """SIGINT and SIGTERM raise `KeyboardInterrupt` inside the block; if the main thread
    does not get to that within `grace` seconds, print `stuck_message()` and exit with
    128 + the signal. A no-op outside the main thread (signals go to the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _state.signum, _state.handled, _state.active = None, threading.Event(), True
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    handled = handled_signals()
    previous = {s: signal.signal(s, _handler) for s in handled}
    old_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(read_fd, grace, stuck_message, stop,
                                                    handled),
                               name="swan-interrupt-watchdog", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        _state.active = False
        signal.set_wakeup_fd(old_fd)
        for s, handler in previous.items():
            signal.signal(s, handler)
        os.write(write_fd, b"\0")  # wakes the watcher, which sees `stop`
        watcher.join(timeout=1.0)
        os.close(write_fd)
        if not watcher.is_alive():
            os.close(read_fd)
    if _state.signum is not None and not _state.handled.is_set():
        # a signal put off in JAX's code that the block outran: delivered as it leaves
        _state.handled.set()
        raise KeyboardInterrupt


@contextlib.contextmanager
def finishing(*, until_exit: bool = False) -> Iterator[None]:
    """SIGINT and SIGTERM ignored inside the block: the run is complete and written, so
    a signal while its table prints must not kill it with no word (exit -15). With
    `until_exit` (a command's own process) they stay ignored through the interpreter's
    exit, which tears JAX down for a second or more. A no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in HANDLED}
    try:
        yield
    finally:
        for s, handler in previous.items():
            if not until_exit:
                signal.signal(s, handler)
