"""Training curves of a results folder, drawn to a PNG.

    swan-curves results/transfer                 # -> results/transfer/curves.png
    python -m swan_jax.experiments.curves results/lrgb --out lrgb-curves.png

Reads every program's `history.jsonl` under the folder and draws, per program, the
training loss and the validation metric (mean over its runs, the band spans min to max)
against the epoch, plus the learning rate when a schedule changed it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from swan_jax.experiments.report import plot_curves


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[1:]))
    p.add_argument("folder", type=Path, help="a results folder (or any folder above "
                                             "program folders)")
    p.add_argument("--out", type=Path, default=None, help="PNG path (default FOLDER/curves.png)")
    args = p.parse_args(argv)
    if not args.folder.is_dir():
        p.error(f"{args.folder} is not a folder")
    try:
        out = plot_curves(args.folder, args.out)
    except FileNotFoundError as err:
        raise SystemExit(str(err)) from None
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
