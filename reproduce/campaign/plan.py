"""The campaign's plan: every cell of the paper, at the paper's protocol, with its cost.

The committed file `reproductions/campaign/plan.toml` holds one `[[cell]]` table per
paper cell (in the order the campaign takes them: `priority`, then the file's order):

    id        "transfer/line/10/swan": the experiment, then the cell
    experiment  a module of `swan_jax.experiments` (transfer, graphprop, lrgb, ...)
    table     the paper's figure or table (its LaTeX label)
    priority  smaller first (the issue's order: transfer, Peptides-func, GraphProp, ...)
    status    "runnable": `config` is a complete sweep; "not implemented" (no code for it);
              "needs code": no sweep does it yet (the note says what is missing);
              "after <id>": waits for another cell (a screening's best point)
    config    changes to the experiment's packaged configuration (its paper protocol):
              the cell's selectors, and any protocol value the package does not hold
    cost_minutes  per device kind (cpu-2core, h100, h200): the wall time of the cell's
              full protocol, every program to its epoch cap (early stopping only helps)
    basis     how the cost was obtained: per GPU kind "measured" (its programs' shapes
              timed: probe or campaign, device, date, shape; `shapes.py`) or "modelled",
              then the model (`defaults.py`)
    measured_minutes  per device kind, the part of cost_minutes priced from measured
              programs (absent: none)

`write_default_plan` regenerates the file from the experiments' own programs
(`Experiment.plan`) and the cost model `estimate_minutes`; edit the file by hand to
reorder or to correct a cost, the campaign reads only the file.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

DEVICE_KINDS = ("cpu-2core", "h100", "h200")
STATUSES = ("runnable", "not implemented", "needs code")
PLAN_FILE = Path("reproductions/campaign/plan.toml")


class PlanError(ValueError):
    """A plan file that cannot be used (one line naming the file and the entry)."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """One paper cell of the plan."""

    id: str
    experiment: str
    table: str
    priority: int
    status: str
    config: Mapping[str, Any]
    cost_minutes: Mapping[str, float]
    basis: str = ""
    note: str = ""
    measured_minutes: Mapping[str, float] = dataclasses.field(default_factory=dict)

    @property
    def runnable(self) -> bool:
        return self.status == "runnable"

    @property
    def slug(self) -> str:
        """A file name for the cell (bundles, work folders)."""
        return self.id.replace("/", "__")

    def cost(self, device_kind: str) -> float:
        return float(self.cost_minutes.get(device_kind, math.inf))


def _entry(raw: Mapping[str, Any], path: Path, index: int) -> Entry:
    missing = [k for k in ("id", "experiment", "priority", "status") if k not in raw]
    if missing:
        raise PlanError(f"{path}: cell #{index + 1} has no {', '.join(missing)}")
    status = str(raw["status"])
    if status not in STATUSES and not status.startswith("after "):
        raise PlanError(f"{path}: cell {raw['id']}: status {status!r} is not one of "
                        f"{', '.join(STATUSES)} or 'after <id>'")
    return Entry(id=str(raw["id"]), experiment=str(raw["experiment"]),
                 table=str(raw.get("table", "")), priority=int(raw["priority"]),
                 status=status, config=dict(raw.get("config") or {}),
                 cost_minutes={k: float(v) for k, v in (raw.get("cost_minutes") or {}).items()},
                 basis=str(raw.get("basis", "")), note=str(raw.get("note", "")),
                 measured_minutes={k: float(v) for k, v in
                                   (raw.get("measured_minutes") or {}).items()})


def load_plan(path: str | Path = PLAN_FILE) -> list[Entry]:
    """The plan's cells in the order the campaign takes them (priority, then file order)."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise PlanError(f"{path}: no such plan file (regenerate it: python -m "
                        f"reproduce.campaign plan --write)") from None
    except tomllib.TOMLDecodeError as err:
        raise PlanError(f"{path}: not valid TOML ({err})") from None
    entries = [_entry(c, path, i) for i, c in enumerate(raw.get("cell") or [])]
    ids = [e.id for e in entries]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise PlanError(f"{path}: cell ids used twice: {', '.join(dup)}")
    order = {e.id: i for i, e in enumerate(entries)}
    return sorted(entries, key=lambda e: (e.priority, order[e.id]))


# ======================================================================== writing


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, Sequence):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f'"{k}" = {_toml(v)}' for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {value!r} to TOML")


def dump_plan(entries: Sequence[Entry], header: str) -> str:
    """The plan file's text (`load_plan` reads it back to equal entries)."""
    lines = [f"# {line}".rstrip() for line in header.strip().splitlines()]
    for e in entries:
        lines += ["", "[[cell]]"]
        for field in dataclasses.fields(Entry):
            value = getattr(e, field.name)
            if field.name in ("basis", "note", "measured_minutes") and not value:
                continue
            shown = dict(value) if isinstance(value, Mapping) else value
            lines.append(f"{field.name} = {_toml(shown)}")
    return "\n".join(lines) + "\n"
