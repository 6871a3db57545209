"""The command line of every experiment: flags -> configuration -> sweep -> one clear line.

`parse_config(exp, argv)` resolves the configuration (packaged TOML, `--config FILE`,
then flags); `main(exp, argv)` runs the sweep and turns every failure a user can cause
into one line on stderr and a non-zero exit: refused inputs (exit 1), data errors naming
the flag that changes the behaviour (exit 1), an adaptive solver out of steps (exit 1),
Ctrl-C with the command that resumes (exit 130).
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Sequence

from swan_jax.cli import base_parser
from swan_jax.experiments.config import SweepConfig, load_toml
from swan_jax.experiments.sweep import Experiment, SweepRefused, run_sweep
from swan_jax.io import OutputPathError
from swan_jax.solvers import SolverError
from swan_jax.train import StepTooLarge, TrainingInterrupted

# Data-layer errors, by class name (importing their modules would import rdkit).
DATA_ERRORS = ("DataError", "DataFormatError", "ChecksumError", "DownloadError",
               "UnsafePickleError", "UnpicklingError")
# The data layer names an API switch and its flag: "pass verify_md5=False (CLI: --no-...)".
API_AND_FLAG = re.compile(r"pass \S+=\S+ \(CLI: (--[\w-]+)\)")
# How a loader's message names an option -> the flag that sets it.
FLAG_NAMES = {"verify_md5=False": "--no-verify-md5", "skip_bad_rows=True": "--skip-bad-rows",
              "download=False": "--no-download"}
# How a solver's message names an option -> the flags that set it (no flag sets max_steps).
SOLVER_FLAGS = {"loosen rtol/atol, raise max_steps, or": "loosen --rtol / --atol, or",
                "a stiff solver such as 'kvaerno5'": "a stiff solver such as --solver kvaerno5",
                "lower epsilon or tighten the tolerances":
                    "lower --epsilon or tighten --rtol / --atol"}
FLAG_HINTS = {"DataFormatError": "--skip-bad-rows skips malformed rows",
              "ChecksumError": "--no-verify-md5 accepts files of your own",
              "DownloadError": "put the file there by hand; --no-download never downloads"}

COMMON = {"seeds": "seeds", "epochs": "epochs", "patience": "patience",
          "batch_size": "batch_size", "optimizer": "optimizer", "schedule": "schedule",
          "warmup_epochs": "warmup_epochs", "grad_clip": "grad_clip", "solver": "solver",
          "rtol": "rtol", "atol": "atol", "adjoint": "adjoint", "results_dir": "results_dir",
          "checkpoint_dir": "checkpoint_dir", "cache_dir": "cache_dir"}
GRID_FLAGS = {"lr": "learning_rate", "epsilon": "epsilon", "gamma": "gamma", "beta": "beta",
              "adjacency": "adjacency"}
SWITCHES = {"resume": "resume", "overwrite": "overwrite", "skip_missing": "skip_missing",
            "data_parallel": "data_parallel"}


def build_parser(exp: Experiment) -> argparse.ArgumentParser:
    doc = (sys.modules[type(exp).__module__].__doc__ or exp.label).strip()
    p = base_parser(doc.splitlines()[0])
    p.epilog = "\n".join(doc.splitlines()[1:])
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    if exp.max_params is not None:
        p.add_argument("--allow-more-params", action="store_true",
                       help=f"lift {exp.label}'s {exp.max_params:,}-parameter budget")
    exp.add_arguments(p)
    return p


def apply_common(args: argparse.Namespace, cfg: SweepConfig) -> SweepConfig:
    """The shared flags that were given, on top of `cfg`."""
    import dataclasses

    changes = {field: getattr(args, flag) for flag, field in COMMON.items()
               if getattr(args, flag, None) is not None}
    changes.update({field: True for flag, field in SWITCHES.items() if getattr(args, flag)})
    grid = {axis: tuple(getattr(args, flag)) for flag, axis in GRID_FLAGS.items()
            if getattr(args, flag, None) is not None}
    if grid:
        changes["grid"] = {**cfg.grid, **grid}
    if args.no_checkpoints:
        changes["save_checkpoints"] = False
    if args.no_progress:
        changes["progress"] = False
    if getattr(args, "allow_more_params", False):
        changes["allow_more_params"] = True
    return dataclasses.replace(cfg, **changes)


def parse_config(exp: Experiment, argv: Sequence[str] | None = None) -> SweepConfig:
    """The resolved configuration of a command line (argparse errors exit with 2)."""
    parser = build_parser(exp)
    args = parser.parse_args(argv)
    cfg = exp.base_config(args)
    if args.config is not None:
        try:
            cfg = load_toml(exp.Config, args.config, base=cfg)
        except ValueError as err:
            parser.error(str(err))
    return exp.apply_arguments(args, apply_common(args, cfg), parser.error)


def resume_command(exp: Experiment, argv: Sequence[str]) -> str:
    args = [a for a in argv if a != "--overwrite"]
    args += [] if "--resume" in args else ["--resume"]
    return shlex.join(["python", "-m", type(exp).__module__, *args])


def data_error_message(exp: Experiment, err: BaseException) -> str | None:
    """One line for a data-layer error (file, row, and the flag that changes it)."""
    names = [c.__name__ for c in type(err).__mro__]
    kind = next((n for n in names if n in DATA_ERRORS), None)
    if kind is None:
        return None
    text = API_AND_FLAG.sub(r"pass \1", " ".join(str(err).split()))
    for option, flag in FLAG_NAMES.items():
        text = text.replace(option, flag)
    hint = FLAG_HINTS.get(kind)
    if hint and hint.split()[0] not in text:
        text += f" ({hint})"
    return f"{exp.label} data error: {text}"


def solver_error_message(err: SolverError) -> str:
    """One line for a run-time solver error, naming the flags that change it."""
    text = " ".join(str(err).split())
    for option, flag in SOLVER_FLAGS.items():
        text = text.replace(option, flag)
    return f"solver error: {text}"


def main(exp: Experiment, argv: Sequence[str] | None = None) -> int:
    """Run the experiment's command line; returns 0, or exits non-zero with one line."""
    argv = list(sys.argv[1:] if argv is None else argv)
    cfg = parse_config(exp, argv)
    try:
        outcome = run_sweep(exp, cfg)
    except (FileExistsError, SweepRefused, OutputPathError, StepTooLarge) as err:
        raise SystemExit(str(err)) from None
    except SolverError as err:  # before `Exception`: the last good checkpoint is kept
        raise SystemExit(solver_error_message(err)) from None
    except TrainingInterrupted as err:
        kept = (f"{err.epochs_done} epoch(s) of the running program are safely checkpointed "
                f"in {err.checkpoint_dir}" if err.checkpoint_dir else
                "the running program kept no checkpoints")
        print(f"interrupted: {kept}; finished programs are in {cfg.results_dir}/"
              f"results.json.\nresume with: {resume_command(exp, argv)}", file=sys.stderr)
        raise SystemExit(130) from None
    except KeyboardInterrupt:  # outside an epoch: loading data, compiling
        print(f"interrupted between epochs; finished programs are in {cfg.results_dir}/"
              f"results.json.\nresume with: {resume_command(exp, argv)}", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as err:  # data-layer errors become one line; anything else is a bug
        message = data_error_message(exp, err)
        if message is None:
            raise
        raise SystemExit(message) from None
    print((cfg.results_dir / "table.md").read_text())
    print(f"results: {cfg.results_dir / 'results.json'} ({len(outcome.cells)} cell(s)); table, "
          f"figure and the resolved config.toml beside it")
    if outcome.not_run:
        print("PARTIAL RUN (--skip-missing), not run: " + "; ".join(outcome.not_run))
    return 0
