"""One configuration form for every experiment: a frozen dataclass whose settings are
declared once, read from TOML and written back, resolved, beside the results.

Every setting is a dataclass field declared with `swan_jax.settings.setting` (help,
type, range or choices, role). An experiment's configuration nests the training
settings (`train`, a `TrainConfig`) and the integrator's (`integrator`, an
`IntegratorConfig`) instead of copying them; each setting still has one flat name, used
alike by TOML keys, command-line flags (`--batch-size` is `batch_size`) and keyword
arguments (`SweepConfig(epochs=2)` is `SweepConfig(train=TrainConfig(epochs=2))`;
`cfg.epochs` reads `cfg.train.epochs`). The grid's axes are the settings declared
`grid=True` (learning rate and weight decay in `TrainConfig`; epsilon, gamma, beta, A_hat
and layers in `SWANConfig`; the width in `ModelShape`).

Resolution order: the experiment's packaged file `configs/<name>.toml` (the paper's
protocol), then a user's `--config run.toml`, then explicit command-line flags. Every
source goes through the same checks (`swan_jax.settings.check`): an unknown key is
refused naming the nearest valid one, a value of the wrong type or out of range is
refused with the setting's name. Roles: "train" settings decide the numbers (they name
checkpoint folders and must match on resume); "select" settings choose cells (running
one cell or all of them gives the same program for that cell); "io" settings say where
things go. TOML has no null: `"none"` stands for None.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from swan_jax.config import SWANConfig
from swan_jax.settings import (
    NONE,
    Kind,
    Retired,
    Setting,
    SettingError,
    check,
    check_fields,
    check_items,
    field_settings,
    kind_of,
    retired,
    setting,
)
from swan_jax.solvers import IntegratorConfig
from swan_jax.train import TrainConfig

PER_INVOCATION = ("resume", "overwrite")  # flags of one command, not of the configuration
CONFIG_DIR = Path(__file__).resolve().parent / "configs"
GROUPS: dict[str, type] = {"train": TrainConfig, "integrator": IntegratorConfig}


def select(default: Any = None, *, help: str, **spec: Any) -> Any:
    """A setting that chooses cells (not part of a program's identity)."""
    return setting(default, help=help, role="select", **spec)


def io(default: Any = None, *, help: str, **spec: Any) -> Any:
    """A setting that says where or how to run, not what (not part of the identity)."""
    return setting(default, help=help, role="io", **spec)


def script_name(experiment: str) -> str:
    """The console script of an experiment: 'node_classification' -> 'swan-node-classification'."""
    return "swan-" + experiment.replace("_", "-")


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """The model's width, declared as a grid axis (the experiments build the model)."""

    hidden: int = setting(64, low=1, grid=True,
                          help="channels of the encoder, the ODE state and the readout")


AXIS_SOURCES: tuple[type, ...] = (TrainConfig, SWANConfig, ModelShape)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One setting as the configuration sees it: its flat name, the group that holds it
    (None: the configuration itself; "grid": an axis), its type, declaration, default."""

    name: str
    group: str | None
    hint: Any
    spec: Setting
    default: Any


@functools.cache
def all_axes() -> dict[str, Entry]:
    """Every declared grid axis: name -> Entry (its values are lists of the field's type)."""
    out = {}
    for cls in AXIS_SOURCES:
        for name, (f, hint, spec) in field_settings(cls).items():
            if spec.grid:
                out[name] = Entry(name, "grid", hint, spec, f.default)
    return out


def _default(f: dataclasses.Field) -> Any:
    if f.default is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


@functools.cache
def schema(cls: type) -> dict[str, Entry]:
    """name -> Entry of every setting of a configuration class (grid axes apart)."""
    out: dict[str, Entry] = {}
    for f in dataclasses.fields(cls):
        if f.name in GROUPS:
            inner = [(n, e) for n, e in field_settings(GROUPS[f.name]).items()
                     if e[2].role != "internal" and not e[2].grid]
            found = [Entry(n, f.name, hint, spec, _default(g)) for n, (g, hint, spec) in inner]
        else:
            declared = field_settings(cls).get(f.name)
            if declared is None:
                raise TypeError(f"{cls.__name__}.{f.name} is not declared with setting()")
            found = [Entry(f.name, None, declared[1], declared[2], _default(f))]
        for entry in found:
            if entry.name in out:
                raise TypeError(f"{cls.__name__}: two settings are named {entry.name!r}")
            out[entry.name] = entry
    return out


@functools.cache
def retired_of(cls: type) -> dict[str, Retired]:
    """The removed settings of a configuration class and of its groups (`TrainConfig`)."""
    out = retired(cls)
    for f in dataclasses.fields(cls):
        if f.name in GROUPS:
            out.update(retired(GROUPS[f.name]))
    return out


def drop_retired(cls: type, values: dict[str, Any]) -> None:
    """Remove from `values` the removed settings that hold their last default (an older
    config.toml); refuse any other value of one (`SettingError`, its replacement)."""
    for name, old in retired_of(cls).items():
        if name in values:
            value = values.pop(name)
            if value != (NONE if old.default is None else old.default):
                raise SettingError(name, old.problem(), value)


def axes_of(cls: type) -> dict[str, Entry]:
    """The grid axes a configuration class accepts."""
    names = getattr(cls, "GRID_AXES", None)
    return {k: v for k, v in all_axes().items() if names is None or k in names}


def check_grid(cls: type, grid: Any) -> dict[str, tuple]:
    """Every axis known to `cls`, every value checked; scalars become one-value axes."""
    if not isinstance(grid, Mapping):
        raise SettingError("grid", f"must be a table of axes, got {grid!r}", grid)
    axes, out = axes_of(cls), {}
    for axis, values in grid.items():
        if axis not in axes:
            raise UnknownSetting([axis], list(axes), table="grid")
        entry = axes[axis]
        kind = Kind(kind_of(entry.hint).item, many=True)
        values = values if isinstance(values, list | tuple) else [values]
        out[axis] = check_items(f"grid.{axis}", values, kind, entry.spec)
    return out


class UnknownSetting(SettingError):
    """Keys no setting (or grid axis) has: names them, the valid ones, the nearest."""

    def __init__(self, names: list[str], valid: list[str], *, table: str | None = None,
                 where: str | None = None) -> None:
        self.names, self.valid, self.table = names, valid, table
        guesses = [difflib.get_close_matches(n, valid, n=1) for n in names]
        self.suggestions = {n: g[0] for n, g in zip(names, guesses, strict=True) if g}
        super().__init__(names[0], "unknown", names, where=where)

    def line(self, subject: str | None = None) -> str:
        what = "grid axis (axes)" if self.table == "grid" else "setting(s)"
        shown = ", ".join(self.valid[:12]) + (f", ... ({len(self.valid) - 12} more, see "
                                              f"--help)" if len(self.valid) > 12 else "")
        hint = "; ".join(f"did you mean {g!r} for {n!r}?" for n, g in self.suggestions.items())
        text = (f"unknown {what} {', '.join(self.names)}; valid: {shown}"
                + (f"; {hint}" if hint else ""))
        return f"{self.where}: {text}" if self.where else text


class _FlatSettings(type):
    """Keyword arguments by flat setting name: `epochs=2` lands in `train`."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*args, **route(cls, kwargs))


def route(cls: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Flat names of nested settings -> their group, each value checked."""
    entries, out = schema(cls), {}
    nested: dict[str, dict[str, Any]] = {}
    for key, value in kwargs.items():
        entry = entries.get(key)
        if entry is not None and entry.group is not None:
            nested.setdefault(entry.group, {})[key] = check(key, value, entry.hint, entry.spec)
        else:
            out[key] = value
    for group, changes in nested.items():
        base = out.get(group)
        base = base if base is not None else GROUPS[group]()
        out[group] = dataclasses.replace(base, **changes)
    return out


@dataclasses.dataclass(frozen=True)
class SweepConfig(metaclass=_FlatSettings):
    """What every experiment's configuration holds (experiments subclass it).

    `grid` maps each axis to its values: an experiment's `static_axes` change shapes
    (one compiled program per combination), every other axis is numeric (vmapped; a
    learning-rate or weight-decay axis sets the optimiser's, per run). `GRID_AXES`
    names the axes a subclass accepts (None: every declared axis).
    """

    GRID_AXES: ClassVar[tuple[str, ...] | None] = None

    grid: Mapping[str, tuple] = setting(
        default_factory=lambda: {"learning_rate": (1e-3,)}, role="grid",
        help="the grid: axis -> values (static axes: one program each; numeric: vmapped)")
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    integrator: IntegratorConfig = dataclasses.field(default_factory=IntegratorConfig)
    data_options: Mapping[str, Any] = setting(
        default_factory=dict, help="more keyword arguments of the data loader (API use)")
    results_dir: Path = io(Path("results"), help="results.json, table.md, the figure and "
                                                 "the resolved config.toml")
    checkpoint_dir: Path | None = io(None, help="program folders: checkpoints, run.json, "
                                                "history.jsonl (default <results-dir>/"
                                                "checkpoints)")
    cache_dir: Path | None = io(None, help="processed-data cache (default $SWAN_CACHE_DIR, "
                                           "else the user cache folder's processed/)")
    overwrite: bool = io(False, help="replace existing results and program folders")
    skip_missing: bool = io(False, help="run only the cells whose data is present (a "
                                        "partial run, so stated)")
    allow_diverged: bool = io(False, help="exit 0 even when runs diverged (they are still "
                                          "reported on stderr)")
    runs_per_program: int | None = io(None, low=1, help="at most this many runs (grid "
                                                        "points x seeds) per compiled "
                                                        "program: a static point's grid is "
                                                        "cut into the fewest such programs "
                                                        "(none: one program per static "
                                                        "point)")
    program_memory_gib: float | None = io(None, low=1e-6, help="cut a static point's grid "
                                          "into the fewest programs whose training step "
                                          "fits this many GiB by the memory check's "
                                          "estimate (the same on every machine: give the "
                                          "smaller device's; none: no cut)")
    distributed: bool = io(False, help="one process of a multi-host job: "
                                       "jax.distributed.initialize() first (SLURM found by "
                                       "JAX; else JAX_COORDINATOR_ADDRESS, "
                                       "SWAN_NUM_PROCESSES, SWAN_PROCESS_ID); process 0 "
                                       "writes")

    def __post_init__(self) -> None:
        for name, value in check_fields(self).items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "grid", check_grid(type(self), self.grid))
        for group, cls in GROUPS.items():
            if not isinstance(getattr(self, group), cls):
                raise SettingError(group, f"must be a {cls.__name__}, got "
                                          f"{getattr(self, group)!r}")
        if self.train.resume and self.overwrite:
            raise SettingError("overwrite", "cannot be combined with resume: resume "
                                            "continues the checkpoints that overwrite "
                                            "deletes; give one of them")

    def __getattr__(self, name: str) -> Any:
        """`cfg.epochs` reads `cfg.train.epochs` (every nested setting by its flat name)."""
        entry = schema(type(self)).get(name) if not name.startswith("_") else None
        if entry is None or entry.group is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(object.__getattribute__(self, entry.group), name)

    def checkpoint_root(self) -> Path:
        return Path(self.checkpoint_dir or Path(self.results_dir) / "checkpoints")

    def identity(self) -> dict[str, Any]:
        """The "train" settings: what decides a program's numbers besides its grid.
        Settings declared `since_default` count only when they leave their default, so
        folders named before they existed keep their names."""
        out = {}
        for name, entry in schema(type(self)).items():
            value = getattr(self, name)
            if entry.spec.role == "train" and not (entry.spec.since_default
                                                   and value == entry.default):
                out[name] = _plain(value)
        return out


def _plain(value: Any) -> Any:
    """TOML / JSON-ready: tuples as lists, paths as strings, mappings recursively."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def to_dict(cfg: SweepConfig) -> dict[str, Any]:
    """Every setting by its flat name, JSON-ready (None stays None)."""
    return {name: _plain(getattr(cfg, name)) for name in schema(type(cfg))}


def valid_names(cls: type) -> list[str]:
    """Setting names in the order messages list them: the grid and seeds first."""
    names = list(schema(cls))
    return ["grid", "seeds"] + [n for n in names if n not in ("grid", "seeds")]


C = TypeVar("C", bound=SweepConfig)  # a configuration class, and what it loads


def from_dict(cls: type[C], values: Mapping[str, Any], *, source: str = "config",
              base: C | None = None, experiment: str | None = None) -> C:
    """`base` (or `cls()`) with `values` applied, each checked as its declaration says.

    Raises `SettingError` (its `where` is `source`): an unknown key (naming the nearest
    valid one), a value of the wrong type or out of range, an `experiment` key naming
    another experiment than `experiment`.
    """
    values = dict(values)
    named = values.pop("experiment", None)
    try:
        if named is not None and experiment is not None and named != experiment:
            raise SettingError("experiment", f"is {named!r}, but this command runs "
                                             f"{experiment!r}: run it with "
                                             f"{script_name(str(named))} --config {source}",
                               named)
        drop_retired(cls, values)
        entries, axes = schema(cls), axes_of(cls)
        unknown = [k for k in values if k not in entries and k not in axes]
        if unknown:
            raise UnknownSetting(unknown, valid_names(cls) + sorted(axes))
        grid = check_grid(cls, values.pop("grid", {}))
        for axis in [k for k in values if k in axes and k not in entries]:  # `lr = 0.1`
            if axis in grid:
                raise SettingError(axis, "is given twice: at the top level and in [grid]")
            grid.update(check_grid(cls, {axis: values.pop(axis)}))
        changes = {k: check(k, v, entries[k].hint, entries[k].spec) for k, v in values.items()}
        if grid:
            changes["grid"] = {**base.grid, **grid} if base is not None else grid
        return dataclasses.replace(base if base is not None else cls(), **changes)
    except SettingError as err:
        err.where = source
        raise
    except ValueError as err:  # a check across settings (warmup_epochs < epochs, ...)
        raise SettingError("", str(err), where=source) from None


def load_toml(cls: type[C], path: str | Path, base: C | None = None,
              *, experiment: str | None = None) -> C:
    """The configuration in a TOML file (on top of `base`); `experiment`: refuse a file
    whose `experiment = ...` names another one."""
    path = Path(path)
    try:
        values = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SettingError("", f"--config {path}: no such file") from None
    except IsADirectoryError:
        raise SettingError("", f"--config {path}: a folder, not a file") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise SettingError("", f"--config {path}: not valid TOML ({err})") from None
    return from_dict(cls, values, source=str(path), base=base, experiment=experiment)


def _toml_value(value: Any) -> str:
    if value is None:
        return f'"{NONE}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("nan" if math.isnan(value)
                                                         else ("inf" if value > 0 else "-inf"))
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} to TOML")


def dump_toml(cfg: SweepConfig, experiment: str) -> str:
    """The resolved configuration as TOML (`load_toml` reads it back to an equal config)."""
    values = {k: v for k, v in to_dict(cfg).items() if k not in PER_INVOCATION}
    tables = {k: v for k, v in values.items() if isinstance(v, dict)}
    lines = [f"# swan-jax {experiment}: the resolved configuration of the last run here.",
             f"# Rerun it: {script_name(experiment)} --config <this file>",
             f'experiment = "{experiment}"']
    lines += [f"{k} = {_toml_value(v)}" for k, v in values.items() if k not in tables]
    for name, table in tables.items():
        if not table:  # an empty table is the default
            continue
        lines += ["", f"[{name}]"] + [f"{_toml_key(k)} = {_toml_value(v)}"
                                      for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else _toml_value(key)


# What may differ between a saved run and its `--resume`: the epoch count (resume extends
# a program), and every setting that is not "train" (where things go, how they run,
# which cells: a program's numbers do not follow them).
RESUME_MAY_CHANGE = ("epochs",)


def _json_ready(value: Any) -> Any:
    """A value as it reads back from results.json (tuples as lists, paths as strings)."""
    import json

    return json.loads(json.dumps(_plain(value), default=str))


def changed_settings(cfg: SweepConfig, saved: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """`(setting, saved value, value now)` of every setting that decides the numbers and
    differs from `saved` (the `config` a results.json holds: `to_dict` of its run).

    Compared: the grid axis by axis (an axis only one side has: None on the other), and
    every "train" setting but `epochs`; a setting the saved run predates compares with
    its default."""
    out: list[tuple[str, Any, Any]] = []
    old_grid = _json_ready(saved.get("grid") or {})
    new_grid = _json_ready(cfg.grid)
    for axis in [*old_grid, *(a for a in new_grid if a not in old_grid)]:
        if old_grid.get(axis) != new_grid.get(axis):
            out.append((axis, old_grid.get(axis), new_grid.get(axis)))
    for name, entry in schema(type(cfg)).items():
        if entry.spec.role != "train" or name in RESUME_MAY_CHANGE or name == "grid":
            continue
        now = _json_ready(getattr(cfg, name))
        before = saved.get(name, _json_ready(entry.default))
        if before != now:
            out.append((name, before, now))
    return out


def shown_value(value: Any) -> str:
    """A setting's value as a command line writes it: lists comma-separated, None "none"."""
    if value is None:
        return NONE
    if isinstance(value, list | tuple):
        return ",".join(shown_value(v) for v in value)
    return str(value)
