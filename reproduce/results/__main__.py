"""RESULTS.md: collect a finished (or partial) run's small files, render the document.

    python -m reproduce.results collect results/transfer
    python -m reproduce.results collect results/lrgb --as lrgb-peptides-cpu \\
        --note "2 CPU cores shared with other jobs"
    python -m reproduce.results render          # make results

`collect` copies `results.json` and `config.toml` of a results folder into
`reproductions/<experiment>/` (or `--as NAME`), with `collected.json` (source, the
experiment's notes, programs still in progress). It refuses to replace committed results
by a run that is smaller in any measure (epochs, patience, seeds, data, grid points,
finished cells or programs) unless `--force`.

`render` writes RESULTS.md and `reproductions/figures/*.png` from `reproductions/` only.
Repository tooling (not installed): run from the repository root.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from reproduce.results import (
    CollectRefused,
    ReproductionsError,
    collect,
    render,
)
from reproduce.results.collect import MAX_MB


def build_parser() -> argparse.ArgumentParser:
    doc = __doc__.strip().splitlines()
    p = argparse.ArgumentParser(prog="python -m reproduce.results",
                                description=doc[0], epilog="\n".join(doc[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="copy a results folder's small files into "
                                       "reproductions/")
    c.add_argument("source", type=Path, help="a results folder, e.g. results/transfer")
    c.add_argument("--reproductions", type=Path, default=Path("reproductions"))
    c.add_argument("--as", dest="name", default=None,
                   help="folder name under reproductions/ (default: the experiment's name)")
    c.add_argument("--force", action="store_true",
                   help="replace committed results even by a smaller run")
    c.add_argument("--note", default=None,
                   help="a line shown with the run's protocol (e.g. the machine's load)")
    c.add_argument("--max-mb", type=float, default=MAX_MB,
                   help=f"largest results.json accepted (default {MAX_MB:g} MB)")
    r = sub.add_parser("render", help="write RESULTS.md from reproductions/")
    r.add_argument("--reproductions", type=Path, default=Path("reproductions"))
    r.add_argument("--out", type=Path, default=Path("RESULTS.md"))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "collect":
            lines = collect(args.source, args.reproductions, name=args.name,
                            force=args.force, note=args.note,
                            max_mb=args.max_mb)
        else:
            if not args.reproductions.is_dir():
                raise ReproductionsError(f"{args.reproductions}: no such folder (run from "
                                         f"the repository root, or pass --reproductions)")
            lines = render(args.reproductions, args.out)
    except (CollectRefused, ReproductionsError) as err:
        raise SystemExit(f"results {args.command}: {err}") from None
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
