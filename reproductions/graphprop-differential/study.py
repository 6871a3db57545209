"""GraphProp differential check (issue 20, item 4): the authors' PyTorch SWAN and ours on
the SAME generated data, grid point and protocol; one curve file per side, one figure.
The report is REPORT.md beside this file.

The authors' code (gravins/SWAN, `graph_property_prediction/`) is never copied here: it is
imported at run time from `--ref` (a checkout outside this repository), with the stand-ins
of `reproductions/_differential.py` (`SHIMS`). Three steps, each in its own interpreter
(JAX and torch never meet), from the repository's root:

    # 1. ours (this repository's venv): generates the data, exports it, trains our SWAN
    .venv/bin/python -m reproductions.graphprop-differential.study ours --task sssp --tag sssp
    # 2. the authors' SWAN (a venv with torch + torch_geometric), on the exported data
    /work/refenv/bin/python -m reproductions.graphprop-differential.study authors \\
        --task sssp --tag sssp --ref /work/ref/SWAN
    # 3. the figure (either venv with matplotlib)
    .venv/bin/python -m reproductions.graphprop-differential.study plot --tags sssp

Curves: `<tag>_<side>.json` beside this file (train loss, val and test score per epoch);
logs, exported data and our program folders: `logs/graphprop-differential/` (git-ignored).
Scores: "pooled" is ours (log10 of the mean over all graphs of each graph's node-mean
squared error; plain MSE for the diameter); the authors' `evaluate` averages the batch
losses instead ("batch_mean"); both are recorded for the authors' side.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from reproductions._differential import (
    ROOT,
    Command,
    batched_graph,
    both_scores,
    graph_errors,
    pyplot,
    reference_code,
    save_arrays,
    write_json,
)

OUT = Path(__file__).resolve().parent
LOGS = ROOT / "logs" / "graphprop-differential"
NODE_TASKS = ("sssp", "eccentricity")
AUTHORS_TASK = {"sssp": "sssp", "eccentricity": "ecc", "diameter": "diam"}
# The grid point of RESULTS.md's CPU protocol (configs/graphprop-cpu.toml), data a quarter.
POINT = {"hidden": 20, "num_layers": 10, "epsilon": 0.1, "gamma": 0.1, "beta": 1.0,
         "learning_rate": 0.003, "weight_decay": 1e-6}


def _data_path(args) -> Path:
    return LOGS / "data" / f"{args.task}_{args.labels}_{args.per_size.replace(',', '-')}" \
        f"_seed{args.data_seed}.npz"


# ------------------------------------------------------------------------------- ours

def export_data(args) -> Path:
    """Generate (or read from the cache) our splits for the task and label setting and save
    the arrays the authors' side needs: `<split>_{nodes,senders,receivers,n_node,n_edge,y}`.
    (swan_jax imported here: the authors' steps run in a venv without JAX.)"""
    import numpy as np

    from swan_jax.data import graphprop

    per = [int(v) for v in args.per_size.split(",")]
    splits = graphprop.load_graphprop(args.task, labels=args.labels, cache_dir=LOGS / "cache",
                                      seed=args.data_seed,
                                      per_size=dict(zip(graphprop.SPLITS, per, strict=True)))
    arrays = {}
    for name, data in splits.items():
        target = data.node_targets if args.task in NODE_TASKS else data.graph_targets
        for field in ("nodes", "senders", "receivers", "n_node", "n_edge"):
            arrays[f"{name}_{field}"] = getattr(data, field)
        arrays[f"{name}_y"] = target[:, 0]
    path = _data_path(args)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    return path


def _our_config(args, folder: Path, overrides: list[str]) -> Path:
    """A TOML for `swan_jax.experiments.graphprop` at the grid point, in `folder`."""
    grid = {k: json.dumps(v) for k, v in dict(POINT, adjacency="sym").items()}
    grid.update(item.split("=", 1) for item in overrides)  # key=value, value as TOML
    lines = [f'results_dir = "{folder / "results"}"', f'checkpoint_dir = "{folder / "ckpt"}"',
             f'cache_dir = "{LOGS / "cache"}"', f'tasks = ["{args.task}"]',
             f'labels = ["{args.labels}"]', f'models = ["{args.model}"]',
             f"seeds = [{args.seed}]", f"epochs = {args.epochs}", "patience = 100000",
             f"batch_size = {args.batch_size}", 'optimizer = "adam"',
             f"per_size = [{args.per_size}]", f"data_seed = {args.data_seed}",
             f"final_leaky_relu = {str(not args.no_final_leaky_relu).lower()}",
             "save_checkpoints = false", "", "[grid]"]
    lines += [f"{k} = [{v}]" for k, v in grid.items()]
    path = folder / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _use_code(code: str | None) -> str:
    """Import swan_jax from `code` (a snapshot, e.g. `git archive HEAD swan_jax`) rather than
    the editable install, so that edits others make to the shared tree mid-run cannot leak
    in; returns where swan_jax came from."""
    if code:
        sys.meta_path[:] = [f for f in sys.meta_path
                            if "__editable__" not in getattr(f, "__module__", "")
                            and "__editable__" not in getattr(f, "__name__", "")]
        sys.path.insert(0, str(Path(code).resolve()))
    import swan_jax

    return str(Path(swan_jax.__file__).parent)


def run_ours(args) -> None:
    code = _use_code(args.code)
    print(f"swan_jax from {code}", flush=True)
    from swan_jax.experiments import graphprop as experiment
    from swan_jax.train import read_history

    print(f"data: {export_data(args)}", flush=True)
    folder = LOGS / "ours" / args.tag
    folder.mkdir(parents=True, exist_ok=True)
    config = _our_config(args, folder, args.set)
    started = time.time()
    rc = experiment.main(["--config", str(config), "--overwrite"])
    if rc:
        raise SystemExit(f"our graphprop run failed (exit {rc}); see the log above")
    histories = sorted((folder / "ckpt").rglob("history.jsonl"))
    if len(histories) != 1:
        raise SystemExit(f"expected one history.jsonl under {folder}, found {histories}")
    history = read_history(histories[0])
    write_json(OUT, f"{args.tag}_ours.json", {
        "side": "ours", "task": args.task, "labels": args.labels, "model": args.model,
        "point": {**POINT, "adjacency": "sym", **dict(s.split("=", 1) for s in args.set)},
        "batch_size": args.batch_size, "per_size": args.per_size, "seed": args.seed,
        "data_seed": args.data_seed, "final_leaky_relu": not args.no_final_leaky_relu,
        "note": args.note,
        "swan_jax": code, "wall_seconds": time.time() - started,
        "train_loss": [h["train_loss"][0] for h in history],
        "val": [h["val"][0] for h in history], "test": [h["test"][0] for h in history]})


# ---------------------------------------------------------------------------- authors

def load_reference(ref: Path, shims: Path):
    """The authors' SWAN model module and `train` function, imported from `ref`.

    Run-time fix (released code): `ConstrainedConv.message` calls `edge_weight.shape()`,
    a TypeError on every non-attention configuration; it is replaced by the evident intent
    (a 1-D edge weight scales the message), nothing else of the module is touched.
    """
    reference_code(ref, shims, code="graph_property_prediction", marker="models/swan.py",
                   repo="gravins/SWAN")
    import train_GraphProp
    from models import swan as module

    def message(self, x_j, edge_weight=None):
        if edge_weight is None:
            return x_j
        if self.lin_edge is None:
            return edge_weight.view(-1, 1) * x_j
        return x_j + self.lin_edge(edge_weight)

    module.ConstrainedConv.message = message
    return module, train_GraphProp.train


def to_pyg(path: Path, task: str) -> dict[str, list]:
    """Our exported splits as lists of `torch_geometric.data.Data` (local edge indices)."""
    import numpy as np
    import torch
    from torch_geometric.data import Data

    arrays = np.load(path)
    out = {}
    for split in ("train", "val", "test"):
        n_node, n_edge = arrays[f"{split}_n_node"], arrays[f"{split}_n_edge"]
        node_off = np.concatenate([[0], np.cumsum(n_node)])
        edge_off = np.concatenate([[0], np.cumsum(n_edge)])
        y = torch.tensor(arrays[f"{split}_y"], dtype=torch.float32)
        x = torch.tensor(arrays[f"{split}_nodes"], dtype=torch.float32)
        graphs = []
        for g in range(len(n_node)):
            a, b = edge_off[g], edge_off[g + 1]
            edge_index = torch.tensor(np.stack([arrays[f"{split}_senders"][a:b],
                                                arrays[f"{split}_receivers"][a:b]]),
                                      dtype=torch.long)
            label = y[node_off[g]:node_off[g + 1]] if task in NODE_TASKS else y[g]
            graphs.append(Data(x=x[node_off[g]:node_off[g + 1]], edge_index=edge_index,
                               y=label))
        out[split] = graphs
    return out


def scores(model, loader, node_level: bool) -> dict[str, float]:
    """Both scores in one pass, log10: "pooled" (ours) and "batch_mean" (the authors')."""
    pooled, batch_mean = both_scores(model, loader, node_level)
    return {"pooled": math.log10(pooled), "batch_mean": math.log10(batch_mean)}


def run_authors(args) -> None:
    import numpy as np
    import torch
    from torch_geometric.loader import DataLoader

    torch.set_num_threads(1)
    if not _data_path(args).exists():
        raise SystemExit(f"no exported data at {_data_path(args)}: run the `ours` step "
                         "first with the same --task, --labels, --per-size, --data-seed")
    module, train = load_reference(Path(args.ref), Path(args.shims))
    if args.psi == "exact":
        _patch_exact_antisym(module)
    node_level = args.task in NODE_TASKS
    data = to_pyg(_data_path(args), args.task)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    model = module.SWAN(input_dim=2, output_dim=1, hidden_dim=POINT["hidden"],
                        num_layers=POINT["num_layers"], epsilon=POINT["epsilon"],
                        gamma=POINT["gamma"], beta=POINT["beta"], activ_fun="tanh",
                        graph_conv=args.graph_conv, attention=args.attention,
                        node_level_task=node_level, weight_sharing=True, bias=True)
    if args.zero_bias:
        for conv in model.convs:
            torch.nn.init.zeros_(conv.bias)
    optimizer = torch.optim.Adam(model.parameters(), lr=POINT["learning_rate"],
                                 weight_decay=POINT["weight_decay"])
    loaders = {s: DataLoader(data[s], batch_size=args.batch_size, shuffle=s == "train")
               for s in data}

    def criterion(pred, label, batch):
        return graph_errors(pred, label, batch, node_level).mean()

    curves: dict[str, list] = {"train_loss": [], "val": [], "test": [], "val_batch_mean": [],
                               "test_batch_mean": []}
    started = time.time()
    for epoch in range(args.epochs):
        loss, _, optimizer = train(model, optimizer, loaders["train"], criterion, "cpu")
        score = {s: scores(model, loaders[s], node_level) for s in ("val", "test")}
        curves["train_loss"].append(loss)
        for s in ("val", "test"):
            curves[s].append(score[s]["pooled"])
            curves[f"{s}_batch_mean"].append(score[s]["batch_mean"])
        print(f"epoch {epoch}: train loss {loss:.4g}, val {score['val']['pooled']:.4f}, "
              f"test {score['test']['pooled']:.4f} ({time.time() - started:.0f} s)",
              flush=True)
    write_json(OUT, f"{args.tag}_authors.json", {
        "side": "authors", "task": args.task, "labels": args.labels,
        "point": {**POINT, "graph_conv": args.graph_conv, "attention": args.attention,
                  "weight_sharing": True}, "psi": args.psi, "zero_bias": args.zero_bias,
        "batch_size": args.batch_size, "per_size": args.per_size, "seed": args.seed,
        "data_seed": args.data_seed, "note": args.note,
        "num_params": sum(p.numel() for p in model.parameters()),
        "wall_seconds": time.time() - started, **curves})


def _patch_exact_antisym(module) -> None:
    """Controlled change: the authors' `get_adj(normalization="antisym")` weights edge
    `(j -> i)` with `1/deg(j) - w[col]`, indexing the EDGE array by a NODE id; this swaps in
    the exact `1/deg(j) - 1/deg(i)` (our `A_tilde - A_tilde^T` up to the transpose)."""
    original = module.get_adj

    def get_adj(edge_index, edge_weight=None, normalization="sym", dtype=None,
                num_nodes=None):
        if normalization != "antisym" or edge_weight is not None:
            return original(edge_index, edge_weight, normalization, dtype, num_nodes)
        from torch_geometric.utils import degree, remove_self_loops, to_undirected

        edge_index, _ = remove_self_loops(edge_index)
        edge_index = to_undirected(edge_index)
        row, col = edge_index
        inv = 1.0 / degree(row, num_nodes=int(edge_index.max()) + 1)
        return edge_index, inv[row] - inv[col]

    module.get_adj = get_adj


# ---------------------------------------------------------------- one step, both codes

def field_authors(args) -> None:
    """One Euler step of the authors' `SWANConv` on the first validation graphs, released
    and with `--psi exact`; saves the inputs, parameters and `(x1 - x) / epsilon`."""
    import torch
    from torch_geometric.data import Batch

    module, _ = load_reference(Path(args.ref), Path(args.shims))
    graphs = to_pyg(_data_path(args), args.task)["val"][:4]
    batch = Batch.from_data_list(graphs)
    torch.manual_seed(args.seed)
    conv = module.SWANConv(POINT["hidden"], num_iters=1, gamma=POINT["gamma"],
                           epsilon=POINT["epsilon"], beta=POINT["beta"])
    x = 0.1 * torch.randn(batch.num_nodes, POINT["hidden"])  # tanh far from saturation
    out = {}
    with torch.no_grad():
        out["released"] = (conv(x, batch.edge_index) - x) / POINT["epsilon"]
        _patch_exact_antisym(module)
        out["exact"] = (conv(x, batch.edge_index) - x) / POINT["epsilon"]
        arrays = {"x": x, "edge_index": batch.edge_index, "n_node": torch.tensor(
            [g.num_nodes for g in graphs]), "W": conv.W, "V_lin": conv.conv.lin.weight,
            "Z_lin": conv.antisym_conv.lin.weight, "b": conv.bias, **out,
            # what their parametrisations store (`right_inverse`: triu(V, 1), triu(Z))
            "V_raw": conv.conv.lin.parametrizations.weight.original,
            "Z_raw": conv.antisym_conv.lin.parametrizations.weight.original}
    save_arrays(LOGS / "field.npz", arrays)


def field_ours(args) -> None:
    """Our `vector_field` with the authors' stored parameters mapped onto ours (W = W_a^T,
    V = -V_raw / 2, Z = -Z_raw, V_raw = triu(V, 1) and Z_raw = triu(Z) as their
    parametrisations keep them, so that our V' = -V_lin / 2 and Z' = -Z_lin: our Phi
    uses A_hat + A_hat^T = 2 A_sym, our Psi (A~ - A~^T) is the transpose of theirs), against
    both of their steps."""
    code = _use_code(args.code)
    import jax.numpy as jnp
    import numpy as np

    import swan_jax as sj

    a = np.load(LOGS / "field.npz")
    n_node = a["n_node"]
    graph = batched_graph(a["edge_index"], n_node)
    cfg = sj.SWANConfig(variant="swan", adjacency="sym", beta=POINT["beta"],
                        gamma=POINT["gamma"], epsilon=POINT["epsilon"], num_layers=1)
    params = {"W": jnp.asarray(a["W"].T), "V": jnp.asarray(-a["V_raw"] / 2),
              "Z": jnp.asarray(-a["Z_raw"]), "b": jnp.asarray(a["b"])}
    ours = np.asarray(sj.vector_field(params, graph, jnp.asarray(a["x"]), cfg))
    result = {"swan_jax": code, "nodes": int(n_node.sum()),
              "max_abs_field": float(np.abs(ours).max())}
    for side in ("exact", "released"):
        result[f"max_abs_diff_vs_{side}"] = float(np.abs(ours - a[side]).max())
        result[f"rows_differing_vs_{side}"] = int(np.sum(np.abs(ours - a[side]).max(1) > 1e-5))
    print(json.dumps(result, indent=1))
    write_json(OUT, "field_equivalence.json", result)


# ------------------------------------------------------------------------------- plot

def plot(args) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(len(args.tags), 2, figsize=(12, 4 * len(args.tags)),
                             squeeze=False)
    for row, group in zip(axes, args.tags, strict=True):  # one row per comma-separated group
        for tag in group.split(","):
            for path in sorted(OUT.glob(f"{tag}_*.json")):
                run = json.loads(path.read_text())
                label = f"{tag} {run['side']}"
                line, = row[0].plot([math.log10(v) for v in run["train_loss"]], label=label)
                row[1].plot(run["val"], color=line.get_color(), label=label)
                row[1].plot(run["test"], color=line.get_color(), ls="--")
        task = group.split(",")[0]
        for split, style in (("val", "-"), ("test", "--")):
            floor = nonnegative_floor(run, split)
            if floor is not None:
                row[1].axhline(floor, color="gray", ls=style, lw=1,
                               label="plateau: negatives as 0" if split == "val" else None)
        row[0].set(title=f"{task}: train loss (per-graph MSE)", xlabel="epoch",
                   ylabel="log10 loss")
        row[1].set(title=f"{task}: val (solid), test (dashed)", xlabel="epoch",
                   ylabel="log10 MSE, graph means")
        for ax in row:
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3)
    fig.tight_layout()
    summarise(sorted(t for group in args.tags for t in group.split(",")))
    path = OUT / "curves.png"
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def nonnegative_floor(run: dict[str, Any], split: str) -> float | None:
    """log10 graph-mean MSE of predicting every target exactly but the negative ones as 0,
    on the exported data of `run` (node tasks; None if the data or negatives are absent):
    where a head ending in LeakyReLU (slope 0.01) stalls until its scale grows ~100x."""
    import numpy as np

    args = argparse.Namespace(task=run["task"], labels=run["labels"],
                              per_size=run["per_size"],
                              data_seed=run.get("data_seed", 1234))
    if run["task"] not in NODE_TASKS or not _data_path(args).exists():
        return None
    a = np.load(_data_path(args))
    y, n_node = a[f"{split}_y"].astype(np.float64), a[f"{split}_n_node"]
    if not np.any(y < 0):
        return None
    starts = np.concatenate([[0], np.cumsum(n_node)[:-1]])
    return math.log10(float(np.mean(np.add.reduceat(np.minimum(y, 0) ** 2, starts) / n_node)))


def summarise(tags: list[str]) -> None:
    """`summary.md`: per curve file, the scores at epochs 10, 50, the last, and at the best
    validation epoch (test read there, as the paper's protocol does)."""
    rows = ["| run | side | note | val@10 | val@50 | val (last) | test (last) | best val "
            "(epoch) | test at best val | s |", "|" + " --- |" * 10]
    for tag in tags:
        for path in sorted(OUT.glob(f"{tag}_*.json")):
            run = json.loads(path.read_text())
            val, test = run["val"], run["test"]
            best = min(range(len(val)), key=val.__getitem__)
            rows.append(f"| {tag} | {run['side']} | {run.get('note', '')} | {val[9]:.3f} | "
                        f"{val[49]:.3f} | {val[-1]:.3f} | {test[-1]:.3f} | {val[best]:.3f} "
                        f"({best + 1}) | {test[best]:.3f} | {run['wall_seconds']:.0f} |")
    (OUT / "summary.md").write_text("\n".join(rows) + "\n")
    print("\n".join(rows))


def _common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--task", choices=("sssp", "eccentricity", "diameter"), default="sssp")
    p.add_argument("--labels", choices=("paper", "faithful", "swan-code"), default="paper")
    p.add_argument("--tag", required=True, help="names the curve files <tag>_<side>.json")
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--per-size", default="128,32,64", help="graphs per node count")
    p.add_argument("--data-seed", type=int, default=1234)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--note", default="", help="what this run changes, for the report")
    return p


def main(argv: list[str] | None = None) -> int:
    cli = Command(OUT.name, __doc__ or "", LOGS)
    snapshot = "import swan_jax from this folder (a snapshot)"
    ours = _common(cli.step("ours", run_ours, "generate + export the data, train our SWAN"))
    ours.add_argument("--model", default="swan", help="swan_jax graphprop model name")
    ours.add_argument("--set", action="append", default=[],
                      help="grid override key=value (TOML value), e.g. adjacency='\"adj\"'")
    ours.add_argument("--no-final-leaky-relu", action="store_true")
    ours.add_argument("--code", help=snapshot)
    authors = _common(cli.step("authors", run_authors, "train the authors' SWAN on the "
                               "exported data", reference="gravins/SWAN"))
    authors.add_argument("--graph-conv", default="AntiSymNaiveAggr",
                         choices=("AntiSymNaiveAggr", "BoundedGCNConv", "BoundedNaiveAggr"))
    authors.add_argument("--attention", action="store_true")
    authors.add_argument("--psi", choices=("authors", "exact"), default="authors",
                         help="exact: the antisymmetric operator indexed correctly")
    authors.add_argument("--zero-bias", action="store_true",
                         help="start the SWANConv bias at 0, as ours does")
    _common(cli.step("field-authors", field_authors, "one step of the authors' SWANConv, "
                     "saved", reference="gravins/SWAN"))
    _common(cli.step("field-ours", field_ours, "our vector field on the same inputs, "
                     "compared")).add_argument("--code", help=snapshot)
    cli.step("plot", plot, "draw curves.png from the curve files").add_argument(
        "--tags", nargs="+", required=True,
        help="one figure row per argument: comma-separated tags")
    return cli(argv)


if __name__ == "__main__":
    sys.exit(main())
