"""Positional and structural encodings computed once per graph: LapPE and RWSE (GraphGPS).

`with_positional_encodings(dataset, lap_k=8, rwse_steps=0)` returns the data set with
node columns appended, in this order (the input `swan_jax.gps.GPSEncoder` reads):

    [ features (F) | LapPE eigenvectors (k) | LapPE eigenvalues (k) | RWSE (s) | real (1) ]

* LapPE (Dwivedi et al. 2020; Rampasek et al. 2022, `posenc_LapPE`): the eigenvectors
  `U[:, j]` of the `k` smallest eigenvalues `lambda_j` of each graph's Laplacian,
  unit (L2) norm, as GraphGPS's `eigvec_norm: L2`; node `u` carries `U[u, :k]` and the
  eigenvalues `lambda_:k` (the same for every node of the graph). `laplacian="sym"`:
  `L = I - D^-1/2 A D^-1/2` (the normalised Laplacian); `"none"`: `L = D - A` (GraphGPS's
  `laplacian_norm: none` of its LRGB configurations). A graph of `n < k` nodes fills
  columns `n..k-1` with zeros; the encoder masks them by the graph's node count.
  An eigenvector's sign is arbitrary: here each is made deterministic (its
  largest-magnitude entry positive), and GraphGPS flips signs at random in training
  (`swan_jax.gps.GPSEncoder(deterministic=False)`).
* RWSE (Dwivedi et al. 2022, `posenc_RWSE`): the return probabilities
  `[(D^-1 A)^t]_{uu}` of a random walk for `t = 1..s`.
* real: 1.0 on every node. A padded batch fills padding rows with zeros, so the model
  can tell real nodes from padding whichever batch layout built them.

Graphs up to `DENSE_MAX_NODES` nodes are decomposed densely (`numpy.linalg.eigh`),
larger ones (a full graph such as Tolokers) with `scipy.sparse.linalg.eigsh`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from swan_jax.data.dataset import GraphDataset

LAPLACIANS = ("sym", "none")
DENSE_MAX_NODES = 2000
RWSE_MAX_NODES = 20000  # RWSE keeps a dense n x n walk matrix per graph


def positional_width(lap_k: int, rwse_steps: int) -> int:
    """Columns `with_positional_encodings` appends: `2 lap_k + rwse_steps + 1`."""
    return 2 * lap_k + rwse_steps + 1


def _adjacency(senders: np.ndarray, receivers: np.ndarray, n: int) -> np.ndarray:
    """Dense symmetric 0/1 adjacency without self-loops (GraphGPS: `to_undirected`)."""
    a = np.zeros((n, n), np.float64)
    a[receivers, senders] = 1.0
    a = np.maximum(a, a.T)
    np.fill_diagonal(a, 0.0)
    return a


def _fix_signs(vectors: np.ndarray) -> np.ndarray:
    """Each column's largest-magnitude entry made positive (a deterministic sign)."""
    if vectors.size == 0:
        return vectors
    peak = vectors[np.argmax(np.abs(vectors), axis=0), np.arange(vectors.shape[1])]
    return vectors * np.where(peak < 0, -1.0, 1.0)


def _laplacian_dense(a: np.ndarray, laplacian: str) -> np.ndarray:
    degree = a.sum(axis=1)
    if laplacian == "none":
        return np.diag(degree) - a
    inv_sqrt = np.where(degree > 0, 1.0 / np.sqrt(np.maximum(degree, 1e-300)), 0.0)
    return np.eye(a.shape[0]) - inv_sqrt[:, None] * a * inv_sqrt[None, :]


def _laplacian_sparse_eig(senders, receivers, n: int, k: int, laplacian: str):
    """The `k` smallest eigenpairs of a large graph's Laplacian (scipy `eigsh`)."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import eigsh

    a = sp.coo_matrix((np.ones(len(senders)), (receivers, senders)), shape=(n, n)).tocsr()
    a = ((a + a.T) > 0).astype(np.float64)
    a.setdiag(0.0)
    a.eliminate_zeros()
    degree = np.asarray(a.sum(axis=1)).ravel()
    if laplacian == "none":
        lap = sp.diags(degree) - a
    else:
        inv_sqrt = np.where(degree > 0, 1.0 / np.sqrt(np.maximum(degree, 1e-300)), 0.0)
        lap = sp.eye(n) - sp.diags(inv_sqrt) @ a @ sp.diags(inv_sqrt)
    # The largest of (c I - L) are the smallest of L; Lanczos finds extremes fastest.
    shift = 2.0 if laplacian == "sym" else 2.0 * float(degree.max(initial=0.0)) + 1.0
    values, vectors = eigsh(shift * sp.eye(n) - lap, k=k, which="LA",
                            v0=np.ones(n) / np.sqrt(n))
    order = np.argsort(shift - values, kind="stable")
    return (shift - values)[order], vectors[:, order]


def laplacian_pe(senders: np.ndarray, receivers: np.ndarray, n: int, k: int, *,
                 laplacian: str = "sym") -> tuple[np.ndarray, np.ndarray]:
    """One graph's LapPE: eigenvectors `[n, k]` and eigenvalues `[k]` (ascending), zero
    columns past the graph's `n` eigenpairs.

    Args:
      senders, receivers: the graph's edges (local indices; either direction or both).
      n: its node count.
      k: eigenpairs kept (GraphGPS's `max_freqs`).
      laplacian: "sym" (`I - D^-1/2 A D^-1/2`) or "none" (`D - A`).
    """
    if laplacian not in LAPLACIANS:
        raise ValueError(f"unknown laplacian {laplacian!r}; valid: {', '.join(LAPLACIANS)}")
    vectors = np.zeros((n, k), np.float64)
    values = np.zeros(k, np.float64)
    if n == 0 or k == 0:
        return vectors.astype(np.float32), values.astype(np.float32)
    if n <= DENSE_MAX_NODES or k >= n - 1:
        w, u = np.linalg.eigh(_laplacian_dense(_adjacency(senders, receivers, n), laplacian))
    else:
        w, u = _laplacian_sparse_eig(senders, receivers, n, k, laplacian)
    m = min(k, n)
    vectors[:, :m] = _fix_signs(u[:, :m])
    values[:m] = np.clip(w[:m], 0.0, None)  # round-off below 0 on the trivial eigenvalue
    return vectors.astype(np.float32), values.astype(np.float32)


def random_walk_se(senders: np.ndarray, receivers: np.ndarray, n: int, steps: int
                   ) -> np.ndarray:
    """One graph's RWSE `[n, steps]`: `[(D^-1 A)^t]_{uu}`, `t = 1..steps` (0 on isolated
    nodes)."""
    out = np.zeros((n, steps), np.float32)
    if n == 0 or steps == 0:
        return out
    if n > RWSE_MAX_NODES:
        raise ValueError(f"RWSE keeps a dense {n} x {n} walk matrix; graphs of more than "
                         f"{RWSE_MAX_NODES} nodes need rwse_steps=0")
    a = _adjacency(senders, receivers, n)
    degree = a.sum(axis=1)
    walk = np.where(degree[:, None] > 0, a / np.maximum(degree, 1.0)[:, None], 0.0)
    power = np.eye(n)
    for t in range(steps):
        power = power @ walk
        out[:, t] = np.diag(power)
    return out


def with_positional_encodings(dataset: GraphDataset, *, lap_k: int = 8, rwse_steps: int = 0,
                              laplacian: str = "sym") -> GraphDataset:
    """`dataset` with LapPE, RWSE and the real-node column appended to `nodes` (float32;
    see the module docstring for the column order), computed once per graph.

    Integer node codes (OGB atoms) become float32 columns, exactly (codes < 2^24).
    """
    for name, value in (("lap_k", lap_k), ("rwse_steps", rwse_steps)):
        if isinstance(value, bool) or int(value) != value or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    if laplacian not in LAPLACIANS:
        raise ValueError(f"unknown laplacian {laplacian!r}; valid: {', '.join(LAPLACIANS)}")
    n_off, e_off = dataset.node_offsets, dataset.edge_offsets
    total = int(n_off[-1])
    vectors = np.zeros((total, lap_k), np.float32)
    values = np.zeros((total, lap_k), np.float32)
    walks = np.zeros((total, rwse_steps), np.float32)
    for g in range(len(dataset)):
        n, rows = int(dataset.n_node[g]), slice(n_off[g], n_off[g + 1])
        senders = dataset.senders[e_off[g]:e_off[g + 1]]
        receivers = dataset.receivers[e_off[g]:e_off[g + 1]]
        if lap_k:
            vectors[rows], values[rows] = laplacian_pe(senders, receivers, n, lap_k,
                                                       laplacian=laplacian)
        if rwse_steps:
            walks[rows] = random_walk_se(senders, receivers, n, rwse_steps)
    nodes = np.concatenate([np.asarray(dataset.nodes, np.float32), vectors, values, walks,
                            np.ones((total, 1), np.float32)], axis=1)
    meta = dict(dataset.meta, positional=f"lappe k={lap_k} ({laplacian}), rwse {rwse_steps}")
    return dataclasses.replace(dataset, nodes=nodes, meta=meta)
