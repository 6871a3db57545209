"""What the two GraphProp differentials share: our SWAN (`graphprop-differential/study.py`)
and our ADGN (`graphprop-adgn-differential/study.py`) against the authors' PyTorch code.

Both run the authors' released code on our data, step by step, each step in its own
interpreter (JAX and torch never meet): ours in this repository's venv, theirs in a venv
with torch and torch_geometric and without JAX. So nothing here imports JAX, torch or
matplotlib at module top; each function imports what its side has.

- The authors' code is never copied into this repository: it is imported at run time from
  a checkout given by `--ref`, after stand-ins (`SHIMS`) for the two packages it imports
  that have no usable PyPI wheel (`torch_scatter`, `ray`).
- Scores on their side, both from one pass: "pooled" (ours: the mean over all graphs of
  each graph's node-mean squared error) and "batch_mean" (the authors' `evaluate`: the
  mean of the batch losses). Both as plain MSE; the studies write log10 of them.
- One step of each field on the same inputs: the authors' step is saved as arrays
  (`save_arrays`), ours reads them back as one batch of graphs (`batched_graph`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

SHIMS = {  # stand-ins for imports of the authors' code without a usable PyPI wheel
    "torch_scatter.py": (
        '"""torch_scatter stand-in: the two functions the authors\' GraphProp code imports."""\n'
        "from torch_geometric.utils import scatter as _scatter\n\n\n"
        "def scatter(src, index, dim=0, out=None, dim_size=None, reduce='sum'):\n"
        "    return _scatter(src, index, dim=dim, dim_size=dim_size, reduce=reduce)\n\n\n"
        "def scatter_add(src, index, dim=0, out=None, dim_size=None):\n"
        "    return _scatter(src, index, dim=dim, dim_size=dim_size, reduce='sum')\n"),
    "ray.py": (
        '"""ray stand-in: train_GraphProp decorates its pipeline with ray.remote; here it\n'
        'runs in this process."""\n\n\n'
        "def remote(*args, **kwargs):\n"
        "    if len(args) == 1 and callable(args[0]) and not kwargs:\n"
        "        return args[0]\n"
        "    return lambda f: f\n"),
}


def write_shims(folder: Path) -> Path:
    """Write `SHIMS` into `folder` (a git-ignored log folder by default) and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in SHIMS.items():
        (folder / name).write_text(text)
    return folder


def reference_code(ref: Path, shims: Path, *, code: str, marker: str, repo: str) -> Path:
    """`ref/code`, the authors' GraphProp folder, put on the import path after `shims`;
    refused in one line when `marker` (a file of theirs, relative to it) is not there."""
    folder = ref / code
    if not (folder / marker).is_file():
        raise SystemExit(f"--ref {ref}: no {code}/{marker} there (give the root of a {repo} "
                         "checkout)")
    sys.path[:0] = [str(shims), str(folder)]
    return folder


def write_json(folder: Path, name: str, payload: Mapping[str, Any]) -> Path:
    """`folder/name` as indented JSON; says where it wrote."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"wrote {path}", flush=True)
    return path


# ----------------------------------------------------------------- the authors' side

def graph_errors(pred, label, batch, node_level: bool):
    """`[B]` squared error per graph: its node mean for node tasks (the authors' criterion,
    `train_GraphProp.single_loss`, is the mean of these over the batch), the graph's own
    for graph tasks. `pred` `[N, 1]` (or `[B, 1]`), `label` `[N]` (or `[B]`)."""
    from torch_geometric.nn import global_mean_pool

    se = (pred - label.reshape(-1, 1)) ** 2
    return global_mean_pool(se, batch)[:, 0] if node_level else se[:, 0]


def both_scores(model, loader, node_level: bool,
                criterion: Callable | None = None) -> tuple[float, float]:
    """`(pooled, batch_mean)` MSE of `model` over `loader` in one pass: the mean over all
    graphs of `graph_errors`, and the mean of the batch losses (`criterion(pred, y,
    batch)`, by default the mean of the batch's graph errors)."""
    import torch

    model.eval()
    per_graph, per_batch = [], []
    with torch.no_grad():
        for batch in loader:
            pred = model(batch)
            err = graph_errors(pred, batch.y, batch.batch, node_level)
            per_graph.append(err)
            per_batch.append(float(criterion(pred, batch.y, batch.batch)) if criterion
                             else float(err.mean()))
    return float(torch.cat(per_graph).mean()), sum(per_batch) / len(per_batch)


def save_arrays(path: Path, arrays: Mapping[str, Any]) -> None:
    """Torch tensors (one step of the authors' field, its inputs and parameters) as `.npz`."""
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **{k: v.detach().numpy() for k, v in arrays.items()})
    print(f"wrote {path}", flush=True)


# ------------------------------------------------------------------------ our side

def batched_graph(edge_index, n_node):
    """A `jraph.GraphsTuple` of the graphs the authors' step ran on: `edge_index` `[2, E]`
    (batch node ids, edges in graph order, as torch_geometric batches them), `n_node` `[G]`;
    each graph's edge count is the number of senders among its nodes."""
    import jax.numpy as jnp
    import jraph
    import numpy as np

    graph_of_sender = np.searchsorted(np.cumsum(n_node), edge_index[0], side="right")
    n_edge = np.bincount(graph_of_sender, minlength=len(n_node))
    return jraph.GraphsTuple(nodes=None, edges=None, globals=None,
                             senders=jnp.asarray(edge_index[0]),
                             receivers=jnp.asarray(edge_index[1]),
                             n_node=jnp.asarray(n_node), n_edge=jnp.asarray(n_edge))


def pyplot():
    """matplotlib's pyplot, drawing to files only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# -------------------------------------------------------------------- the command

class Command:
    """A study's command line, one subcommand per step (`python -m reproductions.<study>.study
    STEP`): `step` adds one, calling the command parses and runs it."""

    def __init__(self, study: str, doc: str, logs: Path) -> None:
        self.logs = logs
        self.parser = argparse.ArgumentParser(
            prog=f"python -m reproductions.{study}.study", description=doc.split("\n\n")[0],
            formatter_class=argparse.RawDescriptionHelpFormatter)
        self._steps = self.parser.add_subparsers(dest="step", required=True)

    def step(self, name: str, run: Callable[[argparse.Namespace], None], help: str, *,
             reference: str | None = None) -> argparse.ArgumentParser:
        """Add step `name` (its flags go on the parser returned); one that imports the
        authors' code, from the repository `reference`, gets `--ref` (required) and
        `--shims` (default: `SHIMS` written into `logs/shims`)."""
        p = self._steps.add_parser(name, help=help)
        p.set_defaults(run=run)
        if reference:
            p.add_argument("--ref", required=True, help=f"root of a {reference} checkout")
            p.add_argument("--shims", default=None,
                           help="folder with the torch_scatter / ray stand-ins (default: "
                                f"written from SHIMS into {self.logs / 'shims'})")
        return p

    def __call__(self, argv: list[str] | None = None) -> int:
        args = self.parser.parse_args(argv)
        if hasattr(args, "ref") and args.shims is None:
            args.shims = str(write_shims(self.logs / "shims"))
        args.run(args)
        return 0
