"""The model's output checked against the targets before anything compiles.

A named loss compares predictions and targets elementwise (`mse`, `l1`, `bce`,
`graph_mean_mse`: `pred [R, T]` against `target [R, T]`) or reads one integer class per
row (`ce`, `weighted_ce`: `logits [R, K]`, `K >= 2`, against `target [R, 1]`). Other
shapes would broadcast (`[R, 3] - [R, 1]`) and train to a score that means nothing, with
no word. The shape comes from the initialisation's own trace (`_state.init_program`'s
`outputs`: nothing is traced twice, the ODE solve is skipped there and its output has its
input's shape); `check_widths` refuses, in one line naming both widths and the setting
that fixes it, a model whose rows or columns do not fit. A model that does not take the
graphs at all (an encoder of another feature width) is refused the same way
(`not_taken`). A loss of one's own (a function) is the caller's to shape.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

CLASS_LOSSES = ("ce", "weighted_ce")  # logits [R, K] against one integer class per row
READOUT = {"node": "NodeReadout", "graph": "GraphReadout"}


class ShapeMismatch(ValueError):
    """The model's output does not fit the targets (or the model does not take the
    graphs): one line naming both widths and the setting that fixes it."""


@contextlib.contextmanager
def not_taken(graph: Any) -> Iterator[None]:
    """A `ValueError` while the model is initialised on the first training batch `graph`
    (an encoder of another feature width: `AtomEncoder expects integer node codes [N, 9],
    got ...`) as one `ShapeMismatch` line naming the graphs' widths. A settings error
    (`SettingError`, `HintedError`) passes as it is: it names its own setting."""
    from swan_jax.settings import HintedError, SettingError

    try:
        yield
    except (SettingError, HintedError, ShapeMismatch):
        raise
    except ValueError as err:
        nodes = np.shape(graph.nodes)
        edges = np.shape(graph.edges) if graph.edges is not None else None
        widths = (f"{nodes[-1] if len(nodes) > 1 else 1} node feature(s)"
                  + (f" and {edges[-1] if len(edges) > 1 else 1} edge feature(s)"
                     if edges is not None else ", no edge features"))
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ShapeMismatch(f"the model does not take the training graphs ({widths} per "
                            f"row): {first}; give the encoder the data's feature width, "
                            f"or data of the width it expects") from None


def check_widths(loss: Any, level: str, pred: Any, target: tuple[int, ...]) -> None:
    """Refuse predictions of shape `pred` that `loss` cannot compare with `target`
    (`[R, T]`, R the batch's padded `level` rows). A function `loss`: not checked.
    `pred` not a shape (the model returned something else): refused."""
    if not isinstance(pred, tuple):
        raise ShapeMismatch(f"model_fn(hp) returned a {getattr(pred, '__name__', pred)}, "
                            f"not one array of predictions [rows, T]")
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
