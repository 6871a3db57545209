"""Getting at a trained model's pieces: the SWAN field's parameters, `x(0)`, checkpoints.

The analysis routines take explicit parameters; these pull them out of a Flax variable
dict of `sj.Model(encoder, sj.SWANBlock(cfg), readout)` or out of a checkpoint written by
`swan_jax.train`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import jax
import jax.numpy as jnp
import jraph

from swan_jax.models import Model
from swan_jax.models.formation import read_saved, saved_format

Array = jax.Array


def swan_field_params(variables: Mapping[str, Any]) -> dict[str, Array]:
    """The SWAN field's raw `W, V, Z, b, ...` inside a Flax variable dict.

    For `sj.Model(encoder, sj.SWANBlock(cfg), readout)` they sit at
    `variables["params"]["processor"]["field"]`; any other nesting is searched for a
    dict named "field" holding `W`, `V`, `b`. Shapes as `sj.init_params` gives them
    (`W, V, Z` `[d, d]`, `b` `[d]`; a leading `[num_layers]` without weight sharing).
    """
    tree = variables.get("params", variables)
    if "processor" in tree and "field" in tree["processor"]:
        return dict(tree["processor"]["field"])
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            field = node.get("field")
            if isinstance(field, Mapping) and {"W", "V", "b"} <= set(field):
                return dict(field)
            stack.extend(node.values())
    raise KeyError("no SWAN field parameters (a 'field' dict with W, V, b) in the variables")


def encoded_input(model: Model, variables: Mapping[str, Any], graph: jraph.GraphsTuple) -> Array:
    """`x(0) = encoder(graph)` of a `sj.Model`: the state the SWAN block starts from. `[N, d]`."""
    # flax types `apply` as output or (output, state); without `mutable`, the output
    return cast(Array, model.apply(variables, graph, method=lambda module, g: module.encoder(g)))


def load_checkpoint_params(
    directory: str | Path, run: int = 0, key: str = "best_params", epoch: int | None = None,
    *, model: Any = None
) -> Any:
    """Flax variables of one run from a `swan_jax.runs.checkpoint.CheckpointStore` directory.

    The store holds `{"params", "opt_state", "best_params"}` stacked over the runs of a
    vmapped training (leading axis `[runs]`); this restores without a template and takes
    run `run` of `key` (the leading axis dropped). A checkpoint of swan-jax 0.1.0's
    formation of `V - V^T`, `Z + Z^T` is converted given `model` (the module it trained),
    else refused in one line (`swan_jax.models.formation.read_saved`).
    """
    import orbax.checkpoint as ocp

    with ocp.CheckpointManager(Path(directory).absolute()) as manager:
        epoch = manager.latest_step() if epoch is None else epoch
        if epoch is None:
            raise FileNotFoundError(f"no checkpoint in {directory}")
        restored = manager.restore(epoch, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(), meta=ocp.args.JsonRestore()))
    variables = jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf[run]),
                                       restored["state"][key])
    return read_saved(variables, written_format=saved_format(restored["meta"]),
                      model=model, key=key, where=f"the checkpoint {Path(directory) / str(epoch)}")
