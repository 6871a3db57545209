"""The model's output checked against the targets before anything compiles.

A named loss compares predictions and targets elementwise (`mse`, `l1`, `bce`,
`graph_mean_mse`: `pred [R, T]` against `target [R, T]`) or reads one integer class per
row (`ce`, `weighted_ce`: `logits [R, K]`, `K >= 2`, against `target [R, 1]`). Other
shapes would broadcast (`[R, 3] - [R, 1]`) and train to a score that means nothing, with
no word. `check_output_shape` traces the model once on the first training batch's shapes
(`jax.eval_shape` of `init_with_output` inside `parameters_only`: the ODE solve is
skipped, its output has its input's shape) and refuses, in one line naming both widths
and the setting that fixes it, a model whose rows or columns do not fit; a model that
does not take the graphs at all (an encoder of another feature width) is refused the
same way. A loss of one's own (a function) is the caller's to shape.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np

CLASS_LOSSES = ("ce", "weighted_ce")  # logits [R, K] against one integer class per row
READOUT = {"node": "NodeReadout", "graph": "GraphReadout"}


class ShapeMismatch(ValueError):
    """The model's output does not fit the targets (or the model does not take the
    graphs): one line naming both widths and the setting that fixes it."""


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def output_shape(model_fn: Callable[[Any], Any], graph: Any, hp: Mapping[str, Any]
                 ) -> tuple[int, ...]:
    """The shape of `model_fn(hp)` applied to `graph`, from shapes alone (nothing runs;
    the solve is skipped). `hp`: one run's hyper-parameters (arrays or shape structs)."""
    from swan_jax.models import parameters_only

    def forward(h):
        return model_fn(h).init_with_output(jax.random.PRNGKey(0), graph)[0]

    try:
        with parameters_only():
            out = jax.eval_shape(forward, hp)
    except (ValueError, TypeError) as err:
        nodes = np.shape(graph.nodes)
        edges = np.shape(graph.edges) if graph.edges is not None else None
        widths = (f"{nodes[-1] if len(nodes) > 1 else 1} node feature(s)"
                  + (f" and {edges[-1] if len(edges) > 1 else 1} edge feature(s)"
                     if edges is not None else ", no edge features"))
        raise ShapeMismatch(f"the model does not take the training graphs ({widths} per "
                            f"row): {_first_line(err)}; give the encoder the data's "
                            f"feature width, or data of the width it expects") from None
    if not hasattr(out, "shape"):
        raise ShapeMismatch(f"model_fn(hp) returned a {type(out).__name__}, not one array "
                            f"of predictions [rows, T]")
    return tuple(out.shape)


def check_widths(loss: Any, level: str, pred: tuple[int, ...], target: tuple[int, ...]
                 ) -> None:
    """Refuse predictions of shape `pred` that `loss` cannot compare with `target`
    (`[R, T]`, R the batch's padded `level` rows). A function `loss`: not checked."""
    if not isinstance(loss, str):
        return
    unit = "node" if level == "node" else "graph"
    if len(pred) != 2:
        raise ShapeMismatch(f"the model predicts an array of shape {pred}; train needs "
                            f"[rows, T] (one row per {unit}): end the model with a "
                            f"{READOUT[level]}")
    if pred[0] != target[0]:
        other = "node" if level == "graph" else "graph"
        raise ShapeMismatch(
            f"the model predicts {pred[0]} rows for a batch of {target[0]} {unit} rows "
            f"(task_level={level!r}): it reads out per {other}, not per {unit}; end it "
            f"with a {READOUT[level]}, or set task_level to the targets' level")
    width, columns = pred[1], target[1] if len(target) > 1 else 1
    if loss in CLASS_LOSSES:
        if columns != 1:
            raise ShapeMismatch(f"loss {loss!r} takes one integer class per {unit}, but "
                                f"the targets have {columns} columns; give class labels "
                                f"[rows, 1], or a loss for {columns} targets ('bce', "
                                f"'mse')")
        if width < 2:
            raise ShapeMismatch(f"loss {loss!r} needs one logit per class (at least 2 "
                                f"output columns), but the model predicts {width}; set "
                                f"the readout's last width to the number of classes")
        return
    if width != columns:
        raise ShapeMismatch(
            f"the model predicts {width} column(s) per {unit} but the targets have "
            f"{columns} (loss {loss!r} compares them column by column: they would "
            f"broadcast); set the readout's last width to {columns} (e.g. "
            f"{READOUT[level]}((..., {columns}))), or give targets of {width} column(s)")


def check_output_shape(model_fn: Callable[[Any], Any], example: Any, hp_one: Any,
                       loss: Any, level: str, target: np.ndarray) -> None:
    """`output_shape` of the model on the batch `example`, then `check_widths`."""
    pred = output_shape(model_fn, example.graph, hp_one)
    check_widths(loss, level, pred, tuple(np.shape(target)))
