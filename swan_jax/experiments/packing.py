"""Runs per program: a static point's grid cut into the fewest programs that fit.

A sweep's program is a static point (the shape-changing axes) with every numeric grid
point x seed vmapped (`sweep._cell_programs`). A GPU is far from full with one run, so
the more runs a program holds the better, until its training step no longer fits in
the device's memory. Two settings cut a static point's grid into parts:

* `runs_per_program = R`: parts of at most R runs;
* `program_memory_gib = M`: parts whose step fits in M GiB by the memory check's
  estimate (`swan_jax.train.step_memory`, shapes only: nothing is compiled). The step's
  bytes are `shared + r * per_run` for r runs (the batch is shared): one run's estimate
  gives both, and a part holds `floor((M - shared) / per_run)` runs. The figure is the
  same on every machine, so a cell resumed on another device (an H100 after an H200,
  the CPU after a GPU) cuts its grid the same way and finds its checkpoints; give the
  smaller device's memory.

Both together: the smaller. A part keeps every seed of its grid points together (a point
is never split over programs), so at least one point per part. The parts of a static
point are as equal as can be (their sizes differ by at most one point), in grid order.
A static point that needs no cut keeps its program unchanged: name, identity and folder
(work begun before these settings resumes); a cut program's identity hashes its own
grid points, and its name ends in `part=i-of-n`.

The runs of a vmapped program are independent: a part trains each of its runs to the
numbers the whole program gives it (to float rounding: XLA may vectorise the batched
arithmetic differently for another run count; `tests/test_packing.py` holds them equal
to 1e-5).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

from swan_jax.experiments.config import SweepConfig
from swan_jax.train import TrainConfig, step_memory

GIB = 2**30


def points_per_program(points: int, seeds: int, max_runs: int | None) -> int:
    """Grid points per part when a program may hold at most `max_runs` runs."""
    if max_runs is None:
        return points
    return max(1, min(points, max_runs // max(seeds, 1)))


def cut(grid: Sequence[Any], per_part: int) -> list[list[Any]]:
    """`grid` in the fewest parts of at most `per_part` points, sizes within one point."""
    if not grid:
        return [[]]
    parts = math.ceil(len(grid) / max(per_part, 1))
    base, extra = divmod(len(grid), parts)
    out, start = [], 0
    for i in range(parts):
        size = base + (i < extra)
        out.append(list(grid[start:start + size]))
        start += size
    return out


def digest(payload: Any) -> str:
    """The 10-hex-digit hash every folder and record name uses."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()
                          ).hexdigest()[:10]


def split_program(program, parts: Sequence[Sequence[Mapping[str, Any]]]) -> list:
    """The program as `parts` (its grid cut), each its own name, identity and folder."""
    if len(parts) == 1:
        return [program]
    out = []
    for i, grid in enumerate(parts, 1):
        ident = digest({"program": program.ident, "part": list(grid)})
        suffix = f"part={i}-of-{len(parts)}"
        point = program.folder.name.rsplit("-", 1)[0]
        out.append(dataclasses.replace(
            program, grid=list(grid), ident=ident, name=f"{program.name},{suffix}",
            folder=program.folder.with_name(f"{point},{suffix}-{ident}")))
    return out


def runs_that_fit(per_run: int, shared: int, budget_bytes: float) -> int:
    """Runs whose step (`shared + runs * per_run` bytes) fits `budget_bytes`."""
    return max(0, math.floor((budget_bytes - shared) / max(per_run, 1)))


def memory_limit(exp, cfg: SweepConfig, splits_of: Callable[[dict], Mapping],
                 train_config: Callable[[Any], TrainConfig],
                 cache: MutableMapping[str, int] | None = None) -> Callable[[Any], int]:
    """`program -> runs` whose step fits `cfg.program_memory_gib` (`runs_that_fit`: one
    run's estimate of the program's model on its cell's data, first grid point);
    `train_config(program)`: its training settings (`sweep.train_config`). `cache`:
    figures by program identity and budget, kept by the caller (a campaign keeps them
    across machines: tracing a deep model for its estimate takes seconds)."""
    budget_gib = cfg.program_memory_gib
    if budget_gib is None:
        raise ValueError("memory_limit needs a budget: set program_memory_gib")

    def limit(program) -> int:
        key = f"{program.ident}@{cfg.program_memory_gib:g}GiB"
        if cache is not None and key in cache:
            return int(cache[key])
        model_fn = exp.model_fn(cfg, program.cell, program.static)
        base = train_config(program)
        # one run, on one device, vmapped alone: how the runs are placed is not a
        # program's identity, so it must not change where the grid is cut
        one = dataclasses.replace(base, seeds=base.seeds[:1], checkpoint_dir=None,
                                  shard_runs=False)
        total, shared = step_memory(model_fn, splits_of(program.cell), one, program.grid[:1])
        fits = runs_that_fit(total - shared, shared, budget_gib * GIB)
        if cache is not None:
            cache[key] = fits
        return fits

    return limit


def pack(programs: Sequence, cfg: SweepConfig,
         memory: Callable[[Any], int] | None = None) -> list:
    """Every program cut to `cfg.runs_per_program` runs and, with `memory` (`memory_limit`:
    needs the data), to the runs whose step fits `cfg.program_memory_gib`."""
    seeds = len(cfg.seeds)
    out = []
    for program in programs:
        limit = cfg.runs_per_program
        if memory is not None and cfg.program_memory_gib is not None:
            fits = memory(program)
            limit = fits if limit is None else min(limit, fits)
        per_part = points_per_program(len(program.grid), seeds, limit)
        out += split_program(program, cut(program.grid, per_part))
    return out
