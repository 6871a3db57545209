"""A program whose runs have stopped: their steps skipped (`_run_blocks.Stoppable`) or
computed.

Early stopping ends a program's runs at different epochs. Vmapped, a stopped run still
costs a training run's step; on a CPU its step is now skipped, and the runs still
training are computed one at a time. This benchmark builds Figure 3's GPS program (the
paper's 4 seeds) twice in one process: once as the campaign trains it (patience 100,
diverged runs stopped), and once where no run can stop of itself (no patience, a
divergence raises): its stopped runs are computed and kept as they were, as every
program did before. For each count in `--stopped` it marks that many runs stopped and
alternates the two programs' epochs (training, then validation and test); then the
same with every run training:

    python -m benchmarks.stopped_runs                          # ring k = 5, 1-3 stopped
    python -m benchmarks.stopped_runs --topology line --distance 3 --stopped 2

It prints the wall and CPU seconds per epoch of both, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import ROOT, machine
from benchmarks.gps_attention import _epoch, _program


def _alternate(programs: dict[str, tuple], stopped: np.ndarray, rounds: int
               ) -> dict[str, list[tuple[float, float]]]:
    """`rounds` alternating epochs of each program, with the runs in `stopped` stopped
    (each program's state is kept between its epochs)."""
    states = {name: state.replace(stopped=stopped.copy())
              for name, (_, state) in programs.items()}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in programs}
    for _ in range(rounds):
        for name, (prog, _) in programs.items():
            wall, cpu, states[name], _ = _epoch(prog, states[name])
            times[name].append((wall, cpu))
    return times


def _median(rows: list[tuple[float, float]], which: int) -> float:
    return statistics.median(row[which] for row in rows)


def _ratio(times: dict[str, list[tuple[float, float]]], which: int) -> float:
    pairs = zip(times["computed"], times["skipped"], strict=True)
    return statistics.median(c[which] / s[which] for c, s in pairs)


def measure(topology: str, distance: int, counts: list[int], rounds: int
            ) -> dict[str, Any]:
    """Both programs compiled (a first epoch each), then `rounds` alternations for each
    count of stopped runs, and `rounds` with none."""
    with tempfile.TemporaryDirectory() as tmp:
        programs = {}
        unstoppable = {"patience": None, "on_divergence": "raise"}
        protocol = {"epochs": 2000}  # a short program would compute its stopped runs
        for name, train in (("computed", unstoppable), ("skipped", protocol)):
            prog, state = _program(topology, distance, Path(tmp) / name, **train)
            runs = state.num_runs
            if not all(0 < c < runs for c in counts):
                raise SystemExit(f"--stopped takes counts from 1 to {runs - 1} (the "
                                 f"program has {runs} runs)")
            programs[name] = (prog, state)
            _epoch(prog, state)  # compiles
        cases = {str(c): _alternate(programs, np.arange(runs) >= runs - c, rounds)
                 for c in counts}
        cases["0"] = _alternate(programs, np.zeros(runs, bool), rounds)
    return {"machine": machine(), "topology": topology, "distance": distance, "runs": runs,
            "seconds_by_stopped": cases,
            "wall_ratio": {c: _ratio(t, 0) for c, t in cases.items()},
            "cpu_ratio": {c: _ratio(t, 1) for c, t in cases.items()}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.stopped_runs",
                                description=__doc__.split("\n")[0])
    p.add_argument("--topology", default="ring", choices=("line", "ring", "crossed-ring"))
    p.add_argument("--distance", type=int, default=5, help="the distance k")
    p.add_argument("--stopped", default="1,2,3",
                   help="comma-separated counts of runs marked stopped (of 4)")
    p.add_argument("--rounds", type=int, default=3, help="alternating epochs timed")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                   "stopped_runs.json")
    args = p.parse_args(argv)
    try:
        counts = [int(c) for c in args.stopped.split(",")]
    except ValueError:
        p.error(f"--stopped takes comma-separated counts, got {args.stopped!r}")
    if args.distance < 1 or args.rounds < 1:
        p.error("--distance and --rounds take positive numbers")
    result = measure(args.topology, args.distance, counts, args.rounds)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=float) + "\n")
    for count, times in result["seconds_by_stopped"].items():
        computed, skipped = times["computed"], times["skipped"]
        print(f"{count} of {result['runs']} stopped: computed wall {_median(computed, 0):.2f} "
              f"s, CPU {_median(computed, 1):.2f} s; skipped wall {_median(skipped, 0):.2f}"
              f" s, CPU {_median(skipped, 1):.2f} s per epoch; computed / skipped wall "
              f"{result['wall_ratio'][count]:.2f}x, CPU {result['cpu_ratio'][count]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
