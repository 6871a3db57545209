"""SWAN parameters saved under swan-jax 0.1.0's formation of V', Z', read as they trained.

Up to swan-jax 0.1.0 (and commit 6bf41f3) the field formed Phi's and Psi's weights from
the full raw matrices, `V' = V - V^T` and `Z' = Z + Z^T`; it now forms them as the
authors' code, `V' = triu(V, 1) - triu(V, 1)^T` and `Z' = triu(Z) + triu(Z)^T`
(`swan_jax.field.antisymmetric_weight`, `symmetric_weight`). Saved raw `V`, `Z` are
therefore another function today in every block whose Phi is antisymmetric
(`not cfg.plain_phi`: swan, swan-learn, swan-beta0) or that has Psi (`cfg.has_psi`:
swan, swan-learn, swan-ne, swan-learn-ne); adgn's and the baselines' read as before.
Today's field computes the old function exactly (bit for bit: only sums and negations
of the same numbers) from

    V_new = triu(V - V^T, 1)              antisymmetric_weight(V_new) = V - V^T
    Z_new = triu(Z + Z^T, 1) + diag(Z)    symmetric_weight(Z_new)     = Z + Z^T

on the last two axes (`[d, d]`, `[L, d, d]`, a leading runs axis alike): `from_old`.

Which files hold the old formation: checkpoints whose `fingerprint_format` is below
`TRIANGLES_FORMAT` (`swan_jax.train` refuses to resume them when `formation_changed`;
`swan_jax.runs.checkpoint.load_run_variables` converts their parameters, `read_saved`),
and exports of format 1 (`swan_jax.runs.export.load_model` converts them).

A SWAN block's parameters are found by name, as `swan_jax.analysis.swan_field_params`
does: a "field" dict holding `W`, `V`, `b` (`models.SWANBlock`'s). Whether its Phi is
antisymmetric is its `SWANConfig`'s, read from the model's module tree (`plain_phis`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from swan_jax.config import SWANConfig

# The first checkpoint `fingerprint_format` written by code that forms V', Z' from the
# triangles (`swan_jax.train._folder.FINGERPRINT_FORMAT` from 3 on).
TRIANGLES_FORMAT = 3
# The parameter name of a SWAN block's raw `W, V, Z, b, ...` (`models.SWANBlock`).
FIELD = "field"
# The keys of a checkpoint's state that hold parameters (not optimiser moments).
PARAMETER_KEYS = ("params", "best_params")
OLD = "swan-jax 0.1.0, whose field formed V - V^T and Z + Z^T from the full raw V, Z"


class OldFormation(ValueError):
    """Parameters saved under the old formation that cannot be converted here: the model
    is not known, or does not say which of its blocks' Phi is antisymmetric."""


def _is_field(node: Any) -> bool:
    return isinstance(node, Mapping) and {"W", "V", "b"} <= set(node)


def _map_fields(tree: Any, fn: Callable[[Mapping[str, Any]], Any]) -> Any:
    """`tree` (nested mappings) with each SWAN field dict `d` replaced by `fn(d)`."""
    if not isinstance(tree, Mapping):
        return tree
    return {k: fn(v) if k == FIELD and _is_field(v) else _map_fields(v, fn)
            for k, v in tree.items()}


def field_dicts(tree: Any) -> list[Mapping[str, Any]]:
    """Every SWAN block's raw parameters in a variable tree (a "field" dict with W, V, b)."""
    found: list[Mapping[str, Any]] = []
    _map_fields(tree, lambda field: found.append(field))
    return found


def plain_phis(model: Any) -> tuple[bool, ...]:
    """`cfg.plain_phi` of each SWAN block a Flax module tree declares: each `SWANConfig`
    among its fields, its submodules' recursively (a block built inside a compact method
    is no field and is not seen; `formation_changed` counts it as changed). Booleans
    only, so a module built while tracing may be read inside the trace."""
    found, stack = [], [model]
    while stack:
        value = stack.pop()
        if isinstance(value, SWANConfig):
            found.append(value.plain_phi)
        elif isinstance(value, nn.Module):
            stack.extend(getattr(value, f.name) for f in dataclasses.fields(value)
                         if f.name not in ("parent", "name"))
        elif isinstance(value, tuple | list):
            stack.extend(value)
        elif isinstance(value, Mapping):
            stack.extend(value.values())
    return tuple(found)


def formation_changed(phis: Sequence[bool], variables: Any) -> bool:
    """Whether `variables` saved under the old formation are another function today, for
    a model whose SWAN blocks' `plain_phi` are `phis` (`plain_phis(model)`): a block with
    Psi (`Z`), one whose Phi is antisymmetric (adgn's and the -ne variants' `A_hat X V`
    is not), or one the model does not declare."""
    fields = field_dicts(variables)
    if not fields:
        return False
    if any("Z" in field for field in fields):
        return True
    return len(phis) < len(fields) or not all(phis)


def _xp(a: Any) -> Any:
    return np if isinstance(a, np.ndarray) else jnp


def antisymmetric_from_old(v: Any) -> Any:
    """`triu(V - V^T, 1)`: the raw `V` whose `antisymmetric_weight` is the old `V - V^T`."""
    xp = _xp(v)
    return xp.triu(v - xp.swapaxes(v, -1, -2), 1)


def symmetric_from_old(z: Any) -> Any:
    """`triu(Z + Z^T, 1) + diag(Z)`: the raw `Z` whose `symmetric_weight` is the old
    `Z + Z^T` (its diagonal `2 Z_ii` is `symmetric_weight`'s doubling of `Z_ii`)."""
    xp = _xp(z)
    return xp.triu(z + xp.swapaxes(z, -1, -2), 1) + z * xp.eye(z.shape[-1], dtype=z.dtype)


def from_old(model: Any, variables: Any, *, where: str) -> Any:
    """`variables` of `model` saved under the old formation, as today's field reads them
    to compute the same function (unchanged without a changed block). `where` names
    the file in the `OldFormation` line raised when the model does not say which blocks'
    Phi is antisymmetric (blocks of both kinds, or blocks it does not declare)."""
    fields = field_dicts(variables)
    if not fields:
        return variables
    phis = plain_phis(model)
    plain = set(phis)
    if len(plain) != 1 or len(phis) < len(fields):
        raise OldFormation(f"{where} was saved by {OLD}, and its model does not say which "
                           f"of its {len(fields)} SWAN block(s) form Phi's weight as "
                           f"V - V^T: open it with swan-jax 0.1.0")
    convert_v = not plain.pop()

    def convert(field: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(field)
        if convert_v:
            out["V"] = antisymmetric_from_old(field["V"])
        if "Z" in field:
            out["Z"] = symmetric_from_old(field["Z"])
        return out

    return _map_fields(variables, convert)


def saved_format(meta: Mapping[str, Any] | None) -> int:
    """The `fingerprint_format` a checkpoint's JSON metadata says: 1 for `train`'s from
    before the number (a `fingerprint` alone); a checkpoint without either was not
    written by `train` (a `CheckpointStore` of one's own) and is read as it is."""
    meta = meta or {}
    return int(meta.get("fingerprint_format", 1 if "fingerprint" in meta else
                        TRIANGLES_FORMAT))


def read_saved(variables: Any, *, written_format: int, model: Any = None, key: str,
               where: str) -> Any:
    """A checkpoint's `key` entry (`variables`), written under `fingerprint_format`
    `written_format`, as today's code computes its function: unchanged from
    `TRIANGLES_FORMAT` on and without a changed SWAN block; converted with `model`
    (`from_old`) when `key` holds parameters; else refused (`OldFormation`, one line)."""
    if written_format >= TRIANGLES_FORMAT or not formation_changed(plain_phis(model),
                                                                   variables):
        return variables
    if model is None or key not in PARAMETER_KEYS:
        what = ("pass model= (the module it trained) to convert its parameters exactly, "
                "or open it with swan_jax.experiments.load_run / open_run, which do"
                if key in PARAMETER_KEYS else
                f"only its parameters ({', '.join(PARAMETER_KEYS)}) convert")
        raise OldFormation(f"{where} was saved by {OLD}; today's field reads them as "
                           f"another function: {what}")
    return from_old(model, variables, where=where)
