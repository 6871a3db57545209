"""The kind of machine a run is on: `cpu-2core` on a CPU, `h100` / `h200` by the
accelerator's name (else its name), as the collected runs' folders are named."""

from __future__ import annotations

import jax


def device_kind() -> str:
    kind = jax.devices()[0].device_kind.lower()
    for name in ("h200", "h100"):
        if name in kind:
            return name
    return "cpu-2core" if jax.devices()[0].platform == "cpu" else kind
