"""`python -m reproduce.campaign run --executor slurm`: the plan's cells as SLURM jobs.

One call (`run_on_slurm`) chooses the cells a local run would (`loop.select`: runnable,
not collected, matching `--cells`, within `--max-cell-minutes`), restores their bundles
into the work folder, and submits each cell as one job of one job array
(`swan_jax.experiments.cluster.run_jobs`). A job trains its cell to the end
(`runner.run_cell` with no budget) under the lock of the cell's work folder, so a second
job on the same cell stops at once (`FolderInUse`) and two jobs never write one cell. A
job that SLURM preempts or times out is requeued by submitit's checkpointing hook and
resumes from the cell's newest checkpoints. When every job has ended, the finished cells
are collected into `reproductions/` exactly as a local run collects them (`loop`'s
`_finish_cell`), unfinished ones bundled, `state.json` written and RESULTS.md rendered.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from reproduce.campaign import bundle, gather, loop
from reproduce.campaign.plan import Entry, load_plan
from reproduce.campaign.runner import CellOutcome, Deadline, run_cell
from swan_jax.experiments.cluster import SlurmOptions, run_jobs


def cell_job(entry: Entry, work: Path, overrides: dict[str, Any],
             max_epochs: int | None) -> CellOutcome:
    """A job's work: the cell until done, under its work folder's lock."""
    from swan_jax.experiments.locks import folder_lock

    with folder_lock(work, flag="the campaign cell's work folder"):
        return run_cell(entry, work, Deadline(math.inf, margin=0.0, max_epochs=max_epochs),
                        **overrides)


def run_on_slurm(opts: loop.Options, slurm: SlurmOptions) -> list[str]:
    """Submit the chosen cells, wait for their jobs, collect as a local run does."""
    entries = loop.resolved(load_plan(opts.plan), opts)
    lines = loop._said(loop._restore_bundles(opts, entries))
    state = loop.read_state(opts)
    runs = gather._runs(opts.reproductions)
    done = {e.id for e in entries if e.runnable and gather.is_done(e, opts.reproductions, runs)}
    chosen = [e for e in loop.select(entries, opts, done)
              if opts.max_cell_minutes is None
              or loop.remaining_minutes(e, opts, state) <= opts.max_cell_minutes]
    for entry in chosen:
        if opts.bundle_path(entry).exists():
            bundle.restore_bundle(opts.bundle_path(entry), opts.work / entry.slug)
    calls = [(entry.id, cell_job, (entry, opts.work / entry.slug, dict(opts.overrides),
                                   opts.max_epochs)) for entry in chosen]
    lines += loop._said([f"campaign: {len(calls)} cell(s) to submit as SLURM jobs"])
    try:
        for entry, (_, outcome) in zip(chosen, run_jobs(slurm, calls), strict=True):
            lines += loop._said(_collect(entry, outcome, opts, state))
    finally:
        loop._save_state(opts, state, [e.id for e in chosen])
    return lines + loop._said(loop.closing(opts, entries))


def _collect(entry: Entry, outcome: Any, opts: loop.Options, state: dict[str, Any]
             ) -> list[str]:
    """A job's outcome into the state, and its cell collected (or bundled)."""
    work = opts.work / entry.slug
    if isinstance(outcome, BaseException):
        last = (str(outcome).strip().splitlines() or [""])[-1]
        line = f"{entry.id}: failed: {type(outcome).__name__}: {last}"
        state["cells"].setdefault(entry.id, {})["status"] = line.split(": ", 1)[1]
        return [line]
    loop._record(state, entry, outcome, opts, work, loop._epoch_cap(entry, opts))
    lines = [f"{entry.id}: {'finished' if outcome.finished else 'unfinished'} as a SLURM "
             f"job ({outcome.programs_done} of {outcome.programs} program(s), "
             f"{outcome.epochs} epoch(s) in {outcome.seconds / 60:.1f} min)"]
    return lines + loop._finish_cell(entry, outcome, opts, work)
