"""`flax.nnx` counterpart of the linen `swan_jax.models.SWANBlock`.

Flax's documentation now leads with NNX (modules that own their state). This block is the
same ODE block: the raw `swan_jax.init_params` pytree (`W, V, Z, b`, plus the edge MLP
`K1, k1, K2, k2` of the `-learn` variants) held as `nnx.Param`s, integrated by
`swan_jax.solve`. So for the same weights it computes exactly what the linen block does:
`SWANBlock.from_linen(linen_block, variables)` copies a linen block's parameters in, and
`to_linen_variables(block)` gives them back as a linen variable dict.

    block = swan_jax.models.nnx.SWANBlock(64, swan_jax.SWANConfig(num_layers=5),
                                          rngs=nnx.Rngs(0))
    x1 = block(graph, x0)  # [N, 64] -> [N, 64]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from swan_jax import models
from swan_jax.config import SWANConfig
from swan_jax.field import init_params
from swan_jax.graph import Graph
from swan_jax.solvers import DEFAULT_INTEGRATOR, solve

Array = jax.Array


class SWANBlock(nnx.Module):
    """The SWAN ODE block as an NNX module: `x(0) [N, hidden] -> x(num_layers * epsilon)`.

    Args:
      hidden: the width `d` of the node states it integrates.
      cfg: the `SWANConfig` (variant, adjacency, beta, gamma, epsilon, layers, ...).
      rngs: `nnx.Rngs` whose `params` stream initialises the field as `init_params`.
      solver, rtol, atol, adjoint, max_steps: as the linen block (`swan_jax.solve`).
      dtype: the parameters' dtype.
    """

    def __init__(self, hidden: int, cfg: SWANConfig, *, rngs: nnx.Rngs,
                 solver: str = DEFAULT_INTEGRATOR.solver, rtol: float = DEFAULT_INTEGRATOR.rtol,
                 atol: float = DEFAULT_INTEGRATOR.atol,
                 adjoint: str = DEFAULT_INTEGRATOR.adjoint,
                 max_steps: int | None = DEFAULT_INTEGRATOR.max_steps,
                 dtype: Any = jnp.float32):
        if hidden < 1:
            raise ValueError(f"hidden must be >= 1, got {hidden}")
        self.hidden, self.cfg, self.solver = hidden, cfg, solver
        self.rtol, self.atol, self.adjoint, self.max_steps = rtol, atol, adjoint, max_steps
        raw = init_params(rngs.params(), hidden, cfg, dtype)
        self.field = nnx.Dict({name: nnx.Param(value) for name, value in raw.items()})

    def field_params(self) -> dict[str, Array]:
        """The raw parameter pytree `solve` takes (`W, V, Z, b, ...`)."""
        return {name: param[...] for name, param in self.field.items()}

    def __call__(self, graph: Graph, x: Array) -> Array:
        if x.shape[-1] != self.hidden:
            raise ValueError(f"x has {x.shape[-1]} features but the block was built with "
                             f"hidden={self.hidden}")
        return solve(self.field_params(), graph, x, self.cfg, self.solver, rtol=self.rtol,
                     atol=self.atol, adjoint=self.adjoint, max_steps=self.max_steps)

    @classmethod
    def from_linen(cls, block: models.SWANBlock, variables: Mapping[str, Any]) -> SWANBlock:
        """The NNX block with the settings of linen `block` and its parameters.

        `variables`: the linen block's variables (`{"params": {"field": {...}}}`), or its
        `"field"` dict itself (e.g. `swan_jax.analysis.swan_field_params` of a whole model).
        """
        field = linen_field(variables)
        hidden = int(field["W"].shape[-1])
        out = cls(hidden, block.cfg, rngs=nnx.Rngs(0), solver=block.solver, rtol=block.rtol,
                  atol=block.atol, adjoint=block.adjoint, max_steps=block.max_steps,
                  dtype=field["W"].dtype)
        if set(field) != set(out.field):
            raise ValueError(f"the linen parameters hold {sorted(field)}, but a "
                             f"{block.cfg.variant} "
                             f"block needs {sorted(out.field)}")
        for name, value in field.items():
            if value.shape != out.field[name][...].shape:
                raise ValueError(f"linen parameter {name} has shape {value.shape}, expected "
                                 f"{out.field[name][...].shape} for cfg {block.cfg}")
            out.field[name][...] = jnp.asarray(value)
        return out


def linen_field(variables: Mapping[str, Any]) -> dict[str, Array]:
    """The `W, V, Z, b, ...` dict inside a linen `SWANBlock`'s variables."""
    tree = variables.get("params", variables)
    tree = tree.get("field", tree)
    if not {"W", "V", "b"} <= set(tree):
        raise KeyError(f"no SWAN field parameters (W, V, b) in the variables: keys "
                       f"{sorted(tree)}")
    return dict(tree)


def to_linen_variables(block: SWANBlock) -> dict[str, Any]:
    """`{"params": {"field": ...}}`: the variables of the linen block with the same weights."""
    return {"params": {"field": block.field_params()}}
