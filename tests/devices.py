"""Run a test script on simulated CPU devices (a process of its own: XLA reads the device
count once, at start) and read back the JSON report it writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def report_on_devices(module: str, out: Path, devices: int = 4) -> dict[str, Any]:
    """`python -m module out` with `devices` host-platform devices; its report."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    flags.append(f"--xla_force_host_platform_device_count={devices}")
    env = dict(os.environ, XLA_FLAGS=" ".join(flags), JAX_PLATFORMS="cpu")
    subprocess.run([sys.executable, "-m", module, str(out)], cwd=ROOT, env=env, check=True,
                   timeout=600)
    return json.loads(out.read_text())
