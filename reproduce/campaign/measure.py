"""Campaign cells that are measurements, not sweeps: the runtime table and the Jacobian
figure.

A measurement cell's `experiment` is a key of `MEASUREMENTS` (the `reproduce` module that
measures) and its `config` that module's settings. Its result is a run of its own,
written straight into `reproductions/<experiment>-<device kind>/` (results.json,
collected.json, a figure), which RESULTS.md shows with its device; so the cell is done
on a device kind when that folder holds a run at the cell's configuration (a run on
another device, or a reduced one by hand, leaves it to do). It runs whole in one call,
so it starts only when its cost on this device kind fits the time left; the Jacobian
cell's training stops after a checkpoint when the budget ends (`Deadline`) and resumes
from the work folder on the next call on the same machine.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from reproduce.campaign.plan import Entry

MEASUREMENTS = ("runtime", "jacobian")
AUTHORS_MODEL = Path(".gpu_ref/swan.py")  # the authors' models/swan.py (gpu_inputs.py)
IGNORED_KEYS = ("ref",)  # settings that do not change what a run measures


def is_measurement(entry: Entry) -> bool:
    return entry.experiment in MEASUREMENTS


def folder(entry: Entry, reproductions: Path, device_kind: str) -> Path:
    return reproductions / f"{entry.experiment}-{device_kind}"


def is_done(entry: Entry, reproductions: Path, device_kind: str) -> bool:
    """Whether this device kind's run of the measurement is at the cell's configuration."""
    path = folder(entry, reproductions, device_kind) / "results.json"
    if not path.exists():
        return False
    results = json.loads(path.read_text())
    config = results.get("config") or {}
    return results.get("experiment") == entry.experiment and all(
        config.get(k) == v for k, v in entry.config.items() if k not in IGNORED_KEYS)


def _measure(entry: Entry, work: Path, deadline) -> dict[str, Any]:
    """The measurement's results record (raises ValueError for a bad configuration)."""
    config = dict(entry.config)
    if entry.experiment == "runtime":
        from reproduce import runtime

        missing = runtime.peptides_missing()
        if missing:  # the runtime table is never timed on stand-in graphs
            raise ValueError(f"plan cell {entry.id}: {missing}")
        ref = Path(config.get("ref") or AUTHORS_MODEL)
        return runtime.results(int(config.get("epochs", 3)), bool(config.get("quick")),
                               ref if ref.is_file() else None)
    import dataclasses

    from reproduce import jacobian

    known = {f.name for f in dataclasses.fields(jacobian.Setting)}
    unknown = sorted(set(config) - known - set(IGNORED_KEYS))
    if unknown:
        raise ValueError(f"plan cell {entry.id}: config {', '.join(unknown)} is not a "
                         f"setting of reproduce.jacobian ({', '.join(sorted(known))})")
    setting = jacobian.Setting(**{k: v for k, v in config.items() if k in known})
    problem = setting.problem()
    if problem:
        raise ValueError(f"plan cell {entry.id}: config {problem[0]} {problem[1]}")
    deadline.start_program(0.0)  # its epochs are timed from here
    return jacobian.measure(setting, work, on_epoch_end=deadline.on_epoch_end)


def _write(entry: Entry, record: dict[str, Any], out: Path, device_kind: str) -> None:
    source = f"python -m reproduce.campaign --cells {entry.id} (on {device_kind})"
    if entry.experiment == "jacobian":
        from reproduce import jacobian

        jacobian.write(out, record, source)
    else:
        from reproduce.runtime import write_run

        write_run(out, record, source)


def run_measurement(entry: Entry, opts, deadline, state: dict[str, Any]) -> list[str]:
    """Measure `entry` when its cost fits the time left; its run into `reproductions/`
    and its state entry; returns the lines to print."""
    from swan_jax.train import TrainingInterrupted

    cost, left = entry.cost(opts.device_kind), deadline.left() / 60
    if cost > left:
        return [f"{entry.id}: not started: a measurement runs whole ({cost:g} min on "
                f"{opts.device_kind}, {left:.1f} min left)"]
    print(f"campaign: {entry.id} on {opts.device_kind} (a measurement, about {cost:g} min)",
          flush=True)
    started = time.monotonic()
    info = state["cells"].setdefault(entry.id, {})
    try:
        record = _measure(entry, opts.work / entry.slug, deadline)
    except TrainingInterrupted:
        info.update(status="under way", updated=_now())
        return [f"{entry.id}: unfinished (stopped after a checkpoint in "
                f"{opts.work / entry.slug}; the next call on this machine continues)"]
    if opts.note:
        record["note"] = opts.note
    out = folder(entry, opts.reproductions, opts.device_kind)
    _write(entry, record, out, opts.device_kind)
    seconds = info.get("seconds", {})
    seconds[opts.device_kind] = seconds.get(opts.device_kind, 0.0) + (
        time.monotonic() - started)
    info.update(status="finished", programs="1 of 1", fraction=1.0, seconds=seconds,
                updated=_now())
    return [f"{entry.id}: finished in {(time.monotonic() - started) / 60:.1f} min, "
            f"written to {out}"]


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
