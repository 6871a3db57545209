"""Experiment trackers: each epoch's record written where common tools read it.

`TrainConfig.trackers` names them (`--tracker csv,tensorboard` on every experiment):

- "csv": `<program folder>/history.csv`, one row per epoch, for pandas, a spreadsheet or
  `column -s, -t`;
- "tensorboard": event files under `<program folder>/tensorboard/` (`tensorboardX`, the
  `tensorboard` extra: `pip install "swan-jax[tensorboard]"`), for `tensorboard --logdir`.

Both hold, per epoch, the mean over runs (runs whose value is finite) of the training
loss (`train_loss`), the validation and test metrics (`val`, `test`) and the learning
rate (`lr`), the epoch's `seconds`, and with several runs each run's own value
(`train_loss/run0`, ...; `run.json` maps a run index to its grid point and seed). The
epoch is the history's (`history.jsonl`): 0 for the first, the TensorBoard step too.

Resuming never duplicates an epoch: `history.csv` is rewritten from the restored history
(the epochs of the checkpoint), then appended; the TensorBoard writer starts with a purge
at the resume epoch, so TensorBoard drops the events written after that checkpoint.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import math
import secrets
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from swan_jax.runs.io import write_text_atomic

TRACKERS = ("csv", "tensorboard")
CSV_FILE = "history.csv"
TENSORBOARD_DIR = "tensorboard"
SERIES = ("train_loss", "val", "test", "lr")  # the per-run lists of a history record
INSTALL_TENSORBOARD = 'pip install "swan-jax[tensorboard]"'


def check_trackers(names: Sequence[str]) -> None:
    """Refuse unknown tracker names and a TensorBoard tracker without `tensorboardX`
    (before any compute: one line naming the install command)."""
    unknown = [n for n in names if n not in TRACKERS]
    if unknown:
        raise ValueError(f"unknown tracker {unknown[0]!r}; valid: {', '.join(TRACKERS)}")
    if "tensorboard" in names and importlib.util.find_spec("tensorboardX") is None:
        raise ValueError(f"the tensorboard tracker needs the tensorboardX package: "
                         f"{INSTALL_TENSORBOARD}")


def _mean(values: Sequence[float]) -> float:
    """The mean of the finite values (NaN when none is: every run diverged)."""
    finite = [float(v) for v in values if math.isfinite(float(v))]
    return sum(finite) / len(finite) if finite else math.nan


def scalars(record: Mapping[str, Any]) -> dict[str, float]:
    """A history record as named numbers: the means over runs, then each run's values
    when there are several (`train_loss/run1`), and `seconds`."""
    out: dict[str, float] = {}
    series = [key for key in SERIES if key in record]
    for key in series:
        out[key] = _mean(record[key])
    for key in series:
        if len(record[key]) > 1:
            out.update({f"{key}/run{r}": float(v) for r, v in enumerate(record[key])})
    out["seconds"] = float(record["seconds"])
    return out


class Tracker(Protocol):
    """Where the epochs go: `start` once (the restored history), `write` per epoch."""

    def start(self, history: Sequence[Mapping[str, Any]], start_epoch: int) -> None: ...

    def write(self, record: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


class CsvTracker:
    """`history.csv`: a header, then one row per epoch (rewritten on start)."""

    def __init__(self, folder: Path):
        self.path = folder / CSV_FILE
        self.columns: list[str] | None = None

    def _rows(self, records: Sequence[Mapping[str, Any]]) -> str:
        text = io.StringIO()
        writer = csv.DictWriter(text, self.columns or [], lineterminator="\n", restval="")
        for record in records:
            writer.writerow({"epoch": record["epoch"], **scalars(record)})
        return text.getvalue()

    def start(self, history: Sequence[Mapping[str, Any]], start_epoch: int) -> None:
        """The file holds exactly the restored epochs (those before `start_epoch`)."""
        kept = [r for r in history if r["epoch"] < start_epoch]
        self.columns = ["epoch", *scalars(kept[0])] if kept else None
        header = ",".join(self.columns) + "\n" if self.columns else ""
        write_text_atomic(self.path, header + (self._rows(kept) if kept else ""))

    def write(self, record: Mapping[str, Any]) -> None:
        header = ""
        if self.columns is None:  # a fresh file: its columns are the first epoch's
            self.columns = ["epoch", *scalars(record)]
            header = ",".join(self.columns) + "\n"
        with open(self.path, "a") as f:
            f.write(header + self._rows([record]))

    def close(self) -> None:
        pass


class TensorBoardTracker:
    """Scalars under `tensorboard/`, step = the epoch; flushed every epoch."""

    def __init__(self, folder: Path):
        self.path = folder / TENSORBOARD_DIR
        self.writer: Any = None  # a tensorboardX SummaryWriter once started

    def start(self, history: Sequence[Mapping[str, Any]], start_epoch: int) -> None:
        """Purge what a previous session wrote from `start_epoch` on; a folder new to a
        resumed program gets the restored epochs first."""
        from tensorboardX import SummaryWriter  # the optional extra, checked by the config

        new = not self.path.exists()
        # tensorboardX names a file by the second and the host: a suffix keeps a session
        # started within the same second from overwriting the previous one's file
        self.writer = SummaryWriter(logdir=str(self.path), purge_step=start_epoch,
                                    filename_suffix=f".{secrets.token_hex(4)}")
        for record in history if new else ():
            if record["epoch"] < start_epoch:
                self.write(record)

    def write(self, record: Mapping[str, Any]) -> None:
        for tag, value in scalars(record).items():
            self.writer.add_scalar(tag, value, global_step=int(record["epoch"]))
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class Trackers:
    """The trackers of one training call (none: every method a no-op)."""

    def __init__(self, names: Sequence[str] | None, folder: str | Path | None):
        names = tuple(names or ())
        check_trackers(names)
        if names and folder is None:
            raise ValueError(f"trackers ({', '.join(names)}) write into the program's "
                             f"folder: set checkpoint_dir")
        self.folder = None if folder is None else Path(folder)
        kinds: dict[str, Callable[[Path], Tracker]] = {"csv": CsvTracker,
                                                       "tensorboard": TensorBoardTracker}
        self.trackers: list[Tracker] = ([kinds[n](self.folder) for n in names]
                                        if self.folder is not None else [])  # none: no names

    def start(self, history: Sequence[Mapping[str, Any]], start_epoch: int) -> None:
        """Before the first epoch of this session: the restored history (none if fresh)."""
        if self.trackers and self.folder is not None:
            self.folder.mkdir(parents=True, exist_ok=True)
        for tracker in self.trackers:
            tracker.start(history, start_epoch)

    def epoch_done(self, record: Mapping[str, Any]) -> None:
        for tracker in self.trackers:
            tracker.write(record)

    def close(self) -> None:
        for tracker in self.trackers:
            tracker.close()
