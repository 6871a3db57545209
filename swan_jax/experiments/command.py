"""The command line of every experiment: flags -> configuration -> sweep -> one clear line.

`parse_config(exp, argv)` resolves the configuration (packaged TOML, `--config FILE`,
then flags; every flag generated from the settings' declarations, `flags.py`);
`main(exp, argv)` runs the sweep and turns every failure a user can cause into one line
on stderr and a non-zero exit: a refused setting, from a flag or a TOML file alike
(exit 2, before anything runs); refused inputs (exit 1); data errors naming the flag
that changes the behaviour (exit 1); an adaptive solver out of steps (exit 1); runs
that diverged (exit 3, unless `--allow-diverged`); Ctrl-C with the command that resumes
(exit 130). Library errors carry the setting that fixes them; only this module turns a
setting into a flag.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import logging
import pickle
import shlex
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from swan_jax.config import VARIANTS
from swan_jax.experiments import cluster, flags, signals
from swan_jax.experiments.config import (
    SweepConfig,
    dump_toml,
    load_toml,
    script_name,
)
from swan_jax.experiments.hosts import RunsDoNotDivide, writes_files
from swan_jax.experiments.locks import FolderInUse
from swan_jax.experiments.sweep import ConfigT, Experiment, SweepRefused, SweepResult, run_sweep
from swan_jax.runs.checkpoint import CheckpointError
from swan_jax.runs.io import OutputPathError, OutputWriteError, failure_reason
from swan_jax.settings import HintedError, SettingError
from swan_jax.solvers import SolverError, SolverTooLarge, clear_errors
from swan_jax.train import (
    CheckpointConflict,
    ShapeMismatch,
    StepTooLarge,
    TrainingInterrupted,
)

EXIT_DIVERGED = 3  # the sweep finished, but a reported result comes from diverged runs


def build_parser(exp: Experiment) -> argparse.ArgumentParser:
    """Every setting of `exp.Config` as a flag, then the experiment's own shortcuts."""
    doc = (sys.modules[type(exp).__module__].__doc__ or exp.label).strip()
    prog = script_name(exp.name)
    p = argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0],
                                usage=f"{prog} [--config FILE] [options] (--help lists them)",
                                epilog="\n".join(doc.splitlines()[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", type=Path, default=None,
                   help="a TOML configuration (the resolved one of a run is written to "
                        "<results-dir>/config.toml); flags given here override it")
    p.add_argument("--dry-run", action="store_true",
                   help="print the resolved configuration (TOML) and the plan, then stop: "
                        "nothing is loaded, trained or written")
    skip = () if exp.max_params is not None else ("allow_more_params",)
    flags.add_settings(p, exp.Config, exp.default_config(), label=exp.label, skip=skip)
    exp.add_arguments(p)
    cluster.add_arguments(p)
    if "--variant" not in p._option_string_actions:  # a shortcut, where no setting is it
        p.add_argument("--variant", type=flags.names_parser("variant", VARIANTS),
                       default=None, help="comma-separated SWAN variants: a shortcut for "
                                          "the models the cells run")
    return p


def setting_line(exp: Experiment, err: SettingError) -> str:
    """One line for a refused setting: the file and key that gave it, else its flag."""
    if err.where:
        return err.line()
    return err.line(flags.subject(flags.flag_names(exp.Config), err.setting))


def apply_flags(args: argparse.Namespace, exp: Experiment[ConfigT], cfg: ConfigT) -> ConfigT:
    """The settings and grid axes the command line gave, on top of `cfg` (checked)."""
    values, axes = flags.given(args, exp.Config)
    if axes:
        values["grid"] = {**cfg.grid, **axes}
    return dataclasses.replace(cfg, **values) if values else cfg


def parse_config(exp: Experiment[ConfigT], argv: Sequence[str] | None = None) -> ConfigT:
    """The resolved configuration of a command line. Anything refused (a flag, a key or
    value of `--config FILE`, a combination) exits with 2 and one line, before any work."""
    parser = build_parser(exp)
    args = parser.parse_args(argv)
    exp.check_arguments(args, parser.error)
    cfg = exp.base_config(args)
    if args.config is not None:
        try:
            # `exp.Config` is the class of the experiment's ConfigT
            cfg = cast(ConfigT, load_toml(exp.Config, args.config, base=cfg,
                                          experiment=exp.name))
        except SettingError as err:
            parser.error(err.line())
    try:
        cfg = apply_flags(args, exp, cfg)
        return exp.apply_arguments(args, cfg, parser.error)
    except SettingError as err:
        parser.error(setting_line(exp, err))
    except ValueError as err:  # a check across settings (TrainConfig, an experiment's)
        parser.error(" ".join(str(err).split()))


def resume_command(exp: Experiment, argv: Sequence[str]) -> str:
    args = [a for a in argv if a != "--overwrite"]
    args += [] if "--resume" in args else ["--resume"]
    # This interpreter (the environment's), not a bare `python`: runnable as printed from
    # a shell without the environment activated, and from `make`.
    return shlex.join([sys.executable, "-m", type(exp).__module__, *args])


def _stuck_message(exp: Experiment, cfg: SweepConfig, argv: Sequence[str]) -> str:
    """What the interrupt watchdog prints when XLA (a compilation, a compiled step) does not
    return in time."""
    return (f"interrupted by {signals.signal_name()} inside XLA (a compilation or a compiled "
            f"step) that did not return within seconds: the running program's last "
            f"checkpoint is kept; "
            f"{finished_where(cfg)}.\nresume with: {resume_command(exp, argv)}")


def finished_where(cfg: SweepConfig) -> str:
    """Where the finished programs are: the results file, when there is one yet."""
    path = Path(cfg.results_dir) / "results.json"
    if path.is_file():
        return f"finished programs are in {path}"
    return f"no program has finished yet ({path} is written when one does)"


def flag_spelling(exp: Experiment) -> Callable[[str, Any], str | None]:
    """How this command line writes a setting in advice: (setting, value) -> its flag
    (`--rtol`; `--solver kvaerno5`; a switch: `--skip-bad-rows`, `--no-verify-md5`), or
    None when the experiment has no such setting. The flags are the declared ones
    (`flags.flag_names`: a grid axis such as `epsilon` included)."""
    names = flags.flag_names(exp.Config)

    def spell(setting: str, value: Any = None) -> str | None:
        flag = names.get(setting) or names.get(f"grid.{setting}")
        if flag is None or value is None:
            return flag
        if isinstance(value, bool):  # argparse.BooleanOptionalAction's pair
            return flag if value else "--no-" + flag.removeprefix("--")
        return f"{flag} {value}"

    return spell


def error_message(exp: Experiment, err: BaseException) -> str:
    """A library error's line, the settings its hints name spelled as this command's
    flags (`resume=True` -> `--resume`); any other error's own words."""
    return err.render(flag_spelling(exp)) if isinstance(err, HintedError) else str(err)


def data_error_message(exp: Experiment, err: BaseException) -> str | None:
    """One line for a data-layer error (file, row, and the flag that changes it)."""
    from swan_jax.data.errors import DataError

    if not isinstance(err, DataError | pickle.UnpicklingError):
        return None
    return f"{exp.label} data error: {' '.join(error_message(exp, err).split())}"


def _by() -> str:
    return "" if signals.signal_name() == "Ctrl-C" else f" by {signals.signal_name()}"


def disk_full_message(err: BaseException) -> str | None:
    """One line for a write that found the disk or quota full, wherever it happened."""
    if not (isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)):
        return None
    where = f" writing {err.filename}" if err.filename else ""
    return (f"{failure_reason(err)}{where}: free space there and run the same command again "
            f"with --resume (completed epochs are checkpointed)")


def solver_error_message(exp: Experiment, err: SolverError) -> str:
    """One line for a run-time solver error, its advice naming this command's flags."""
    return f"solver error: {' '.join(err.render(flag_spelling(exp)).split())}"


BACKGROUND_LOG = "background-errors.log"


class _BackgroundLog(logging.Handler):
    """Appends to `<results-dir>/background-errors.log` (the temporary folder while there
    is no results folder): what orbax's writer and reader threads report after the run's
    own error is raised."""

    def __init__(self, results_dir: Path):
        super().__init__()
        self.results_dir = Path(results_dir)

    def write(self, text: str) -> None:
        folder = self.results_dir if self.results_dir.is_dir() else Path(tempfile.gettempdir())
        with contextlib.suppress(Exception), open(folder / BACKGROUND_LOG, "a") as log:
            log.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text}\n")

    def emit(self, record: logging.LogRecord) -> None:
        self.write(logging.Formatter("%(name)s %(levelname)s %(message)s").format(record))

    def unraisable(self, unraisable) -> None:
        self.write(f"{unraisable.err_msg or 'unraisable'} {unraisable.object!r}\n"
                   + "".join(traceback.format_exception(unraisable.exc_type,
                                                        unraisable.exc_value,
                                                        unraisable.exc_traceback)))


def log_background_errors(results_dir: Path) -> None:
    """Keep the reports of errors nothing can raise out of the terminal, in a log file:
    tensorstore's threads calling into orbax's closed event loop after a failed restore
    (`sys.unraisablehook`: 32 tracebacks of "Event loop is closed") and orbax's write
    tasks failing on a full disk (asyncio's "Task exception was never retrieved", one
    traceback per array). The run's own one line is what a user reads. For the rest of
    the process: they come at its exit too."""
    handler = _BackgroundLog(results_dir)
    sys.unraisablehook = handler.unraisable
    asyncio_log = logging.getLogger("asyncio")
    for old in [h for h in asyncio_log.handlers if isinstance(h, _BackgroundLog)]:
        asyncio_log.removeHandler(old)  # a second run in this process: its own folder
    asyncio_log.addHandler(handler)
    asyncio_log.propagate = False


def main(exp: Experiment, argv: Sequence[str] | None = None) -> int:
    """Run the experiment's command line; returns 0, or exits non-zero with one line."""
    own_process = argv is None  # a command, not a caller in Python: it exits after this
    argv = list(sys.argv[1:] if argv is None else argv)
    cfg = parse_config(exp, argv)
    if "--dry-run" in argv:
        return dry_run(exp, cfg)
    log_background_errors(cfg.results_dir)
    try:
        slurm = cluster.options_from(build_parser(exp).parse_args(argv))
    except cluster.ClusterError as err:
        raise SystemExit(str(err)) from None
    if slurm is not None:
        return _on_slurm(exp, cfg, slurm)
    try:
        # SIGTERM ends it like Ctrl-C; a solver failure anywhere (the final scoring too)
        # is its one sentence, not equinox's wrapping
        with signals.interrupts_like_ctrl_c(lambda: _stuck_message(exp, cfg, argv)), \
                clear_errors():
            outcome = run_sweep(exp, cfg)
    except (FileExistsError, SweepRefused, OutputPathError, StepTooLarge, FolderInUse,
            CheckpointError, OutputWriteError, SolverTooLarge, CheckpointConflict,
            RunsDoNotDivide, ShapeMismatch) as err:
        raise SystemExit(error_message(exp, err)) from None
    except SolverError as err:  # before `Exception`: the last good checkpoint is kept
        raise SystemExit(solver_error_message(exp, err)) from None
    except TrainingInterrupted as err:
        kept = (f"{err.epochs_done} epoch(s) of the running program are safely checkpointed "
                f"in {err.checkpoint_dir}" if err.checkpoint_dir else
                "the running program kept no checkpoints")
        print(f"interrupted{_by()}: {kept}; {finished_where(cfg)}.\nresume with: "
              f"{resume_command(exp, argv)}", file=sys.stderr)
        raise SystemExit(signals.exit_code()) from None
    except KeyboardInterrupt:  # outside an epoch: loading data, compiling
        print(f"interrupted{_by()} between epochs; {finished_where(cfg)}.\nresume with: "
              f"{resume_command(exp, argv)}", file=sys.stderr)
        raise SystemExit(signals.exit_code()) from None
    except Exception as err:  # data-layer errors become one line; anything else is a bug
        message = data_error_message(exp, err) or disk_full_message(err)
        if message is None:
            raise
        raise SystemExit(message) from None
    if not writes_files():  # a multi-host sweep's other processes: process 0 reports
        return 0
    with signals.finishing(until_exit=own_process):
        return _report(exp, cfg, outcome)


def _report(exp: Experiment, cfg: SweepConfig, outcome: SweepResult) -> int:
    """The finished run's table, where its files are, and its divergence from the paper."""
    print((cfg.results_dir / "table.md").read_text())
    print(f"results: {cfg.results_dir / 'results.json'} ({len(outcome.cells)} cell(s)); table, "
          f"figure and the resolved config.toml beside it")
    if outcome.not_run:
        print(f"PARTIAL RUN (--skip-missing): {len(outcome.not_run)} data set(s) missing:\n  "
              + "\n  ".join(outcome.not_run))
    return report_divergence(exp, cfg, outcome.cells)


def _on_slurm(exp: Experiment, cfg: SweepConfig, slurm: cluster.SlurmOptions) -> int:
    """`--executor slurm`: the cells as jobs (`cluster.run_sweep`); a refusal in one line."""
    try:
        return cluster.run_sweep(exp, cfg, slurm)
    except (FileExistsError, SweepRefused, OutputPathError, FolderInUse,
            cluster.ClusterError) as err:
        raise SystemExit(error_message(exp, err)) from None


def dry_run(exp: Experiment, cfg: SweepConfig) -> int:
    """The resolved configuration, the programs it plans and their time estimate where
    paces are recorded (`estimate`); every refusal a run makes before loading data
    (`sweep.preflight`: output folders, the results file and --resume's settings,
    checkpoints, an implicit solver's batch size) is made here too, as the run makes it.
    Nothing is loaded, trained or written."""
    from swan_jax.experiments.estimate import estimate_line, results_files
    from swan_jax.experiments.records import ResultsFile
    from swan_jax.experiments.sweep import check_outputs, preflight

    try:  # refused: the one line alone, no configuration printed above it
        check_outputs(cfg)
        results = ResultsFile(Path(cfg.results_dir) / "results.json",
                              overwrite=cfg.overwrite, resume=cfg.resume)
        preflight(exp, cfg, results)
    except (FileExistsError, SweepRefused, OutputPathError, SolverTooLarge) as err:
        raise SystemExit(error_message(exp, err)) from None
    print(dump_toml(cfg, exp.name), end="")
    programs = exp.plan(cfg)
    runs = [len(p.grid) * len(cfg.seeds) for p in programs]
    print(f"# plan: {len(programs)} program(s), {sum(runs)} run(s) of up to {cfg.epochs} "
          f"epoch(s); nothing was run (--dry-run)")
    print(estimate_line(exp.name, programs, runs, cfg.epochs,
                        files=results_files(Path(cfg.results_dir))))
    return 0


def report_divergence(exp: Experiment, cfg: SweepConfig, cells: Sequence[dict]) -> int:
    """Cells whose reported grid point has diverged seeds: one line each on stderr, and
    exit 3 unless `--allow-diverged` (a table of NaNs is not a success)."""
    bad = [c for c in cells if any(c.get("diverged", ()))]
    for c in bad:
        label = " / ".join(str(c[a]) for a in exp.cell_axes if a in c)
        print(f"diverged: {label}: {sum(c['diverged'])} of {len(c['diverged'])} run(s) at "
              f"{c['best_hparams']} went non-finite; lower --lr, or change the grid",
              file=sys.stderr)
    if bad and not cfg.allow_diverged:
        print(f"{len(bad)} cell(s) report diverged runs (exit {EXIT_DIVERGED}; pass "
              f"--allow-diverged to exit 0)", file=sys.stderr)
        return EXIT_DIVERGED
    return 0
