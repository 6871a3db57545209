"""Prepare the git-ignored inputs that `benchmarks/gpu_check.sh` and
`reproduce/gpu_slice.sh` read on a GPU machine without a network (their headers say what
each is for), in the repository root:

- `.whl/`: wheels of the packages a GPU image may lack (jraph, pooch and its
  platformdirs, tqdm), downloaded with pip for Python 3.12;
- `.gpu_data/`: the raw Peptides-func and Tolokers files, copied from `--data-dir`;
- `.gpu_cache/lrgb/`: Peptides-func's featurised graphs (the processed cache, compressed:
  about 7 MB), so that the GPU machine needs no RDKit and does not featurise for minutes;
- `.gpu_cache/graphprop/`: GraphProp's generated graphs at the paper's sizes (about 3 MB),
  so that the slice's probes and Table 1's screens start training at once;
- `.gpu_ref/swan.py`: the authors' model file, copied from `--ref` when given.

    python -m benchmarks.gpu_inputs --data-dir ../shared/data [--ref PATH/swan.py]

It prints each input's size: all of them, with the tree, must fit what the GPU machine
takes along (about 64 MiB here).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ("jraph", "pooch", "platformdirs", "tqdm")
DATA = ("peptides-functional", "tolokers")


def wheels(folder: Path) -> None:
    """pip's wheels of `WHEELS` for Python 3.12, without their dependencies."""
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--only-binary=:all:", "--python-version", "3.12", "-d", str(folder),
                    *WHEELS], check=True)


def raw_data(data_dir: Path, folder: Path) -> None:
    """The raw data sets' folders, copied."""
    for name in DATA:
        if not (data_dir / name).is_dir():
            raise SystemExit(f"{data_dir / name} is missing; pass --data-dir, the folder "
                             f"that holds {' and '.join(DATA)}")
        shutil.copytree(data_dir / name, folder / name, dirs_exist_ok=True)


def featurised_peptides(data_dir: Path, folder: Path) -> None:
    """Peptides-func's processed cache, compressed (made here first if absent: RDKit)."""
    from swan_jax.data import load_peptides_func
    from swan_jax.data.download import default_cache_dir

    load_peptides_func(data_dir, download=False, progress=True)  # the cache, made once
    out = folder / "lrgb"
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted((default_cache_dir() / "lrgb").glob("peptides-func-*.npz")):
        with np.load(path, allow_pickle=False) as cached:
            np.savez_compressed(out / path.name, **{k: cached[k] for k in cached.files})


def graphprop_graphs(folder: Path) -> None:
    """GraphProp's raw splits at the paper's sizes and seed, as the experiment caches them
    (`<folder>/graphprop/`: generated here once)."""
    from swan_jax.data.graphprop import load_graphprop_raw

    load_graphprop_raw(folder)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_inputs",
                                description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data",
                   help="the folder holding peptides-functional/ and tolokers/")
    p.add_argument("--ref", type=Path, help="the authors' graph_property_prediction/"
                   "models/swan.py (gravins/SWAN), for the PyTorch reference")
    args = p.parse_args(argv)
    if args.ref is not None and not args.ref.is_file():
        p.error(f"--ref {args.ref} is not a file")
    wheels(ROOT / ".whl")
    raw_data(args.data_dir, ROOT / ".gpu_data")
    featurised_peptides(args.data_dir, ROOT / ".gpu_cache")
    graphprop_graphs(ROOT / ".gpu_cache")
    ref = ROOT / ".gpu_ref" / "swan.py"
    if args.ref is not None and args.ref.resolve() != ref.resolve():
        ref.parent.mkdir(exist_ok=True)
        shutil.copy(args.ref, ref)
    for name in (".whl", ".gpu_data", ".gpu_cache", ".gpu_ref"):
        files = [f for f in (ROOT / name).rglob("*") if f.is_file()]
        print(f"{name}: {sum(f.stat().st_size for f in files) / 2**20:.1f} MiB in "
              f"{len(files)} file(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
