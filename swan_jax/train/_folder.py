"""A program's folder: `run.json` (what ran), `history.jsonl` (one line per epoch) and the
epoch checkpoints (orbax, newest two kept).

`run.json` describes the program in full: the training configuration, its fingerprint,
the map from run index to (grid point, seed), and whatever the caller adds (a sweep adds
its experiment, configuration, cell and static point), so `load_run` can rebuild a
trained model without being told its settings. `history.jsonl` is appended after every
checkpoint and rewritten from the checkpoint on resume, so it never runs ahead of it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax

from swan_jax.models.formation import OLD, TRIANGLES_FORMAT, formation_changed
from swan_jax.runs.io import json_default, write_text_atomic
from swan_jax.settings import HINT, Hint, HintedError
from swan_jax.train._config import TrainConfig
from swan_jax.train._run_mesh import writes_files
from swan_jax.train._state import RunState

RUN_FILE = "run.json"
HISTORY_FILE = "history.jsonl"
# What a conflict with a folder's checkpoints suggests: continue them, or not resume.
CONTINUE = Hint("resume", True, "pass {switch} to continue")
DROP_RESUME = Hint("resume", True, "drop {switch}")


class CheckpointConflict(HintedError, ValueError):
    """A program folder's checkpoints conflict with the request: it holds some and
    `resume` is off, or they belong to another configuration. Its hint names `resume`."""


# The fingerprint's format, written with every checkpoint (`fingerprint_format` in its
# metadata). A change to what `fingerprint` hashes raises it and adds the older form to
# `accepted_fingerprints`, so that folders saved by older code still resume. Formats:
#   1: checkpoints carrying no number; they hashed `cfg.identity()`, and for a while that
#      identity held `shard_runs` (placement, since taken out of it): both forms resume.
#   2: `cfg.identity()`, placement out; the number written.
#   3: as 2, hashed alike, by code that forms Phi's and Psi's weights from the triangles
#      of V, Z (`swan_jax.models.formation.TRIANGLES_FORMAT`). A checkpoint of format 1
#      or 2 holds parameters that formed V - V^T, Z + Z^T from the full raw matrices: it
#      resumes only a program whose model reads them as before (no SWAN block, or adgn's
#      alone: `formation_changed` of the parameters `train`'s init built and the blocks
#      its module declares, `plain_phis`, read in the init's trace: a sweep's program or
#      any `train()` call's alike, nothing to pass); any other is refused in one line
#      (`restore`): its optimiser moments belong to the old parametrisation too.
FINGERPRINT_FORMAT = 3
NUMBERED_FORMAT = 2  # the first written with its number (hashed as today)
UNNUMBERED_FORMAT = 1  # what a checkpoint without `fingerprint_format` was written as


def fingerprint(cfg: TrainConfig, runs, extra: Mapping[str, Any] | None, *,
                also: Mapping[str, Any] | None = None) -> str:
    """What a checkpoint must match to be resumed: config, runs, and the caller's extra.

    `also`: fields hashed beside `cfg.identity()`, for the older forms of the identity
    (`accepted_fingerprints`)."""
    keep = {**cfg.identity(), **(also or {})}
    if cfg.data_parallel:  # the device count decides which graphs share a step
        keep["devices"] = jax.device_count()
    blob = json.dumps({"cfg": keep, "runs": runs, "extra": extra or {}}, sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def accepted_fingerprints(cfg: TrainConfig, runs, extra: Mapping[str, Any] | None
                          ) -> dict[int, tuple[str, ...]]:
    """Per fingerprint format, the fingerprints a checkpoint of that format may carry to
    resume this program; `FINGERPRINT_FORMAT`'s first is the one written."""
    now = fingerprint(cfg, runs, extra)
    return {FINGERPRINT_FORMAT: (now,), NUMBERED_FORMAT: (now,),
            UNNUMBERED_FORMAT: (now, fingerprint(cfg, runs, extra,
                                                 also={"shard_runs": cfg.shard_runs}))}


def _line(record: Mapping[str, Any], timing: Mapping[str, Any]) -> str:
    return json.dumps({**record, **timing}, default=json_default) + "\n"


class ProgramFolder:
    """The files of one program under `cfg.checkpoint_dir` (all no-ops without one)."""

    def __init__(self, cfg: TrainConfig, accepted: Mapping[int, Sequence[str]]):
        # `accepted_fingerprints`: a checkpoint resumes when its format lists its
        # fingerprint, and is then saved under today's format and fingerprint
        self.cfg, self.accepted = cfg, {k: tuple(v) for k, v in accepted.items()}
        self.fingerprint = self.accepted[FINGERPRINT_FORMAT][0]
        self.path = None if cfg.checkpoint_dir is None else Path(cfg.checkpoint_dir)
        # run.json and history.jsonl: process 0's (every process saves its checkpoint shards)
        self.writes = self.path is not None and writes_files()
        self.store = None
        if self.path is not None and cfg.save_checkpoints:
            from swan_jax.runs.checkpoint import CheckpointStore

            self.store = CheckpointStore(self.path)

    @property
    def saves(self) -> bool:
        return self.store is not None

    def latest_epoch(self) -> int | None:
        return None if self.store is None else self.store.latest_epoch()

    def check_fresh(self) -> None:
        """Refuse to start over a folder that already holds checkpoints."""
        if not self.cfg.resume and self.latest_epoch() is not None:
            raise CheckpointConflict(f"{self.path} already holds checkpoints: {HINT}, or "
                                     f"choose another directory", CONTINUE)

    def restore(self, state: RunState, phis: Sequence[bool]
                ) -> tuple[RunState, dict[str, Any]] | None:
        """The newest checkpoint's state and metadata, when resuming and there is one.

        `state`: the program's initial state; `phis`: its model's `plain_phis`. They
        decide whether a checkpoint of the old formation resumes (`FINGERPRINT_FORMAT`).
        """
        if not self.cfg.resume or self.store is None or self.latest_epoch() is None:
            return None
        device, meta = self.store.restore(state.device_part())
        written = meta.get("fingerprint_format", UNNUMBERED_FORMAT)
        if written not in self.accepted:
            raise CheckpointConflict(f"checkpoint in {self.path} has fingerprint format "
                                     f"{written!r}, which this swan-jax does not read (it "
                                     f"writes {FINGERPRINT_FORMAT}): resume it with the "
                                     f"swan-jax that wrote it, or {HINT}", DROP_RESUME)
        if meta["fingerprint"] not in self.accepted[written]:
            raise CheckpointConflict(f"checkpoint in {self.path} belongs to another "
                                     f"configuration (fingerprint {meta['fingerprint']} != "
                                     f"{self.fingerprint}); use a fresh directory or {HINT}",
                                     DROP_RESUME)
        if written < TRIANGLES_FORMAT and formation_changed(phis, state.params):
            raise CheckpointConflict(f"checkpoint in {self.path} was trained by {OLD}; "
                                     f"today's forms them from their triangles, so its "
                                     f"parameters are another model: finish it with the "
                                     f"swan-jax 0.1.0 that wrote it, or start it again in a fresh "
                                     f"directory or {HINT}", DROP_RESUME)
        return state.with_parts(device, meta), meta

    def describe(self, runs: Sequence[tuple[Mapping[str, Any], int]], num_params: int,
                 extra: Mapping[str, Any] | None) -> None:
        """Write `run.json`: the configuration, the run map and the caller's description."""
        if not self.writes or self.path is None:  # (a folder whenever it writes)
            return
        train = {**self.cfg.identity(), "epochs": self.cfg.epochs}
        payload = {"fingerprint": self.fingerprint, "train": train, "num_params": num_params,
                   "runs": [{"run": i, "hparams": dict(p), "seed": s}
                            for i, (p, s) in enumerate(runs)],
                   "description": dict(extra or {})}
        write_text_atomic(self.path / RUN_FILE,
                          json.dumps(payload, indent=2, default=json_default))

    def save(self, epoch: int, state: RunState, meta: dict[str, Any]) -> None:
        if self.store is not None:
            self.store.save(epoch, state.device_part(),
                            {**meta, **state.host_part(), "fingerprint": self.fingerprint,
                             "fingerprint_format": FINGERPRINT_FORMAT})

    def write_history(self, history: Sequence[Mapping[str, Any]],
                      timings: Sequence[Mapping[str, Any]]) -> None:
        """Rewrite `history.jsonl` from scratch (a fresh start, or a resume)."""
        if self.writes and self.path is not None:
            write_text_atomic(self.path / HISTORY_FILE,
                              "".join(_line(h, t) for h, t in zip(history, timings,
                                                                  strict=True)))

    def append_history(self, record: Mapping[str, Any], timing: Mapping[str, Any]) -> None:
        if self.writes and self.path is not None:
            with open(self.path / HISTORY_FILE, "a") as f:
                f.write(_line(record, timing))

    def close(self) -> None:
        if self.store is not None:
            self.store.close()


def read_history(path: str | Path) -> list[dict[str, Any]]:
    """The records of a `history.jsonl` (a program folder, or the file itself)."""
    path = Path(path)
    if path.is_dir():
        path = path / HISTORY_FILE
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def read_run_file(folder: str | Path, *, help_text: str) -> dict[str, Any]:
    """The `run.json` of a program folder; a folder without one is refused naming it,
    with `help_text` (where to point instead) in parentheses."""
    path = Path(folder) / RUN_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{folder} is not a program folder: it has no {RUN_FILE} "
                                f"({help_text})")
    return json.loads(path.read_text())
