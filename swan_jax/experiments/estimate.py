"""A plan's time estimate from recorded paces: what `--dry-run` prints.

Every results file records, per program it trained, the device, the runs, the first
epoch's seconds (compile included) and the seconds per later epoch. The estimate reads
the results folder of the run itself (programs of an earlier, other-sized run of it) and,
in a clone of the repository, the collected runs under `reproductions/` (absent from an
installed wheel). A planned program with a recorded pace on this kind of device (CPU or
accelerator) is estimated as

    first_epoch_seconds + (epochs - 1) * seconds_per_epoch * runs / recorded_runs

(an epoch's cost grows about linearly with the vmapped runs), an upper bound where early
stopping ends a run sooner. Programs without a recorded pace are counted, not guessed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

REPRODUCTIONS = Path(__file__).resolve().parents[2] / "reproductions"


def recorded_paces(files: Iterable[Path], experiment: str) -> list[dict[str, Any]]:
    """The timed program records of `experiment` in these results files (unreadable or
    other experiments' files are skipped), in the files' order."""
    paces = []
    for path in files:
        try:
            run = json.loads(Path(path).read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(run, dict) or run.get("experiment") != experiment:
            continue
        for record in run.get("records") or []:
            if isinstance(record, dict) and record.get("seconds_per_epoch"):
                paces.append({**record, "source": str(path)})
    return paces


def results_files(results_dir: Path, reproductions: Path = REPRODUCTIONS) -> list[Path]:
    """The collected runs first, then this run's own folder (the newest word last)."""
    return [*sorted(reproductions.glob("*/results.json")), Path(results_dir) / "results.json"]


def _device(record: dict[str, Any]) -> str:
    machine = record.get("machine") or {}
    return str(machine.get("device_kind") or machine.get("device") or "?")


def _this_platform() -> str:
    import jax

    return jax.devices()[0].platform


def estimate_line(experiment: str, programs: Sequence[Any], runs_per_program: Sequence[int],
                  epochs: int, *, files: Iterable[Path], platform: str | None = None
                  ) -> str:
    """One line: the estimate of the programs with a recorded pace, on which devices,
    and how many have none; or that none is recorded. `programs`: objects with a `name`
    (a sweep's `Program`), `runs_per_program` their runs (grid points x seeds)."""
    on_cpu = (platform or _this_platform()) == "cpu"
    newest = {str(r.get("name")): r for r in recorded_paces(files, experiment)
              if (_device(r).lower() == "cpu") == on_cpu}
    seconds, known, devices = 0.0, 0, set()
    for program, runs in zip(programs, runs_per_program, strict=True):
        record = newest.get(program.name)
        if record is None:
            continue
        scale = runs / max(len(record.get("runs") or []) or runs, 1)
        seconds += (float(record.get("first_epoch_seconds") or 0.0)
                    + (epochs - 1) * float(record["seconds_per_epoch"]) * scale)
        known += 1
        devices.add(_device(record))
    kind = "a CPU" if on_cpu else "an accelerator"
    if not known:
        return (f"# estimate: no pace is recorded for these programs on {kind}; a run "
                f"prints its own from its first timed steps")
    from swan_jax.train import duration

    rest = len(programs) - known
    return (f"# estimate: at most {duration(seconds)} for {known} of {len(programs)} "
            f"program(s), at the paces recorded on {', '.join(sorted(devices))} (results "
            f"files of earlier runs; scaled to this plan's runs and epochs, less with early "
            f"stopping)" + (f"; no pace recorded for the other {rest}" if rest else ""))
