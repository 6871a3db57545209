"""The campaign's cells (`reproductions/campaign/plan.toml`: its header says their keys),
and the command that runs one: a sweep cell's experiment's own command with `--config
<run>/cell.toml --resume` in its run folder `<work>/<id with / as __>/`, a measurement
cell's command (`MEASUREMENTS`) with its `config` as flags (it writes
`reproductions/<experiment>-<device kind>/` itself)."""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PLAN_FILE = Path("reproductions/campaign/plan.toml")
SWEEPS = ("transfer", "graphprop", "lrgb", "node_classification")
MEASUREMENTS = {"runtime": "benchmarks.runtime_table", "jacobian": "reproductions.jacobian"}


class PlanError(ValueError):
    """A cells file that cannot be used (one line naming the file and the cell)."""


@dataclasses.dataclass(frozen=True)
class Cell:
    """One cell of the campaign (see the module's docstring)."""

    id: str
    experiment: str
    priority: int
    status: str = "runnable"
    config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    table: str = ""
    note: str = ""

    @property
    def slug(self) -> str:
        """The run folder's name: the id with `/` as `__`."""
        return self.id.replace("/", "__")

    @property
    def group(self) -> str:
        return self.id.split("/")[0]

    @property
    def runnable(self) -> bool:
        return self.status == "runnable"

    @property
    def measurement(self) -> bool:
        return self.experiment in MEASUREMENTS


def load_cells(path: str | Path = PLAN_FILE) -> list[Cell]:
    """The cells of `path`, in priority order (the file's order among equals)."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text()).get("cell") or []
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise PlanError(f"{path}: {err}") from None
    fields = {f.name for f in dataclasses.fields(Cell)}
    cells = []
    for index, item in enumerate(raw):
        unknown = sorted(set(item) - fields)
        if unknown or "id" not in item:
            raise PlanError(f"{path}: cell {index + 1} ({item.get('id', 'no id')}): "
                            f"unknown key(s) {', '.join(unknown) or 'none'}, or no id; "
                            f"keys: {', '.join(sorted(fields))}")
        if item.get("experiment") not in (*SWEEPS, *MEASUREMENTS):
            raise PlanError(f"{path}: cell {item['id']}: experiment "
                            f"{item.get('experiment')!r} is none of "
                            f"{', '.join((*SWEEPS, *MEASUREMENTS))}")
        cells.append(Cell(**item))
    return sorted(cells, key=lambda c: c.priority)


def matching(cells: Sequence[Cell], patterns: Sequence[str]) -> list[Cell]:
    """The cells whose id matches one of the fnmatch `patterns` (all when none)."""
    return [c for c in cells if not patterns or any(fnmatch.fnmatch(c.id, p)
                                                    for p in patterns)]


def toml_value(value: Any) -> str:
    """`value` as TOML (inline tables for mappings; JSON's scalars are TOML's)."""
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}"
                                for k, v in value.items()) + " }"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "true" if value is True else "false" if value is False else json.dumps(value)


def cell_toml(cell: Cell, run: Path) -> str:
    """The `--config` file of a sweep cell run in `run` (checkpoints under it)."""
    values = {"experiment": cell.experiment, **cell.config, "results_dir": str(run),
              "checkpoint_dir": str(run / "checkpoints"), "progress": False}
    return "".join(f"{k} = {toml_value(v)}\n" for k, v in values.items())


def command(cell: Cell, run: Path, reproductions: Path) -> list[str]:
    """The command line that runs `cell` in `run` (resuming whatever is there)."""
    if cell.measurement:
        flags = [f"--{k.replace('_', '-')}" + ("" if v is True else f"={v}")
                 for k, v in cell.config.items() if v is not False and v is not None]
        work = ["--work", str(run / "checkpoints")] if cell.experiment == "jacobian" else []
        return [sys.executable, "-m", MEASUREMENTS[cell.experiment], *flags, *work,
                "--reproductions", str(reproductions)]
    return [sys.executable, "-m", f"swan_jax.experiments.{cell.experiment}",
            "--config", str(run / "cell.toml"), "--resume"]
