"""The SWAN authors' GPS in PyTorch Geometric, run once on fixed graphs: the recorded
outputs `tests/fixtures/gps_authors.npz` that `tests/test_gps.py` holds
`swan_jax.models.gpsconv` to everywhere (torch is no dependency of swan-jax).

    python3 -m venv /work/torchenv
    /work/torchenv/bin/pip install torch torch_geometric numpy
    /work/torchenv/bin/python -m tests.make_gps_fixture      # rewrites the fixture

The model is the authors' `GPS_Model` (gravins/SWAN, `graph_transfer/models/gnn_model.py`),
built here from the same PyG modules at a small width: `Linear(1 -> C)`, per layer
`tanh(GPSConv(C, GCNConv(C, C), heads=2, norm='layer'))` (attention dropout 0; PyG >= 2.4
takes it as `attn_kwargs`), `Linear(C -> 1)`. It runs twice on one batch of two graphs:
without the batch vector, as the authors' `forward` calls it (attention and LayerNorm over
the whole batch), and with it (per graph). The file keeps the inputs, the weights (PyTorch
names and layouts) and both outputs. Besides numpy, this module's functions import torch
only when called, so the suite imports `flax_params` from it without torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

FIXTURE = Path(__file__).parent / "fixtures" / "gps_authors.npz"
HIDDEN, LAYERS, HEADS = 16, 2, 2


def fixture_graphs() -> dict[str, np.ndarray]:
    """Two graphs in one batch: a line of 4 nodes and a 6-ring with a chord (0-based
    global node ids, both edge directions); features uniform in [0, 1)."""
    line = [(0, 1), (1, 2), (2, 3)]
    ring = [(4 + i, 4 + (i + 1) % 6) for i in range(6)] + [(5, 8)]
    pairs = np.asarray(line + ring, np.int64)
    senders = np.concatenate([pairs[:, 0], pairs[:, 1]])
    receivers = np.concatenate([pairs[:, 1], pairs[:, 0]])
    x = np.random.default_rng(0).uniform(size=(10, 1)).astype(np.float32)
    return {"x": x, "senders": senders, "receivers": receivers,
            "n_node": np.asarray([4, 6], np.int64)}


def authors_gps(hidden: int = HIDDEN, layers: int = LAYERS, heads: int = HEADS, seed: int = 0):
    """The authors' `GPS_Model` from PyG's modules (module docstring), seeded; every weight
    is PyTorch's initial one plus Gaussian noise (std 0.1), so that the biases (0 at
    initialisation) and the LayerNorms' affine parts (1 and 0) count in the outputs."""
    import torch
    from torch_geometric.nn import GCNConv, GPSConv

    torch.manual_seed(seed)

    class AuthorsGPS(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Linear(1, hidden)
            self.conv = torch.nn.ModuleList(
                GPSConv(hidden, GCNConv(hidden, hidden), heads=heads, norm="layer",
                        attn_kwargs={"dropout": 0.0}) for _ in range(layers))
            self.readout = torch.nn.Linear(hidden, 1)

        def forward(self, x, edge_index, batch=None):
            x = self.emb(x)
            for conv in self.conv:
                x = torch.tanh(conv(x, edge_index, batch))
            return self.readout(x)

    model = AuthorsGPS().eval()
    with torch.no_grad():  # biases and LayerNorms start at 0 and 1: move them too
        for weight in model.parameters():
            weight.add_(0.1 * torch.randn_like(weight))
    return model


def run_authors(model, graphs: Mapping[str, np.ndarray], *, per_graph: bool) -> np.ndarray:
    """The model's `[N, 1]` output: without the batch vector (the authors' call) or with
    it (`per_graph`)."""
    import torch

    edge_index = torch.from_numpy(np.stack([graphs["senders"], graphs["receivers"]]))
    batch = torch.from_numpy(np.repeat(np.arange(len(graphs["n_node"])), graphs["n_node"]))
    with torch.no_grad():
        out = model(torch.from_numpy(graphs["x"]), edge_index, batch if per_graph else None)
    return out.numpy()


def state_arrays(model) -> dict[str, np.ndarray]:
    """The model's weights by their PyTorch names, as float32 NumPy arrays."""
    return {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}


def flax_params(state: Mapping[str, np.ndarray], layers: int, heads: int) -> dict[str, Any]:
    """PyTorch weights (`state_arrays`) as the variables of swan-jax's transfer GPS
    (`Model(WithoutFlag(LinearEncoder), GPSConvStack, NodeReadout)`): kernels are the
    transposed `weight`s; the attention's `in_proj` splits into query, key and value,
    each `[C, heads, C / heads]`, and `out_proj` becomes `[heads, C / heads, C]`."""

    def linear(prefix: str) -> dict[str, np.ndarray]:
        return {"kernel": state[f"{prefix}.weight"].T, "bias": state[f"{prefix}.bias"]}

    processor = {}
    for i in range(layers):
        p = f"conv.{i}."
        c = state[p + "conv.lin.weight"].shape[0]
        w, b = state[p + "attn.in_proj_weight"], state[p + "attn.in_proj_bias"]
        attention = {name: {"kernel": w[j * c:(j + 1) * c].T.reshape(c, heads, c // heads),
                            "bias": b[j * c:(j + 1) * c].reshape(heads, c // heads)}
                     for j, name in enumerate(("query", "key", "value"))}
        attention["out"] = {"kernel": state[p + "attn.out_proj.weight"].T.reshape(
            heads, c // heads, c), "bias": state[p + "attn.out_proj.bias"]}
        processor[f"layer{i}"] = {
            "conv": {"lin": {"kernel": state[p + "conv.lin.weight"].T},
                     "bias": state[p + "conv.bias"]},
            "attn": {"attention": attention},
            "Dense_0": linear(p + "mlp.0"), "Dense_1": linear(p + "mlp.3"),
            **{f"norm{n}": {"scale": state[f"{p}norm{n}.weight"],
                            "bias": state[f"{p}norm{n}.bias"]} for n in (1, 2, 3)}}
    return {"params": {"encoder": {"encoder": {"Dense_0": linear("emb")}},
                       "processor": processor,
                       "readout": {"MLP_0": {"Dense_0": linear("readout")}}}}


def save_fixture(path: Path, arrays: Mapping[str, Any]) -> None:
    """Write a recorded-outputs fixture, with the torch_geometric version that made it."""
    import torch_geometric

    arrays = {**arrays, "torch_geometric": np.asarray(torch_geometric.__version__)}
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    print(f"wrote {path} ({path.stat().st_size} bytes, torch_geometric "
          f"{torch_geometric.__version__})")


def main() -> None:
    graphs = fixture_graphs()
    model = authors_gps()
    arrays = {**graphs, **{f"w/{k}": v for k, v in state_arrays(model).items()},
              "out_batch": run_authors(model, graphs, per_graph=False),
              "out_graph": run_authors(model, graphs, per_graph=True),
              "layers": np.asarray(LAYERS), "heads": np.asarray(HEADS)}
    save_fixture(FIXTURE, arrays)


if __name__ == "__main__":
    main()
