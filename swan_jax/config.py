"""Configuration of the SWAN vector field (docs/conventions.md, "The vector field").

`SWANConfig` is a JAX pytree: the numeric hyper-parameters `beta`, `gamma` and
`epsilon` are leaves, so one compiled program can serve (and `jax.vmap` can batch)
configurations that differ only in those values; everything that changes shapes or
code paths (`variant`, `num_layers`, `activation`, weight sharing) is static metadata.
`adjacency` is static as a name ("sym", "adj") and a leaf as its code
(`ADJACENCY_CODES`): the two differ only in the values of `A_hat`, so one program can
train both (`traced_value` turns a grid's names into codes).
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from swan_jax.graph.protocol import ADJACENCIES as ADJACENCIES
from swan_jax.settings import setting

VARIANTS: tuple[str, ...] = (
    "swan",
    "swan-learn",
    "swan-ne",
    "swan-learn-ne",
    "swan-beta0",
    "adgn",
)
# The adjacency as a number a traced hyper-parameter can carry (`graph.adjacency_hat`).
ADJACENCY_CODES: dict[str, float] = {"sym": 1.0, "adj": 0.0}
# Choices whose grid values train in one program, by their codes (`traced_value`).
TRACED_CHOICES: dict[str, dict[str, float]] = {"adjacency": ADJACENCY_CODES}
ACTIVATIONS: tuple[str, ...] = ("tanh", "relu", "sigmoid", "gelu", "identity")

# Which of the variants learn their operators from the encoded input (Appendix A.2).
LEARNED_VARIANTS: frozenset[str] = frozenset({"swan-learn", "swan-learn-ne"})
# Variants whose weight-space term is the non-symmetrised `A_hat X V`.
PLAIN_PHI_VARIANTS: frozenset[str] = frozenset({"swan-ne", "swan-learn-ne", "adgn"})
# Variants without the space-antisymmetric term Psi.
NO_PSI_VARIANTS: frozenset[str] = frozenset({"swan-beta0", "adgn"})


def _is_concrete_number(value: Any) -> bool:
    if isinstance(value, numbers.Number):
        return True
    return isinstance(value, np.ndarray | np.generic) and np.ndim(value) == 0


def traced_value(name: str, value: Any) -> float:
    """A grid value as the number its traced hyper-parameter carries: a number as it is,
    a name of `TRACED_CHOICES` as its code (`adjacency`: sym 1, adj 0)."""
    if not isinstance(value, str):
        return float(value)
    codes = TRACED_CHOICES.get(name)
    if codes is None or value not in codes:
        valid = f"one of {', '.join(codes)}" if codes else "a number"
        raise ValueError(f"grid value {name}={value!r} cannot be traced: it must be {valid}")
    return codes[value]


def concrete_hparams(point: Mapping[str, Any]) -> dict[str, Any]:
    """One grid point as `model_fn`'s `hp` outside a traced program (building a model to
    describe, count, export or predict with): numbers as float32 scalars, a choice of
    `TRACED_CHOICES` by its name, so the model holds the named (static) choice, whose
    values the traced code selects bit for bit."""
    out: dict[str, Any] = {}
    for name, value in point.items():
        if isinstance(value, str):
            traced_value(name, value)  # the same refusal as training's
            out[name] = value
        else:
            out[name] = np.float32(value)
    return out


def _check_choice(field: str, value: str, valid: tuple[str, ...], plural: str = "") -> None:
    if value not in valid:
        plural = plural or f"{field}s"
        raise ValueError(f"unknown {field} {value!r}; valid {plural}: {', '.join(valid)}")


@dataclasses.dataclass(frozen=True)
class SWANConfig:
    """Hyper-parameters of one SWAN ODE block.

    Attributes:
      variant: one of `VARIANTS` (docs/conventions.md table: swan, swan-learn, swan-ne,
        swan-learn-ne, swan-beta0, adgn).
      adjacency: `"sym"` for `A_hat = D^-1/2 A D^-1/2`, `"adj"` for `A_hat = A`; or
        its code (`ADJACENCY_CODES`: 1 sym, 0 adj), a number that may be traced, so that
        one program trains runs of both.
      beta: weight of the space-antisymmetric term Psi (ignored by swan-beta0, adgn).
      gamma: stabilising shift, the field uses `W - W^T - gamma I`.
      epsilon: step size; terminal time is `num_layers * epsilon`.
      num_layers: number of Euler steps (the paper's layers), at least 1.
      activation: the field's sigma.
      weight_sharing: one `W, V, Z, b` for every step (default); if False the
        parameters carry a leading axis of length `num_layers`.
      edge_activation: sigma inside the edge MLP of the `-learn` variants.
    """

    variant: str = setting("swan", choices=VARIANTS, help="SWAN variant")
    adjacency: str | float = setting("sym", choices=ADJACENCIES, grid=True,
                               help="A_hat: sym (D^-1/2 A D^-1/2) or adj (A)")
    beta: float = setting(1.0, grid=True, help="weight of the space-antisymmetric term Psi")
    gamma: float = setting(0.1, grid=True, help="stabilising shift: W - W^T - gamma I")
    epsilon: float = setting(0.1, low=0, low_open=True, grid=True,
                             help="step size (t1 = num_layers * epsilon)")
    num_layers: int = setting(5, low=1, grid=True, flag="--layers",
                              help="Euler steps (the paper's layers)")
    activation: str = setting("tanh", choices=ACTIVATIONS, help="the field's sigma")
    weight_sharing: bool = setting(True, help="one W, V, Z, b for every step")
    edge_activation: str = setting("tanh", choices=ACTIVATIONS,
                                   help="sigma inside the edge MLP of the -learn variants")

    def __post_init__(self) -> None:
        _check_choice("variant", self.variant, VARIANTS)
        if isinstance(self.adjacency, str):
            _check_choice("adjacency", self.adjacency, ADJACENCIES, "adjacencies")
        elif not (_is_concrete_number(self.adjacency) or isinstance(self.adjacency, jax.Array)):
            raise ValueError(f"adjacency must be one of {', '.join(ADJACENCIES)} or its code "
                             f"(1 sym, 0 adj), got {self.adjacency!r}")
        elif _is_concrete_number(self.adjacency) and float(self.adjacency) not in (0.0, 1.0):
            raise ValueError(f"an adjacency code must be 1 (sym) or 0 (adj), got "
                             f"{self.adjacency!r}")
        _check_choice("activation", self.activation, ACTIVATIONS)
        _check_choice("edge activation", self.edge_activation, ACTIVATIONS)
        if not isinstance(self.num_layers, numbers.Integral) or self.num_layers < 1:
            raise ValueError(f"num_layers must be an integer >= 1, got {self.num_layers!r}")
        if _is_concrete_number(self.epsilon) and not float(self.epsilon) > 0:
            raise ValueError(f"epsilon must be > 0, got {self.epsilon!r}")
        for name in ("beta", "gamma", "epsilon"):
            value = getattr(self, name)
            if _is_concrete_number(value) and not np.isfinite(float(value)):
                raise ValueError(f"{name} must be finite, got {value!r}")

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


_NUMERIC_FIELDS = ("beta", "gamma", "epsilon")
_STATIC_FIELDS = tuple(
    f.name for f in dataclasses.fields(SWANConfig) if f.name not in _NUMERIC_FIELDS
)
_TRACED = "<traced>"  # the static slot of an adjacency given as a code (a leaf)


def _flatten(cfg: SWANConfig) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    coded = not isinstance(cfg.adjacency, str)
    children = tuple(getattr(cfg, name) for name in _NUMERIC_FIELDS)
    aux = tuple(_TRACED if coded and name == "adjacency" else getattr(cfg, name)
                for name in _STATIC_FIELDS)
    return children + ((cfg.adjacency,) if coded else ()), aux


def _unflatten(aux: tuple[Any, ...], children: tuple[Any, ...]) -> SWANConfig:
    # Bypass __init__: leaves may be tracers, batched arrays or sentinels.
    cfg = object.__new__(SWANConfig)
    for name, value in zip(_NUMERIC_FIELDS, children, strict=False):  # + a coded adjacency
        object.__setattr__(cfg, name, value)
    for name, value in zip(_STATIC_FIELDS, aux, strict=True):
        coded = name == "adjacency" and value == _TRACED
        object.__setattr__(cfg, name, children[-1] if coded else value)
    return cfg


jax.tree_util.register_pytree_node(SWANConfig, _flatten, _unflatten)
