"""Model runs as trajectories `x(0) [N, d] -> [L + 1, N, d]`, the input of the sensitivity
and drift measurements: SWAN's solver run, and the layer maps of message-passing baselines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import jax
import jax.numpy as jnp
import jraph

from swan_jax.analysis.jacobians import StateMap
from swan_jax.config import SWANConfig
from swan_jax.field import Params
from swan_jax.models import BASELINE_LAYERS, MPNNStack
from swan_jax.solvers import solve

Array = jax.Array
# A model run `x(0) [N, d] -> [L + 1, N, d]`, the states after every layer.
TrajectoryFn = Callable[[Array], Array]


def mpnn_layer_maps(
    stack: MPNNStack, stack_params: Mapping[str, Any], graph: jraph.GraphsTuple
) -> list[StateMap]:
    """The layer maps `x(l-1) -> x(l) = activation(layer_l(x(l-1)))` of an `sj.MPNNStack`.

    Args:
      stack: the module (its `kind`, `hidden`, `num_layers`, `activation`).
      stack_params: its parameters, e.g. `variables["params"]["processor"]` of a
        `sj.Model`, or `stack.init(...)["params"]`; layer i is `"<Layer>_<i>"`
        (e.g. `GCNLayer_0`).

    Returns:
      `num_layers` maps `[N, hidden] -> [N, hidden]`.
    """
    layer_cls = BASELINE_LAYERS[stack.kind]
    maps: list[StateMap] = []
    for index in range(stack.num_layers):
        layer_vars = {"params": stack_params[f"{layer_cls.__name__}_{index}"]}

        def layer_map(x: Array, layer_vars: dict[str, Any] = layer_vars) -> Array:
            # flax types `apply` as output or (output, state); without `mutable`, the output
            out = cast(Array, layer_cls(stack.hidden).apply(layer_vars, graph, x))
            return stack.activation(out)

        maps.append(layer_map)
    return maps


def trajectory_from_steps(steps: Sequence[StateMap] | StateMap, num_layers: int | None = None
                          ) -> TrajectoryFn:
    """`x0 -> [x0, f_1(x0), f_2(f_1(x0)), ...]`, `[L + 1, N, d]`, from layer maps.

    `steps` is a list of per-layer maps, or one shared map applied `num_layers` times.
    """
    if callable(steps):
        if num_layers is None:
            raise ValueError("num_layers is needed when one shared step map is given")

        def shared(x0: Array) -> Array:
            def body(x: Array, _: None) -> tuple[Array, Array]:
                x_next = steps(x)
                return x_next, x_next

            _, states = jax.lax.scan(body, x0, None, length=num_layers)
            return jnp.concatenate([x0[None], states])

        return shared

    def stacked(x0: Array) -> Array:
        states = [x0]
        for step in steps:
            states.append(step(states[-1]))
        return jnp.stack(states)

    return stacked


def swan_trajectory_fn(params: Params, graph: jraph.GraphsTuple, cfg: SWANConfig,
                       solver: str = "euler", **solve_kwargs: Any) -> TrajectoryFn:
    """`x0 -> sj.solve(..., save_trajectory=True)`, `[L + 1, N, d]`, differentiable forwards.

    Uses diffrax's direct adjoint: the checkpointed default supports reverse mode only.
    """
    solve_kwargs.setdefault("adjoint", "direct")

    def trajectory(x0: Array) -> Array:
        states: Array = solve(params, graph, x0, cfg, solver, save_trajectory=True,
                              **solve_kwargs)
        return states

    return trajectory
