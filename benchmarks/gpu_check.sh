#!/usr/bin/env bash
# The maintainers' GPU benchmark of swan-jax. (Is your GPU used at all? `make gpu-check`.)
# Benchmark 1 (segment and gather paths; swan, swan-learn, gcn), 4 vmapped seeds against 1,
# the epoch anatomy of both pipelines, the authors' PyTorch reference on the same GPU (when
# torch is installed and .gpu_ref/swan.py exists), and a Peptides-func SWAN training run for
# the minutes left, resumable across separate runs; before them, a device profile of
# transfer line k = 10 and SWAN-learn's Peptides-func epoch (benchmarks/device_profile.py:
# which GPU kernels an epoch's time goes to, at most 2.5 minutes). At most 8 minutes on one
# H100 / H200.
#
#   bash benchmarks/gpu_check.sh            # figures in $OUT/gpu_check.json (runs/gpu_check)
#
# It needs no network. Optional inputs, all git-ignored, in the repository root (made by
# `python -m benchmarks.gpu_inputs --data-dir ../shared/data --ref PATH/swan.py`):
#   .whl/       wheels of packages the GPU machine's Python may lack (jraph, rdkit, pooch,
#               tqdm, matplotlib and their dependencies; see gpu_wheels.sh), e.g.
#               pip download --only-binary=:all: --python-version 3.12 -d .whl \
#                   rdkit jraph pooch tqdm matplotlib
#   .gpu_data/  the raw data (peptides-functional, tolokers), e.g. copied from ../shared/data
#   .gpu_cache/ the processed-data cache to start from (SWAN_CACHE_DIR): Peptides-func
#               featurised and compressed (7 MB), so that no RDKit is needed here
#   .gpu_ref/   the authors' model file: graph_property_prediction/models/swan.py of
#               gravins/SWAN, for the PyTorch reference
#   .gpu_state/ state.tar of an earlier run ($OUT/state.tar), to continue its training
# CPU smoke test: GPU_CHECK_SMOKE=1 OUT=runs/gpu_smoke bash benchmarks/gpu_check.sh
# (GPU_CHECK_ONLY=training runs one part; GPU_CHECK_ANATOMY=peptides,tolokers chooses the
# anatomy's workloads; GPU_CHECK_PROFILE the profile's, empty for none, and
# GPU_CHECK_PROFILE_SECONDS its limit, default 150; GPU_CHECK_MINUTES
# sets the budget after the profile, default 5). GPU_CHECK_TRANSFER=1 adds, after the
# profile, issue 19's transfer target (benchmarks/transfer_protocol.sh, fused: about 75 s
# on an H200), its summary and compilations written into this log.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/gpu_check}
MINUTES=${GPU_CHECK_MINUTES:-5}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1

PY=${PY:-python3}
if [ -n "${GPU_CHECK_SMOKE:-}" ] && [ -x .venv/bin/python ]; then
    PY=.venv/bin/python  # a CPU smoke run here uses the project's environment
fi
source benchmarks/gpu_wheels.sh
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
export SWAN_DATA_DIR=${SWAN_DATA_DIR:-$PWD/.gpu_data}
if [ -d .gpu_cache ]; then
    export SWAN_CACHE_DIR=${SWAN_CACHE_DIR:-$PWD/.gpu_cache}
else
    export SWAN_CACHE_DIR=${SWAN_CACHE_DIR:-/tmp/swan_cache}
fi
if [ -n "${GPU_CHECK_SMOKE:-}" ]; then
    export SWAN_DATA_DIR=${SMOKE_DATA_DIR:-$PWD/../shared/data}
    [ -d cache ] && export SWAN_CACHE_DIR=$PWD/cache  # featurised once already
    export JAX_PLATFORMS=cpu
fi

STATE=/tmp/gpu_check_state
rm -rf "$STATE" && mkdir -p "$STATE"
if [ -f .gpu_state/state.tar ]; then
    tar -xf .gpu_state/state.tar -C "$STATE"
    echo "resuming from .gpu_state/state.tar"
fi

"$PY" -c "import jax; print('jax', jax.__version__, jax.devices())"
status=0
PROFILE=${GPU_CHECK_PROFILE-transfer,peptides-learn}
if [ -n "$PROFILE" ]; then  # its own process: it sets XLA_FLAGS before JAX starts
    timeout "${GPU_CHECK_PROFILE_SECONDS:-150}" "$PY" -m benchmarks.device_profile --only "$PROFILE" \
        --out "$OUT/device_profile.json" ${GPU_CHECK_SMOKE:+--quick --epochs 1} \
        || echo "device profile ended with status $?"
fi
if [ -n "${GPU_CHECK_TRANSFER:-}" ]; then  # issue 19's transfer target, its wall time split
    transfer=$(mktemp -d)
    extra=""
    [ -n "${GPU_CHECK_SMOKE:-}" ] && extra="--epochs 60 --train-size 40 --val-size 10 --test-size 10"
    OUT=$transfer PY=$PY VARIANTS=fused EXTRA_ARGS="$extra" timeout 240 \
        bash benchmarks/transfer_protocol.sh || echo "transfer protocol ended with status $?"
    # into this log (a lent machine returns few files): compilations, table, resources
    grep -v -E "^ *[0-9.]+ epoch [0-9]+/" "$transfer/fused.txt" 2>/dev/null | head -60
    rm -rf "$transfer"
fi
timeout $((MINUTES * 60 + 45)) "$PY" -m benchmarks.gpu_check --out "$OUT" --state "$STATE" \
    --minutes "$MINUTES" --only "${GPU_CHECK_ONLY:-bench,seeds,anatomy,reference,training}" \
    --ref "${GPU_CHECK_REF:-$PWD/.gpu_ref/swan.py}" \
    ${GPU_CHECK_ANATOMY:+--anatomy "$GPU_CHECK_ANATOMY"} \
    ${GPU_CHECK_SMOKE:+--smoke} || status=$?
tar -cf "$OUT/state.tar" -C "$STATE" .
echo "gpu check finished with status $status; figures in $OUT/gpu_check.json"
exit $status
