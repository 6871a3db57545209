"""One configuration form for every experiment: a frozen dataclass, read from TOML and
written back, resolved, beside the results.

Resolution order: the experiment's packaged file `configs/<name>.toml` (the paper's
protocol), then a user's `--config run.toml`, then explicit command-line flags. Each
field has a role: "train" fields decide the numbers (they name checkpoint folders and
must match on resume); "select" fields choose cells (running one cell or all of them
gives the same program for that cell); "io" fields say where things go. TOML has no
null: `"none"` stands for None.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

NONE = "none"
PER_INVOCATION = ("resume", "overwrite")  # flags of one command, not of the configuration
CONFIG_DIR = Path(__file__).resolve().parent / "configs"


def select(default: Any = None) -> Any:
    """A field that chooses cells (not part of a program's identity)."""
    return dataclasses.field(default=default, metadata={"role": "select"})


def io(default: Any = None) -> Any:
    """A field that says where or how to run, not what (not part of the identity)."""
    return dataclasses.field(default=default, metadata={"role": "io"})


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """What every experiment's configuration holds (experiments subclass it).

    `grid` maps each axis to its values: an experiment's `static_axes` change shapes
    (one compiled program per combination), every other axis is numeric (vmapped; a
    learning-rate or weight-decay axis sets the optimiser's, per run).
    """

    grid: Mapping[str, tuple] = dataclasses.field(
        default_factory=lambda: {"learning_rate": (1e-3,)}, metadata={"role": "grid"})
    seeds: tuple[int, ...] = (0,)
    epochs: int = 100
    patience: int | None = None
    batch_size: int = 32
    optimizer: str = "adam"
    grad_clip: float | None = None
    schedule: str = "constant"
    warmup_epochs: int = 0
    plateau_factor: float = 0.5
    plateau_patience: int = 10
    solver: str = "euler"
    rtol: float = 1e-3
    atol: float = 1e-6
    adjoint: str = "recursive"
    data_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    results_dir: Path = io(Path("results"))
    checkpoint_dir: Path | None = io(None)  # default: <results_dir>/checkpoints
    cache_dir: Path | None = io(None)  # default: $SWAN_CACHE_DIR, else cache/
    save_checkpoints: bool = io(True)
    resume: bool = io(False)
    overwrite: bool = io(False)
    progress: bool = io(True)
    skip_missing: bool = io(False)
    allow_more_params: bool = io(False)
    data_parallel: bool = False

    def checkpoint_root(self) -> Path:
        return Path(self.checkpoint_dir or Path(self.results_dir) / "checkpoints")

    def identity(self) -> dict[str, Any]:
        """The "train" fields: what decides a program's numbers besides its grid."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.metadata.get("role", "train") == "train"}


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
    """Every field, JSON-ready (None stays None)."""
    return {f.name: _plain(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)}


def _coerce(name: str, value: Any, hint: Any) -> Any:
    """`value` read from TOML / JSON as the field's type (lists -> tuples, str -> Path)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    optional = type(None) in typing.get_args(hint)
    if value is None or (optional and value == NONE):
        if not optional:
            raise ValueError(f"setting {name!r} cannot be {NONE!r}")
        return None
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return _coerce(name, value, args[0])
    origin = typing.get_origin(hint) or hint
    if origin is tuple:
        items = value if isinstance(value, list | tuple) else [value]
        inner = typing.get_args(hint)[0] if typing.get_args(hint) else Any
        return tuple(_coerce(name, v, inner) for v in items)
    if origin in (Mapping, dict) or isinstance(value, Mapping):
        if name == "grid":
            return {k: tuple(v) if isinstance(v, list | tuple) else (v,)
                    for k, v in value.items()}
        return dict(value)
    if hint is Path:
        return Path(value)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def from_dict(cls: type[SweepConfig], values: Mapping[str, Any], *, source: str = "config",
              base: SweepConfig | None = None) -> SweepConfig:
    """`base` (or `cls()`) with `values` applied; unknown keys name the valid ones."""
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(values) - set(hints))
    if unknown:
        raise ValueError(f"{source}: unknown setting(s) {', '.join(unknown)}; valid: "
                         f"{', '.join(f.name for f in dataclasses.fields(cls))}")
    changes = {k: _coerce(k, v, hints[k]) for k, v in values.items()}
    if base is not None and "grid" in changes:  # a file's grid updates the axes it names
        changes["grid"] = {**base.grid, **changes["grid"]}
    return dataclasses.replace(base if base is not None else cls(), **changes)


def load_toml(cls: type[SweepConfig], path: str | Path, base: SweepConfig | None = None
              ) -> SweepConfig:
    """The configuration in a TOML file (on top of `base`)."""
    path = Path(path)
    try:
        values = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"--config {path}: no such file") from None
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"--config {path}: not valid TOML ({err})") from None
    values.pop("experiment", None)  # written for the reader; the command decides
    return from_dict(cls, values, source=str(path), base=base)


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
             f"# Rerun it: python -m swan_jax.experiments.{experiment} --config <this file>",
             f'experiment = "{experiment}"']
    lines += [f"{k} = {_toml_value(v)}" for k, v in values.items() if k not in tables]
    for name, table in tables.items():
        lines += ["", f"[{name}]"] + [f"{_toml_key(k)} = {_toml_value(v)}"
                                      for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else _toml_value(key)
