"""`python -m reproduce.campaign`: run the campaign's cells until a deadline, or merge.

    python -m reproduce.campaign [run] --until 19:30 [--cells 'graphprop/*/gcn' ...]
    python -m reproduce.campaign run --until 8 --work W --reproductions R --no-render
    python -m reproduce.campaign run --executor slurm --slurm-config cluster.toml [...]
    python -m reproduce.campaign status [--cells ...]
    python -m reproduce.campaign merge runs/gpu_window/window.tar

`run` runs the cells of `reproductions/campaign/plan.toml` that match `--cells` and are
not collected yet, in their declared priority, each by its experiment's own command with
`--resume` in `runs/campaign/<cell>/`, until `--until` (a time of day HH:MM, or minutes
from now; default: no deadline); finished cells are collected into `reproductions/`,
unfinished ones carried in `reproductions/campaign/carried/`; RESULTS.md is re-rendered.
Commit `reproductions/` and RESULTS.md afterwards: the next machine continues from them.
SIGTERM or Ctrl-C stop the cell under way after a checkpoint, as the deadline does.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Sequence
from pathlib import Path

from reproduce.campaign.cells import PLAN_FILE, PlanError
from reproduce.campaign.loop import Options, run_campaign, status
from reproduce.campaign.merge import merge_window
from reproduce.results import ReproductionsError
from swan_jax.experiments.cluster import ClusterError, add_arguments, options_from


def deadline(text: str, now: datetime.datetime | None = None) -> float:
    """`--until`: HH:MM (today, or tomorrow when past) or minutes from now, as a time."""
    now = now or datetime.datetime.now()
    try:
        if ":" in text:
            at = datetime.datetime.combine(now.date(), datetime.time.fromisoformat(text))
            return (at if at > now else at + datetime.timedelta(days=1)).timestamp()
        minutes = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither HH:MM nor minutes") from None
    if not minutes > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: minutes must be > 0")
    return now.timestamp() + 60 * minutes


def build_parser() -> argparse.ArgumentParser:
    doc = (__doc__ or "").strip().splitlines()
    p = argparse.ArgumentParser(prog="python -m reproduce.campaign", description=doc[0],
                                epilog="\n".join(doc[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", nargs="?", default="run",
                   choices=("run", "status", "merge"))
    p.add_argument("sources", nargs="*", type=Path, help="merge: the windows' tars")
    p.add_argument("--until", type=deadline, default=float("inf"),
                   help="the deadline: HH:MM (local time) or minutes from now")
    p.add_argument("--cells", action="append", default=[],
                   help="only cells whose id matches this pattern (repeatable)")
    p.add_argument("--plan", type=Path, default=PLAN_FILE)
    p.add_argument("--reproductions", type=Path, default=Path("reproductions"))
    p.add_argument("--work", type=Path, default=Path("runs/campaign"),
                   help="the run folders (git-ignored)")
    p.add_argument("--device-kind", default="", help="default: detected")
    p.add_argument("--grace", type=float, default=120.0,
                   help="seconds from SIGTERM at the deadline to SIGKILL (default 120)")
    p.add_argument("--no-render", action="store_true", help="do not re-render RESULTS.md")
    p.add_argument("--note", default="", help="a line stored with the collected cells")
    add_arguments(p)  # --executor slurm: each cell a job
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.sources and args.command != "merge":
        raise SystemExit(f"campaign: {args.command} takes no files ({args.sources[0]}); "
                         f"did you mean merge?")
    try:
        slurm = options_from(args)
        opts = Options(plan=args.plan, reproductions=args.reproductions, work=args.work,
                       cells=args.cells, until=args.until, grace=args.grace,
                       render=not args.no_render, note=args.note, kind=args.device_kind,
                       slurm=slurm)
        if args.command == "merge":
            if not args.sources:
                raise SystemExit("campaign: merge needs the window's tar, e.g. "
                                 "runs/gpu_window/window.tar")
            lines = [line for s in args.sources for line in merge_window(s, opts)]
        elif args.command == "status":
            lines = status(opts)
        else:
            run_campaign(opts)  # prints as it goes
            return 0
    except (PlanError, ReproductionsError, ClusterError) as err:
        raise SystemExit(f"campaign: {err}") from None
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
