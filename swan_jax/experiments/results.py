"""A results folder at a glance: what a sweep found, cell by cell.

    swan-results results/transfer      # one results folder
    swan-results results               # every results folder below it

Reads the `results.json` a `swan-<experiment>` command wrote (it trains and writes
nothing) and prints, per folder, the experiment, where it was measured, then one line per
cell: the test metric (mean ± std over the seeds of the best grid point), the seeds, the
best point and diverged runs; then the cells not run. The table beside the paper is
`table.md` in the same folder. (This repository's RESULTS.md is built by its own tooling,
`python -m reproduce.results`, which is not installed.)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

RESULTS_FILE = "results.json"
# Printed in percent, as table.md and the paper print them (AP, F1, AUC, accuracy).
PERCENT_METRICS = ("ap", "f1", "roc_auc", "accuracy")


class ResultsFolderError(ValueError):
    """A folder holds no readable `results.json` (one line naming it)."""


def results_files(root: str | Path) -> list[Path]:
    """`root/results.json`, else every `results.json` below `root` (checkpoints skipped)."""
    root = Path(root)
    if (root / RESULTS_FILE).is_file():
        return [root / RESULTS_FILE]
    found = sorted(p for p in root.rglob(RESULTS_FILE) if "checkpoints" not in p.parts)
    if not found:
        raise ResultsFolderError(f"{root} holds no {RESULTS_FILE}: give a folder a "
                                 f"swan-<experiment> command wrote (its --results-dir, e.g. "
                                 f"results/transfer)")
    return found


def cell_line(cell: Mapping[str, Any]) -> str:
    """One cell of `results.json` ("cells", as the sweep summarises them) on one line.

    The cell's axes are the keys before "metric" (the sweep writes the cell first)."""
    keys = list(cell)
    axes = keys[:keys.index("metric")] if "metric" in keys else []
    label = " / ".join(str(cell[a]) for a in axes) or "(one cell)"
    seeds = cell.get("seeds", [])
    diverged = sum(bool(d) for d in cell.get("diverged", ()))
    best = ", ".join(f"{k}={v}" for k, v in (cell.get("best_hparams") or {}).items())
    metric = cell.get("metric", "?")
    scale, unit = (100.0, " %") if metric in PERCENT_METRICS else (1.0, "")
    line = (f"{label}: test {metric} {scale * cell['test_mean']:.4g} ± "
            f"{scale * cell['test_std']:.4g}{unit} over {len(seeds)} seed(s)"
            + (f" at {best}" if best else ""))
    return line + (f"; {diverged} run(s) diverged" if diverged else "")


def summarise(path: str | Path) -> list[str]:
    """The lines `swan-results` prints for one `results.json`."""
    path = Path(path)
    try:
        results = json.loads(path.read_text())
        cells = list(results.get("cells") or [])
    except (OSError, ValueError, AttributeError) as err:
        raise ResultsFolderError(f"{path}: not a results file a sweep wrote "
                                 f"({type(err).__name__})") from None
    machine = results.get("machine") or {}
    where = ", ".join(str(machine[k]) for k in ("device_kind", "date") if machine.get(k))
    lines = [f"{path.parent}: {results.get('experiment', '?')}, {len(cells)} cell(s)"
             + (f", measured on {where}" if where else "")]
    lines += [f"  {cell_line(cell)}" for cell in cells]
    # lines written before issue 41 name only the cells and the reason
    lines += [f"  {item}" if "not run:" in item else f"  not run: {item}"
              for item in results.get("not_run") or []]
    table = path.parent / "table.md"
    if table.is_file():
        lines.append(f"  table beside the paper: {table}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    doc = __doc__.strip().splitlines()
    p = argparse.ArgumentParser(prog="swan-results", description=doc[0],
                                epilog="\n".join(doc[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path, help="a results folder (e.g. results/transfer), or "
                                             "a folder above several")
    args = p.parse_args(argv)
    if not args.folder.is_dir():
        p.error(f"{args.folder} is not a folder")
    try:
        lines = [line for path in results_files(args.folder) for line in summarise(path)]
    except ResultsFolderError as err:
        raise SystemExit(f"swan-results: {err}") from None
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
