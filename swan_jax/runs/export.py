"""A trained model as two files any swan-jax install opens: `save_model` / `load_model`.

An export is a folder with

* `model.json`: the Flax module tree as data (`model_spec`): every module's class, by its
  import path, and its fields (numbers, strings, tuples, `SWANConfig`s, activation
  functions by name), plus the task level and where the model came from;
* `params.msgpack`: the variables, written by `flax.serialization.to_bytes`.

`load_model(folder)` rebuilds the module and its variables with swan-jax alone (an export
of format 1, swan-jax 0.1.0's, converted to compute what it computed there): no
experiment configuration, run folder or orbax checkpoint is read. It imports classes and
functions from `swan_jax`, `flax` and `jax` only, so a spec cannot make it run other code.
`describe_models` writes the same specs into a `train()` run's `run.json`.

This module stands on the core alone, below `swan_jax.train`: exporting a trained run
from its folder (`export_run`, which reads `run.json` and the best epoch) is
`swan_jax.experiments.runs`'.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import serialization

from swan_jax.config import concrete_hparams
from swan_jax.models.formation import OldFormation, from_old

SPEC_FILE = "model.json"
PARAMS_FILE = "params.msgpack"
# 1: swan-jax 0.1.0's, whose field formed V - V^T and Z + Z^T from the full raw V, Z;
#    `load_model` converts a SWAN model's parameters to compute that very function
#    (`swan_jax.models.formation.from_old`). 2: the field forms them from the triangles.
SPEC_FORMAT = 2
OLD_FORMATION_FORMAT = 1
# Where a spec may take classes and functions from (`load_model` refuses the rest).
ALLOWED_PREFIXES = ("swan_jax.", "flax.", "jax.")
# Public homes of activation functions, searched in order for a function's name.
_FUNCTION_HOMES = ("jax.nn", "jax.numpy", "flax.linen")


class ExportError(ValueError):
    """A module cannot be written as a spec, or a spec cannot be read back."""


def _path_of(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def _function_name(fn: Any) -> str:
    fn_name = getattr(fn, "__name__", "")
    for home in _FUNCTION_HOMES:
        if getattr(importlib.import_module(home), fn_name, None) is fn:
            return f"{home}.{fn_name}"
    name = _path_of(fn)
    if not name.startswith(ALLOWED_PREFIXES) or "<" in name:
        raise ExportError(f"cannot export the function {name}: only functions of swan_jax, "
                          f"flax and jax are written into a model spec")
    return name


def _encode(value: Any) -> Any:
    """A module field as JSON (tagged dicts for modules, dataclasses, tuples, functions)."""
    if isinstance(value, nn.Module):
        return model_spec(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"dataclass": _path_of(type(value)),
                "fields": {f.name: _encode(getattr(value, f.name))
                           for f in dataclasses.fields(value)}}
    if isinstance(value, tuple | list):
        return {"tuple": [_encode(v) for v in value]}
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, jax.Array) or hasattr(value, "dtype"):
        if getattr(value, "ndim", 0) != 0:
            raise ExportError(f"cannot export an array field of shape {value.shape}")
        value = value.item()
    if isinstance(value, int | float):
        return value
    if callable(value):
        return {"function": _function_name(value)}
    raise ExportError(f"cannot export a field of type {type(value).__name__}")


def model_spec(module: nn.Module) -> dict[str, Any]:
    """`module` (a Flax linen module tree, built with concrete hyper-parameters) as JSON data.

    Raises ExportError naming a field that cannot be written (arrays, lambdas, classes
    outside swan_jax / flax / jax).
    """
    cls = type(module)
    if not _path_of(cls).startswith(ALLOWED_PREFIXES):
        raise ExportError(f"cannot export {_path_of(cls)}: a spec names modules of swan_jax "
                          f"and flax only")
    fields = {f.name: _encode(getattr(module, f.name)) for f in dataclasses.fields(module)
              if f.name not in ("parent", "name")}
    return {"module": _path_of(cls), "fields": fields}


def describe_models(model_fn, grid) -> dict[str, Any]:
    """`train(..., describe=describe_models(model_fn, grid))` for a run of your own model:
    writes each grid point's `model_spec` into `run.json`, so `swan-predict` and
    `export_run` can open the run folder (sweeps describe their runs themselves).

    `model_fn` is called once per grid point with its values as NumPy float32 scalars,
    the numbers training traces (a traced choice such as `adjacency` by its code:
    `config.concrete_hparams`).
    """
    points = []
    for point in grid:
        hp = concrete_hparams(point)
        points.append({"hparams": json.loads(json.dumps(dict(point), default=_plain)),
                       "model": model_spec(model_fn(hp))})
    return {"models": points}


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else str(value)


def _resolve(path: str) -> Any:
    if not path.startswith(ALLOWED_PREFIXES):
        raise ExportError(f"model spec names {path}, outside swan_jax / flax / jax")
    module, _, name = path.rpartition(".")
    try:
        obj = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        raise ExportError(f"model spec names {path}, which this swan-jax does not have "
                          f"({err})") from None
    return obj


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "module" in value:
        return build_model(value)
    if "dataclass" in value:
        return _resolve(value["dataclass"])(**{k: _decode(v)
                                               for k, v in value["fields"].items()})
    if "tuple" in value:
        return tuple(_decode(v) for v in value["tuple"])
    if "function" in value:
        return _resolve(value["function"])
    raise ExportError(f"unreadable model spec entry {sorted(value)}")


def build_model(spec: Mapping[str, Any]) -> nn.Module:
    """The module a `model_spec` describes."""
    cls = _resolve(spec["module"])
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ExportError(f"model spec names {spec['module']}, which is not a Flax module")
    return cls(**{k: _decode(v) for k, v in spec["fields"].items()})


def save_model(path: str | Path, model: nn.Module, variables: Any, *, task_level: str,
               source: Mapping[str, Any] | None = None) -> Path:
    """Write `model.json` and `params.msgpack` into the folder `path` (created)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ExportError(f"{path} is a file; an export is a folder (choose another path)")
    payload = {"format": SPEC_FORMAT, "task_level": task_level, "model": model_spec(model),
               "source": dict(source or {})}
    path.mkdir(parents=True, exist_ok=True)
    (path / PARAMS_FILE).write_bytes(serialization.to_bytes(
        jax.tree_util.tree_map(jnp.asarray, variables)))
    (path / SPEC_FILE).write_text(json.dumps(payload, indent=2) + "\n")
    return path


@dataclasses.dataclass(frozen=True)
class LoadedModel:
    """What `load_model` returns: the module, its variables and the export's facts.

    `model.apply(variables, graph)` predicts; `swan_jax.runs.inference.predict(loaded.model,
    loaded.variables, dataset, level=loaded.task_level)` does it over a whole data set.
    """

    model: nn.Module
    variables: Any
    task_level: str
    source: dict[str, Any]


def load_model(path: str | Path) -> LoadedModel:
    """Open an export folder written by `export_run` / `save_model` (swan-jax alone)."""
    path = Path(path)
    spec_file, params_file = path / SPEC_FILE, path / PARAMS_FILE
    for needed in (spec_file, params_file):
        if not needed.is_file():
            raise FileNotFoundError(f"{path} is not a swan-jax export: {needed.name} is "
                                    f"missing (write one with "
                                    f"swan_jax.experiments.runs.export_run)")
    payload = json.loads(spec_file.read_text())
    if payload.get("format") not in (OLD_FORMATION_FORMAT, SPEC_FORMAT):
        raise ExportError(f"{spec_file} has format {payload.get('format')!r}; this swan-jax "
                          f"reads formats {OLD_FORMATION_FORMAT} and {SPEC_FORMAT}")
    model = build_model(payload["model"])
    variables = serialization.msgpack_restore(params_file.read_bytes())
    if payload["format"] == OLD_FORMATION_FORMAT:
        try:
            variables = from_old(model, variables, where=str(path))
        except OldFormation as err:
            raise ExportError(str(err)) from None
    return LoadedModel(model, variables, payload["task_level"], payload.get("source", {}))
