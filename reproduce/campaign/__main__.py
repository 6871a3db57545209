"""`python -m reproduce.campaign`: run, inspect or regenerate the campaign.

    python -m reproduce.campaign [run] --budget-minutes 120 [--cells 'transfer/*']
        [--fit] [--device-kind cpu-2core|h100|h200] [--bundle-out FILE] [--bundle-in FILE]
    python -m reproduce.campaign run --executor slurm --slurm-config cluster.toml
        [--partition gpu --gpus 1 --time-minutes 240 --array-size 8] [--cells ...]
    python -m reproduce.campaign status [--device-kind h200]
    python -m reproduce.campaign plan --write
    python -m reproduce.campaign probe --probe-seconds 120 [--cells ...] [--list]
    python -m reproduce.campaign merge runs/gpu/reproductions.tar [...]

`run` trains the plan's cells in order until the budget is spent (default: 8 minutes on
a GPU, 60 on a CPU), stops after a checkpoint, collects every finished cell into
`reproductions/`, writes a resume bundle of each unfinished one
(`reproductions/campaign/bundles/`, and `--bundle-out FILE`), re-renders RESULTS.md and
prints what remains. SIGTERM or Ctrl-C stop the same way. Commit `reproductions/` and
RESULTS.md afterwards: the next machine continues from them. `--executor slurm` submits
each chosen cell as a SLURM job instead (no budget: each job trains its cell to the end,
requeued from its checkpoints when preempted or out of time) and collects them the same
way when the jobs end (`reproduce.campaign.slurm`). A cell whose data this machine
does not have is skipped in one line before any compile (`--download` fetches it).

`probe` spends at most about `--probe-seconds` on a few epochs of each program shape of
the remaining cells that no measurement prices yet, the most plan minutes first
(`reproduce.campaign.probe`): their first epoch and pace go into costs.json, marked as
probes, and nothing else is kept; `plan --write` then prices every cell of those shapes
from them and prints the plan's total and its measured share.

A GPU slice (`reproduce/gpu_slice.sh`: the GPU check, then cells for the time left) runs
in a copy of the tree and returns `$OUT/reproductions.tar`. Here, `merge` takes from it,
cell by cell, whatever is newer than this tree (finished cells into
`reproductions/campaign-<group>-<kind>/`, bundles of unfinished ones), leaving the
cells a campaign here advanced meanwhile alone; then `make results` and commit. Merge
after the local campaign has stopped: a running campaign rewrites `state.json` when it
ends.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from reproduce.campaign.plan import DEVICE_KINDS, PLAN_FILE, PlanError

GPU_BUDGET, CPU_BUDGET = 8.0, 60.0


def detect_device_kind() -> str:
    """cpu-2core on a CPU, h100 / h200 from the accelerator's name (else its name)."""
    import jax

    kind = jax.devices()[0].device_kind.lower()
    for name in ("h200", "h100"):
        if name in kind:
            return name
    return "cpu-2core" if jax.devices()[0].platform == "cpu" else kind


def build_parser() -> argparse.ArgumentParser:
    doc = __doc__.strip().splitlines()
    p = argparse.ArgumentParser(prog="python -m reproduce.campaign",
                                description=doc[0], epilog="\n".join(doc[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", nargs="?", default="run",
                   choices=("run", "status", "plan", "merge", "probe"))
    p.add_argument("sources", nargs="*", type=Path,
                   help="merge: the copies of reproductions/ (folders or .tar) to take from")
    p.add_argument("--plan", type=Path, default=PLAN_FILE)
    p.add_argument("--reproductions", type=Path, default=Path("reproductions"))
    p.add_argument("--work", type=Path, default=Path("runs/campaign"),
                   help="git-ignored work folder (sweeps, checkpoints)")
    p.add_argument("--device-kind", choices=DEVICE_KINDS, default=None,
                   help="the cost column to use (default: detected)")
    p.add_argument("--budget-minutes", type=float, default=None,
                   help=f"wall time of this call (default {GPU_BUDGET:g} on a GPU, "
                        f"{CPU_BUDGET:g} on a CPU)")
    p.add_argument("--cells", action="append", default=[],
                   help="only cells whose id matches this pattern (repeatable), e.g. "
                        "'transfer/*/3/*'")
    p.add_argument("--ordered", action="store_true",
                   help="take the cells in the order of the --cells patterns (the first "
                        "each matches), then under way first, then the cheapest remaining "
                        "on this device kind (a GPU slice's order of value)")
    p.add_argument("--fit", action="store_true",
                   help="start only cells whose remaining cost fits the time left")
    p.add_argument("--max-cell-minutes", type=float, default=None,
                   help="skip cells whose remaining cost on this device kind is larger "
                        "(cheap cells on a CPU)")
    p.add_argument("--bundle-out", type=Path, default=None,
                   help="also copy the unfinished cell's bundle here (a GPU slice's $OUT)")
    p.add_argument("--bundle-in", type=Path, action="append", default=[],
                   help="a bundle from another machine to continue (repeatable)")
    p.add_argument("--bundle-max-mb", type=float, default=None,
                   help="largest bundle written (default 4.5 MB, campaign.bundle.MAX_MB: "
                        "bundles are committed, and the repository takes no file over 5 MB)")
    p.add_argument("--no-render", action="store_true", help="do not re-render RESULTS.md")
    p.add_argument("--note", default="", help="a line stored with the collected cells")
    p.add_argument("--write", action="store_true", help="plan: write the plan file")
    p.add_argument("--download", action="store_true",
                   help="fetch a cell's missing raw files (default: a cell whose data is "
                        "not here is skipped, one line each, before any compile)")
    p.add_argument("--probe-seconds", type=float, default=120.0,
                   help="probe: the time its probes may take in all (default 120)")
    p.add_argument("--probe-epochs", type=int, default=None,
                   help="probe: epochs per probe, the first compiling (default 5)")
    p.add_argument("--list", action="store_true",
                   help="probe: only list the shapes it would probe, by value")
    from swan_jax.experiments.cluster import add_arguments

    add_arguments(p)  # run --executor slurm: each cell a job (reproduce.campaign.slurm)
    return p


def _plan(args) -> list[str]:
    from reproduce.campaign.defaults import HEADER, default_entries
    from reproduce.campaign.plan import dump_plan

    entries = default_entries(args.reproductions)
    text = dump_plan(entries, HEADER)
    if args.write:
        args.plan.parent.mkdir(parents=True, exist_ok=True)
        args.plan.write_text(text)
        return [f"wrote {args.plan}: {len(entries)} cell(s), "
                f"{sum(e.runnable for e in entries)} runnable", *_measured_share(args, entries)]
    return [text]


def _measured_share(args, entries) -> list[str]:
    """The remaining runnable cells' H200 (and H100) minutes, and the share measured."""
    from reproduce.campaign import gather, loop

    opts = loop.Options(plan=args.plan, reproductions=args.reproductions)
    state, runs = loop.read_state(opts), gather._runs(args.reproductions)
    left = [e for e in loop.resolved(entries, opts)
            if e.runnable and not loop.is_done(e, opts, runs)]
    lines = []
    for kind in ("h200", "h100"):
        rest = {e.id: 1.0 - loop._progress(e, state) for e in left}
        total = sum(e.cost(kind) * rest[e.id] for e in left)
        measured = sum(e.measured_minutes.get(kind, 0.0) * rest[e.id] for e in left)
        lines.append(f"plan on {kind}: {len(left)} runnable cell(s) left, {total:,.0f} "
                     f"minutes, {measured:,.0f} of them measured "
                     f"({100 * measured / max(total, 1e-9):.0f}%)")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from reproduce.campaign import bundle, loop
    from reproduce.results import ReproductionsError

    if args.sources and args.command != "merge":
        raise SystemExit(f"campaign: {args.command} takes no files ({args.sources[0]}); "
                         f"did you mean merge?")
    if args.budget_minutes is not None and not args.budget_minutes > 0:
        raise SystemExit("campaign: --budget-minutes must be > 0")
    if not args.probe_seconds >= 0:
        raise SystemExit("campaign: --probe-seconds must be >= 0")
    if args.probe_epochs is not None and args.probe_epochs < 2:
        raise SystemExit("campaign: --probe-epochs must be >= 2 (the first compiles)")
    from swan_jax.experiments.cluster import ClusterError, options_from

    try:
        slurm = options_from(args)
        if slurm is not None and args.command != "run":
            raise ClusterError(f"--executor slurm runs cells: it goes with run, not "
                               f"{args.command}")
        if args.command == "plan":
            print("\n".join(_plan(args)))
            return 0
        kind = args.device_kind or detect_device_kind()
        budget = args.budget_minutes or (CPU_BUDGET if kind.startswith("cpu") else GPU_BUDGET)
        opts = loop.Options(plan=args.plan, reproductions=args.reproductions, work=args.work,
                            device_kind=kind, budget_minutes=budget, cells=args.cells,
                            ordered=args.ordered,
                            fit=args.fit, max_cell_minutes=args.max_cell_minutes,
                            bundle_out=args.bundle_out,
                            bundle_in=args.bundle_in,
                            bundle_max_mb=args.bundle_max_mb or bundle.MAX_MB,
                            render=not args.no_render,
                            note=args.note, download=args.download)
        if args.command == "merge":
            from reproduce.campaign.merge import merge_campaign

            if not args.sources:
                raise SystemExit("campaign: merge needs the .tar (or folder) a GPU slice "
                                 "returned, e.g. runs/gpu/reproductions.tar")
            lines = [line for source in args.sources
                     for line in merge_campaign(source, opts)]
            lines += loop.closing(opts, loop.load_plan(args.plan))  # RESULTS.md, what is left
        elif args.command == "probe":
            from reproduce.campaign.probe import PROBE_EPOCHS, run_probes

            lines = run_probes(opts, seconds=args.probe_seconds, listing=args.list,
                               epochs=args.probe_epochs or PROBE_EPOCHS)
            if not args.list:  # a run prints as it goes; its last line is the total
                print(lines[-1])
                return 0
        elif args.command == "status":
            lines = loop.remaining(loop.load_plan(args.plan), opts)
        elif slurm is not None:
            from reproduce.campaign.slurm import run_on_slurm

            lines = run_on_slurm(opts, slurm)
        else:
            lines = loop.run_campaign(opts)
    except (PlanError, bundle.BundleError, ReproductionsError, ClusterError) as err:
        raise SystemExit(f"campaign: {err}") from None
    if args.command != "run":  # a run prints as it goes
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
