"""A plan's time estimate from recorded paces: what `--dry-run` prints.

The reproduction campaign records, per program it trained, the device kind, the runs,
the first epoch's seconds (compile included) and the median seconds per later epoch
(`reproductions/campaign/costs.json` of a clone; absent from an installed wheel). A
planned program with a recorded pace on this kind of device (a CPU: a `cpu-*` entry; an
accelerator: any other) is estimated as

    first_epoch_seconds + (epochs - 1) * seconds_per_epoch * runs / recorded_runs

(an epoch's cost grows about linearly with the vmapped runs), an upper bound where early
stopping ends a run sooner. Programs without a recorded pace are counted, not guessed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

COSTS_FILE = Path(__file__).resolve().parents[2] / "reproductions" / "campaign" / "costs.json"


def recorded_paces(path: Path = COSTS_FILE) -> list[dict[str, Any]]:
    """The recorded programs (none when the file is absent or unreadable)."""
    try:
        programs = json.loads(Path(path).read_text())["programs"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [p for p in programs if isinstance(p, dict)] if isinstance(programs, list) else []


def _this_device() -> str:
    import jax

    return jax.devices()[0].platform


def _matches(entry: Mapping[str, Any], platform: str) -> bool:
    on_cpu = str(entry.get("device", "")).startswith("cpu")
    return on_cpu == (platform == "cpu")


def estimate_line(experiment: str, programs: Sequence[Any], runs_per_program: Sequence[int],
                  epochs: int, *, path: Path = COSTS_FILE, platform: str | None = None
                  ) -> str:
    """One line: the estimate of the programs with a recorded pace, where it comes from
    and how many have none; or that none is recorded. `programs`: objects with a `name`
    (a sweep's `Program`), `runs_per_program` their runs (grid points x seeds)."""
    platform = platform or _this_device()
    newest: dict[str, dict[str, Any]] = {}
    for entry in recorded_paces(path):
        if entry.get("experiment") == experiment and _matches(entry, platform):
            newest[str(entry.get("program"))] = entry  # the file is in recording order
    seconds, known, devices = 0.0, 0, set()
    for program, runs in zip(programs, runs_per_program, strict=True):
        found = newest.get(program.name)
        if found is None or not found.get("seconds_per_epoch"):
            continue
        entry = found
        scale = runs / max(int(entry.get("runs") or runs), 1)
        seconds += (float(entry.get("first_epoch_seconds") or 0.0)
                    + (epochs - 1) * float(entry["seconds_per_epoch"]) * scale)
        known += 1
        devices.add(str(entry.get("device")))
    where = path.relative_to(path.parents[2]) if len(path.parents) > 2 else path
    if not known:
        return (f"# estimate: no pace is recorded for these programs on a {platform} device "
                f"({where}); a run prints its own after each program's second epoch")
    from swan_jax.train import duration

    rest = len(programs) - known
    return (f"# estimate: at most {duration(seconds)} for {known} of {len(programs)} "
            f"program(s) at the paces the campaign measured on {', '.join(sorted(devices))} "
            f"({where}; scaled to this plan's runs and epochs, less with early stopping)"
            + (f"; no pace recorded for the other {rest}" if rest else ""))
