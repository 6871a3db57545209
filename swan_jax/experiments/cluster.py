"""Cells as cluster jobs: `--executor slurm` submits each cell of a sweep through submitit.

    swan-transfer --all --executor slurm --slurm-config cluster.toml [--partition gpu
        --gpus 1 --time-minutes 240 --array-size 8]

with, in `cluster.toml` (flags override it):

    [slurm]
    partition = "gpu"
    gpus = 1              # per job
    cpus = 8              # per job
    time_minutes = 240    # each job's limit; a job that reaches it is requeued
    array_size = 8        # jobs of the array running at once
    mem_gb = 64
    folder = "runs/slurm" # submitit's logs and pickles
    setup = ["module load cuda"]  # shell lines before each job

Each cell is one job of one job array (`executor.batch()`), training the cell's programs
into its own folder `<results-dir>/cells/<cell>/` under that folder's lock (a second job
on the same cell stops at once with `FolderInUse`: two jobs never write one cell). A job
that SLURM preempts or times out is requeued by submitit's checkpointing hook
(`Resumable.checkpoint`) and continues from the cell's newest checkpoints (every job
runs with `resume`). When every job has ended, the submitting command merges the cells'
records into `<results-dir>/results.json` and writes the table and figure as a local run
does. `--executor local` (the default) is the sweep in this process.

submitit is an optional extra: `pip install 'swan-jax[slurm]'`.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

EXECUTORS = ("local", "slurm")


class ClusterError(RuntimeError):
    """A cluster setting or submission that cannot work (one line)."""


@dataclasses.dataclass(frozen=True)
class SlurmOptions:
    """How each job is submitted (the `[slurm]` section; flags override it)."""

    partition: str | None = None
    gpus: int = 0
    cpus: int = 1
    time_minutes: int = 60
    array_size: int = 16
    mem_gb: float | None = None
    folder: str = "runs/slurm"
    setup: tuple[str, ...] = ()
    requeues: int = 3  # times a timed-out or preempted job is resubmitted
    cluster: str = "slurm"  # submitit's executor ("debug": in this process, for tests)


_FLAGS = {"partition": "--partition", "gpus": "--gpus", "time_minutes": "--time-minutes",
          "array_size": "--array-size"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--executor` and the SLURM options, on any command that runs cells."""
    group = parser.add_argument_group("cluster (--executor slurm)")
    group.add_argument("--executor", choices=EXECUTORS, default="local",
                       help="local: train here (default); slurm: one job per cell through "
                            "submitit, results collected here when the jobs end")
    group.add_argument("--slurm-config", type=Path, default=None,
                       help="a TOML file whose [slurm] section sets the options below "
                            "(and cpus, mem_gb, folder, setup, requeues)")
    group.add_argument("--partition", default=None, help="SLURM partition of the jobs")
    group.add_argument("--gpus", type=int, default=None, help="GPUs per job")
    group.add_argument("--time-minutes", type=int, default=None, help="each job's limit")
    group.add_argument("--array-size", type=int, default=None,
                       help="jobs of the array running at once")


def load_section(path: Path) -> dict[str, Any]:
    """The `[slurm]` table of a TOML file, its keys and types checked (one line)."""
    try:
        table = tomllib.loads(Path(path).read_text()).get("slurm")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ClusterError(f"--slurm-config {path}: {err}") from None
    if not isinstance(table, dict):
        raise ClusterError(f"--slurm-config {path}: no [slurm] section")
    fields = {f.name: f for f in dataclasses.fields(SlurmOptions)}
    unknown = sorted(set(table) - set(fields))
    if unknown:
        raise ClusterError(f"--slurm-config {path}: unknown key(s) {', '.join(unknown)} in "
                           f"[slurm]; valid: {', '.join(fields)}")
    return {k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}


def options_from(args: argparse.Namespace) -> SlurmOptions | None:
    """The SLURM options of a parsed command line; None with `--executor local`."""
    if args.executor == "local":
        if args.slurm_config is not None or any(
                getattr(args, k) is not None for k in _FLAGS):
            raise ClusterError("--slurm-config, --partition, --gpus, --time-minutes and "
                               "--array-size need --executor slurm")
        return None
    values = load_section(args.slurm_config) if args.slurm_config is not None else {}
    values.update({k: getattr(args, k) for k in _FLAGS if getattr(args, k) is not None})
    opts = SlurmOptions(**values)
    for name in ("gpus", "cpus", "time_minutes", "array_size", "requeues"):
        value = getattr(opts, name)
        if not isinstance(value, int) or value < (0 if name in ("gpus", "requeues") else 1):
            raise ClusterError(f"slurm option {name} must be a whole number >= "
                               f"{0 if name in ('gpus', 'requeues') else 1}, got {value!r}")
    return opts


def executor(opts: SlurmOptions):
    """A submitit executor with the job parameters of `opts`."""
    try:
        import submitit
    except ImportError:
        raise ClusterError("--executor slurm needs submitit: pip install 'swan-jax[slurm]'"
                           ) from None
    ex = submitit.AutoExecutor(folder=opts.folder, cluster=opts.cluster,
                               slurm_max_num_timeout=opts.requeues)
    params: dict[str, Any] = {"timeout_min": opts.time_minutes, "cpus_per_task": opts.cpus,
                              "slurm_array_parallelism": opts.array_size,
                              "slurm_setup": list(opts.setup)}
    if opts.gpus:
        params["gpus_per_node"] = opts.gpus
    if opts.partition:
        params["slurm_partition"] = opts.partition
    if opts.mem_gb is not None:
        params["mem_gb"] = opts.mem_gb
    if opts.cluster != "slurm":  # the debug and local executors know no slurm_* option
        params = {k: v for k, v in params.items() if not k.startswith("slurm_")}
    ex.update_parameters(**params)
    return ex


class Resumable:
    """A job's function that submitit requeues when SLURM preempts it or its time is up:
    `checkpoint` (submitit's hook) resubmits the same call, which resumes from the
    checkpoints the interrupted one saved (every 30 s by default)."""

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)

    def checkpoint(self, *args: Any):
        import submitit

        return submitit.helpers.DelayedSubmission(Resumable(self.fn), *args)


def run_jobs(opts: SlurmOptions, calls: Sequence[tuple[str, Callable[..., Any], tuple]]
             ) -> list[tuple[str, Any]]:
    """Submit every `(label, fn, args)` as one job of one array, wait for all of them, and
    return `(label, result)` in order (an exception where the job failed)."""
    if not calls:
        return []
    ex = executor(opts)
    with ex.batch():
        jobs = [ex.submit(Resumable(fn), *args) for _, fn, args in calls]
    for (label, _, _), job in zip(calls, jobs, strict=True):
        print(f"submitted {label}: job {job.job_id} (logs in {opts.folder})", flush=True)
    out = []
    for (label, _, _), job in zip(calls, jobs, strict=True):
        try:
            out.append((label, job.result()))
        except Exception as err:  # noqa: BLE001 - a job's failure is reported, not raised
            out.append((label, err))
    return out


def slug(text: str) -> str:
    """A folder name for a cell label."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_") or "cell"


# ============================================================== a sweep's cells as jobs


def cell_config(cfg, cell: dict[str, Any]):
    """A cell's own configuration: its own results folder (and checkpoints in it),
    always resumable."""
    folder = Path(cfg.results_dir) / "cells" / slug("-".join(str(v) for v in cell.values()))
    return dataclasses.replace(cfg, results_dir=folder, checkpoint_dir=None, resume=True,
                               overwrite=False, progress=False)


def train_cell(exp, cfg, cell: dict[str, Any]) -> list[dict[str, Any]]:
    """A job's work: the cell's programs not yet done, under its folders' lock; returns
    the records of the cell's results.json."""
    from swan_jax.experiments import sweep
    from swan_jax.experiments.locks import lock_outputs
    from swan_jax.experiments.records import ResultsFile

    sweep.check_outputs(cfg)
    with lock_outputs(cfg):
        results = ResultsFile(Path(cfg.results_dir) / "results.json", resume=True)
        data, overall = sweep._DataCache(exp, cfg), sweep._Overall(cfg, [])
        for program in exp.plan(cfg, [cell]):
            if not results.done(sweep.done_key(cfg, program)):
                results.add(sweep.run_program(exp, cfg, program, data, overall))
        return results.records


def run_sweep(exp, cfg, opts: SlurmOptions) -> int:
    """`--executor slurm` of an experiment's command: one job per cell with work left,
    then the cells' records merged into results.json and the outputs written here."""
    from swan_jax.experiments import sweep
    from swan_jax.experiments.locks import lock_outputs
    from swan_jax.experiments.records import ResultsFile

    sweep.check_outputs(cfg)
    with lock_outputs(cfg):  # the cells' jobs lock their own folders inside this one
        results = ResultsFile(Path(cfg.results_dir) / "results.json",
                              overwrite=cfg.overwrite, resume=cfg.resume)
        sweep.check_resume(cfg, results)  # other settings would replace its cells
        cells, skipped = sweep.available_cells(exp, cfg, exp.cells(cfg))
        todo = [c for c in cells if not all(results.done(sweep.done_key(cfg, p))
                                            for p in exp.plan(cfg, [c]))]
        print(f"{exp.label}: {len(cells)} cell(s), {len(todo)} to submit as SLURM jobs",
              flush=True)
        calls = [(" / ".join(map(str, c.values())), train_cell, (exp, cell_config(cfg, c), c))
                 for c in todo]
        failed = []
        for label, outcome in run_jobs(opts, calls):
            if isinstance(outcome, BaseException):
                last = (str(outcome).strip().splitlines() or [""])[-1]
                failed.append(f"{label}: {type(outcome).__name__}: {last}")
                continue
            for record in outcome:
                if not results.done({"program": record["program"], "epochs": record["epochs"]}):
                    results.add(record)
        sweep.write_outputs(exp, cfg, results, exp.plan(cfg, cells), skipped)
    print((Path(cfg.results_dir) / "table.md").read_text())
    for line in failed:
        print(f"job failed: {line}", file=sys.stderr)
    return 1 if failed else 0
