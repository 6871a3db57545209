"""Paired reruns for two departures from the authors' code, since fixed (REPORT.md beside
this file): the ODE block's bias started at zero (theirs: U(-1/sqrt(d), 1/sqrt(d))), and
SWAN formed `V - V^T`, `Z + Z^T` from full matrices (theirs: from the upper triangle).

Each arm is the package at one commit (`git archive COMMIT swan_jax`, put first on
`PYTHONPATH`), trained by `swan-transfer` at a Figure 3 cell's committed grid point at the
paper's protocol (2,000 epochs, patience 100, seeds 0-3). Arms differ only in what their
commit changed: the seeds draw the same W, V, Z.

    python -m reproductions.authors-init-formation.study            # train the arms
    python -m reproductions.authors-init-formation.study --table    # the report's table

Training writes `<arm>__<cell>/` (results.json, config.toml, table.md) beside this file.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
COMMITS = {  # arm: (commit, what its package does)
    "b0-full": ("a2cdc43", "bias 0; V - V^T, Z + Z^T from full matrices"),
    "bU-full": ("8da6ea9", "bias U(+-1/sqrt(d)); V - V^T, Z + Z^T from full matrices"),
    "bU-triu": ("d479548", "bias U(+-1/sqrt(d)); V', Z' from the upper triangle"),
}
COMMON = ["--distance", "3", "--adjacency", "adj", "--gamma", "0.1", "--lr", "0.001",
          "--epochs", "2000", "--patience", "100", "--seeds", "0,1,2,3",
          "--no-checkpoints", "--no-progress", "--quiet", "--overwrite"]
CELLS = {  # cell: its grid point (the committed full-protocol run's selection)
    "line3-swan": ["--topology", "line", "--model", "swan", "--epsilon", "0.1",
                   "--beta", "-1"],
    "line3-adgn": ["--topology", "line", "--model", "adgn", "--epsilon", "0.1"],
    "ring3-swan": ["--topology", "ring", "--model", "swan", "--epsilon", "0.5",
                   "--beta", "1"],
}
PAIRS = [  # (what changed, cell, before arm, after arm)
    ("bias", "line3-swan", "b0-full", "bU-full"),
    ("bias", "line3-adgn", "b0-full", "bU-full"),
    ("formation", "line3-swan", "bU-full", "bU-triu"),
    ("formation", "ring3-swan", "bU-full", "bU-triu"),
]


def train(arm: str, cell: str, cache: Path) -> None:
    """One arm at one cell, in a child process running that commit's package."""
    commit = COMMITS[arm][0]
    with tempfile.TemporaryDirectory() as code:
        archive = subprocess.run(["git", "archive", commit, "swan_jax"], cwd=ROOT,
                                 capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(code, filter="data")
        env = {**os.environ, "PYTHONPATH": code}
        subprocess.run([sys.executable, "-m", "swan_jax.experiments.transfer", *COMMON,
                        *CELLS[cell], "--cache-dir", str(cache),
                        "--results-dir", str(HERE / f"{arm}__{cell}")],
                       cwd=tempfile.gettempdir(), env=env, check=True)


def per_seed(arm: str, cell: str) -> list[float]:
    cells = json.loads((HERE / f"{arm}__{cell}" / "results.json").read_text())["cells"]
    return [s["test"] for s in cells[0]["per_seed"]]


def table() -> str:
    rows = ["| change | cell | before: test MSE | after | after / before per seed | "
            "paired t |", "|---|---|---|---|---|---|"]
    for change, cell, before, after in PAIRS:
        a, b = per_seed(before, cell), per_seed(after, cell)
        diff = [y - x for x, y in zip(a, b, strict=True)]
        t = statistics.mean(diff) / (statistics.stdev(diff) / len(diff) ** 0.5)
        rows.append(f"| {change} | {cell} | {statistics.mean(a):.2e} ± "
                    f"{statistics.pstdev(a):.1e} | {statistics.mean(b):.2e} ± "
                    f"{statistics.pstdev(b):.1e} | "
                    f"{', '.join(f'{y / x:.2f}' for x, y in zip(a, b, strict=True))} | "
                    f"{t:+.2f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reproductions.authors-init-formation.study",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--table", action="store_true", help="print the report's table and stop")
    p.add_argument("--cache-dir", type=Path, default=ROOT / ".cache" / "swan_jax",
                   help="the transfer data's cache (git-ignored)")
    args = p.parse_args(argv)
    if not args.table:
        for arm, cell in sorted({(a, c) for _, c, b, a2 in PAIRS for a in (b, a2)}):
            train(arm, cell, args.cache_dir)
    print(table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
