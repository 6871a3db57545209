"""Dense NumPy implementation of docs/conventions.md, written from its formulas only.

Used as the oracle for the sparse JAX field: dense `[N, N]` operators, Kronecker M2.
"""

from __future__ import annotations

import numpy as np


def dense_adjacency(senders, receivers, num_nodes, weights=None):
    """`A[u, v]` = (weighted) number of edges with receiver u and sender v."""
    A = np.zeros((num_nodes, num_nodes))
    w = np.ones(len(senders)) if weights is None else np.asarray(weights, float)
    np.add.at(A, (np.asarray(receivers), np.asarray(senders)), w)
    return A


def inv(values, power=1.0):
    out = np.zeros_like(values, dtype=float)
    pos = values > 0
    out[pos] = values[pos] ** (-power)
    return out


def operators(A, adjacency):
    """`A_hat`, `A_tilde` of a (possibly weighted) adjacency."""
    deg = A.sum(axis=1)
    A_tilde = np.diag(inv(deg)) @ A
    if adjacency == "sym":
        A_hat = np.diag(inv(deg, 0.5)) @ A @ np.diag(inv(deg, 0.5))
    else:
        A_hat = A.copy()
    return A_hat, A_tilde


ACT = {
    "tanh": np.tanh,
    "relu": lambda v: np.maximum(v, 0),
    "identity": lambda v: v,
}


def learned_F(params, senders, receivers, x0, num_nodes, edge_act="tanh"):
    pair = np.concatenate([x0[receivers], x0[senders]], axis=1)
    hid = ACT[edge_act](pair @ params["K1"] + params["k1"])
    f = np.maximum(hid @ params["K2"] + params["k2"], 0).mean(axis=1)
    return dense_adjacency(senders, receivers, num_nodes, f)


def field_parts(params, senders, receivers, x, cfg, x0=None, layer=None):
    """Pre-activation pieces: operators and weight matrices used by the field."""
    n = x.shape[0]
    p = {k: np.asarray(v, float) for k, v in params.items()}
    if layer is not None:
        p = {k: (v[layer] if k in "WVZb" else v) for k, v in p.items()}
    if cfg.variant in ("swan-learn", "swan-learn-ne"):
        A = learned_F(p, senders, receivers, x if x0 is None else x0, n, cfg.edge_activation)
    else:
        A = dense_adjacency(senders, receivers, n)
    A_hat, A_tilde = operators(A, cfg.adjacency)
    d = x.shape[1]
    Wm = p["W"] - p["W"].T - cfg.gamma * np.eye(d)
    if cfg.variant in ("swan-ne", "swan-learn-ne", "adgn"):
        P, Vm = A_hat, p["V"]
    else:
        P, Vm = A_hat + A_hat.T, np.triu(p["V"], 1) - np.triu(p["V"], 1).T
    if cfg.variant in ("swan-beta0", "adgn"):
        S, Zm = np.zeros((n, n)), np.zeros((d, d))
    else:
        S, Zm = A_tilde - A_tilde.T, cfg.beta * (np.triu(p["Z"]) + np.triu(p["Z"]).T)
    return Wm, P, Vm, S, Zm, p["b"]


def vector_field(params, senders, receivers, x, cfg, x0=None, layer=None):
    x = np.asarray(x, float)
    Wm, P, Vm, S, Zm, b = field_parts(params, senders, receivers, x, cfg, x0, layer)
    return ACT[cfg.activation](x @ Wm + P @ x @ Vm + S @ x @ Zm + b)


def euler(params, senders, receivers, x0, cfg):
    x = np.asarray(x0, float)
    for layer in range(cfg.num_layers):
        lay = None if cfg.weight_sharing else layer
        x = x + cfg.epsilon * vector_field(params, senders, receivers, x, cfg, x0=x0, layer=lay)
    return x


def vec(X):
    """Column stacking: `vec(X) = X.T.reshape(-1)`."""
    return np.asarray(X).T.reshape(-1)


def m1_m2(params, senders, receivers, x, cfg):
    """M1 (diagonal) and M2 (Kronecker form) of docs/conventions.md, "Jacobian facts"."""
    x = np.asarray(x, float)
    n = x.shape[0]
    Wm, P, Vm, S, Zm, b = field_parts(params, senders, receivers, x, cfg)
    M2 = np.kron(Wm.T, np.eye(n)) + np.kron(Vm.T, P) + np.kron(Zm.T, S)
    pre = x @ Wm + P @ x @ Vm + S @ x @ Zm + b
    M1 = np.diag(vec(1.0 - np.tanh(pre) ** 2))
    return M1, M2
