"""Configuration of the SWAN vector field (docs/conventions.md, "The vector field").

`SWANConfig` is a JAX pytree. Its settings declared `traced` (`setting(..., traced=True)`:
`beta`, `gamma`, `epsilon`, `adjacency`) are leaves, so one compiled program can serve
(and `jax.vmap` can batch) configurations that differ only in those values; everything
that changes shapes or code paths (`variant`, `num_layers`, `activation`, weight
sharing) is static metadata. A traced choice (`adjacency`) is held by its name when
known ("sym", "adj": static) and by its code when traced (a leaf, one per run); below the
configuration it has one form, its code (`adjacency_code`, `ADJACENCY_CODES`: 1 sym,
0 adj), known or traced: the two differ only in the values of `A_hat`, so one program
can train both.

A grid point becomes a configuration in one place, `SWANConfig.from_point(point,
**fixed)`: the point's SWAN settings (names, numbers or a run's traced numbers) and the
settings its caller fixes. A new setting is its declaration here and its use in
`swan_jax.field`: the checks, the pytree, the grid axes and the bridge read the
declarations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from swan_jax.graph.protocol import ADJACENCIES as ADJACENCIES
from swan_jax.graph.protocol import ADJACENCY_CODES as ADJACENCY_CODES
from swan_jax.graph.protocol import AdjacencyCode
from swan_jax.settings import (
    check_keywords,
    field_settings,
    grid_source,
    known_choice,
    setting,
    traced_value,
)

VARIANTS: tuple[str, ...] = (
    "swan",
    "swan-learn",
    "swan-ne",
    "swan-learn-ne",
    "swan-beta0",
    "adgn",
)
ACTIVATIONS: tuple[str, ...] = ("tanh", "relu", "sigmoid", "gelu", "identity")

# Which of the variants learn their operators from the encoded input (Appendix A.2).
LEARNED_VARIANTS: frozenset[str] = frozenset({"swan-learn", "swan-learn-ne"})
# Variants whose weight-space term is the non-symmetrised `A_hat X V`.
PLAIN_PHI_VARIANTS: frozenset[str] = frozenset({"swan-ne", "swan-learn-ne", "adgn"})
# Variants without the space-antisymmetric term Psi.
NO_PSI_VARIANTS: frozenset[str] = frozenset({"swan-beta0", "adgn"})


def concrete_hparams(point: Mapping[str, Any]) -> dict[str, Any]:
    """One grid point as `model_fn`'s `hp` outside a traced program (building a model to
    describe, count, export or predict with): the float32 numbers training traces, a
    traced choice by its code (`traced_value`), known here, so the model selects the
    choice statically, whose values the traced code selects bit for bit."""
    return {name: np.float32(traced_value(name, value)) for name, value in point.items()}


@grid_source  # its grid axes are any grid's: `train` checks them without importing it
@dataclasses.dataclass(frozen=True)
class SWANConfig:
    """Hyper-parameters of one SWAN ODE block.

    Attributes:
      variant: one of `VARIANTS` (docs/conventions.md table: swan, swan-learn, swan-ne,
        swan-learn-ne, swan-beta0, adgn).
      adjacency: `"sym"` for `A_hat = D^-1/2 A D^-1/2`, `"adj"` for `A_hat = A`; or
        its code (`ADJACENCY_CODES`: 1 sym, 0 adj): a traced run's, so that one program
        trains runs of both, is held as it is; a known one by its name. The field reads
        it as its code, `adjacency_code`.
      beta: weight of the space-antisymmetric term Psi (ignored by swan-beta0, adgn).
      gamma: stabilising shift, the field uses `W - W^T - gamma I`.
      epsilon: step size; terminal time is `num_layers * epsilon`.
      num_layers: number of Euler steps (the paper's layers), at least 1.
      activation: the field's sigma.
      weight_sharing: one `W, V, Z, b` for every step (default); if False the
        parameters carry a leading axis of length `num_layers`.
      edge_activation: sigma inside the edge MLP of the `-learn` variants.

    Each is declared with `setting(...)`: its range or choices (checked on construction,
    `settings.check_keywords`), whether it is a grid axis and whether a grid may trace
    it (`traced`: a pytree leaf, one program for every value).
    """

    variant: str = setting("swan", choices=VARIANTS, help="SWAN variant")
    adjacency: str | AdjacencyCode = setting("sym", choices=ADJACENCIES,
                                             codes=tuple(ADJACENCY_CODES.values()),
                                             grid=True, traced=True,
                                             help="A_hat: sym (D^-1/2 A D^-1/2) or adj (A)")
    beta: float = setting(1.0, grid=True, traced=True,
                          help="weight of the space-antisymmetric term Psi")
    gamma: float = setting(0.1, grid=True, traced=True,
                           help="stabilising shift: W - W^T - gamma I")
    epsilon: float = setting(0.1, low=0, low_open=True, grid=True, traced=True,
                             help="step size (t1 = num_layers * epsilon)")
    num_layers: int = setting(5, low=1, grid=True, flag="--layers",
                              help="Euler steps (the paper's layers)")
    activation: str = setting("tanh", choices=ACTIVATIONS, help="the field's sigma")
    weight_sharing: bool = setting(True, help="one W, V, Z, b for every step")
    edge_activation: str = setting("tanh", choices=ACTIVATIONS,
                                   help="sigma inside the edge MLP of the -learn variants")

    def __post_init__(self) -> None:
        check_keywords(self)
        object.__setattr__(self, "adjacency", known_choice("adjacency", self.adjacency))

    @classmethod
    def from_point(cls, point: Mapping[str, Any], **fixed: Any) -> SWANConfig:
        """The configuration at one grid point: the point's values of the settings
        declared here, then `fixed`, the settings its caller decides (`variant`,
        `num_layers`, ...).

        `point` is a grid point, as `train` gives it to `model_fn` (`hp`: a vmapped run's
        traced numbers) and with a program's static values beside (a `ChainMap`); its
        other keys (`learning_rate`, `hidden`, ...) are not read. A traced choice may
        come by its name (a static program's) or its code (a run's).

            SWANConfig.from_point({"epsilon": 0.5, "adjacency": "sym", "hidden": 64},
                                  variant="swan-learn", num_layers=4)

        Raises: `ValueError` for a setting given both ways; a bad value as the
        constructor does.
        """
        taken = {name: point[name] for name in FIELDS if name in point}
        twice = sorted(set(taken) & set(fixed))
        if twice:
            raise ValueError(f"{twice[0]} is given twice: by the grid point and by the "
                             f"caller; leave it out of one")
        return cls(**taken, **fixed)

    @property
    def adjacency_code(self) -> AdjacencyCode:
        """The adjacency in its one form below the configuration, as the graph operations
        take it (`graph.adjacency_hat`): its code, a Python float when known (one
        operator computed), a traced run's array as it is."""
        code: AdjacencyCode = traced_value("adjacency", self.adjacency)
        return code

    @property
    def learned_operators(self) -> bool:
        return self.variant in LEARNED_VARIANTS

    @property
    def has_psi(self) -> bool:
        return self.variant not in NO_PSI_VARIANTS

    @property
    def plain_phi(self) -> bool:
        return self.variant in PLAIN_PHI_VARIANTS

    @property
    def t1(self) -> float:
        """Terminal time `num_layers * epsilon` (docs/conventions.md, Integration)."""
        return self.num_layers * self.epsilon

    def replace(self, **changes: Any) -> SWANConfig:
        return dataclasses.replace(self, **changes)


# Read from the declarations above: name -> Setting, in declaration order.
FIELDS = {name: spec for name, (_, _, spec) in field_settings(SWANConfig).items()}
# The settings a grid may trace (leaves of the pytree): the grid axes of one program.
TRACED_FIELDS: tuple[str, ...] = tuple(n for n, spec in FIELDS.items() if spec.traced)
# Leaves always (numbers), and leaves when given as codes (traced choices, else names).
_NUMBERS = tuple(n for n in TRACED_FIELDS if FIELDS[n].codes is None)
_CHOICES = tuple(n for n in TRACED_FIELDS if FIELDS[n].codes is not None)
_NAMES = tuple(f.name for f in dataclasses.fields(SWANConfig))


def _flatten(cfg: SWANConfig) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    coded = tuple(n for n in _CHOICES if not isinstance(getattr(cfg, n), str))
    leaves = _NUMBERS + coded
    static = tuple(getattr(cfg, n) for n in _NAMES if n not in leaves)
    return tuple(getattr(cfg, n) for n in leaves), (coded, static)


def _unflatten(aux: tuple[Any, ...], children: tuple[Any, ...]) -> SWANConfig:
    # Bypass __init__: leaves may be tracers, batched arrays or sentinels.
    coded, static = aux
    leaves = _NUMBERS + coded
    cfg = object.__new__(SWANConfig)
    for name, value in zip(leaves, children, strict=True):
        object.__setattr__(cfg, name, value)
    for name, value in zip([n for n in _NAMES if n not in leaves], static, strict=True):
        object.__setattr__(cfg, name, value)
    return cfg


jax.tree_util.register_pytree_node(SWANConfig, _flatten, _unflatten)
