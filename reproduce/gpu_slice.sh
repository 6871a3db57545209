#!/usr/bin/env bash
# One lent GPU command: the GPU check first (benchmarks/gpu_check.sh), then campaign cells
# for the seconds left. Everything comes back under $OUT: the check's figures in
# $OUT/check/, and $OUT/reproductions.tar (the campaign's state, collected cells and the
# bundles of unfinished ones), which `python -m reproduce.campaign merge` takes into this
# tree cell by cell.
#
#   OUT=runs/gpu_slice SLICE_SECONDS=540 CHECK_MINUTES=5 \
#       CELLS='transfer/*/5/swan transfer/*/10/swan' bash reproduce/gpu_slice.sh
#
# CHECK_MINUTES=0 skips the check; CHECK_PARTS and CHECK_ANATOMY choose its parts and the
# epoch anatomy's workloads (GPU_CHECK_ONLY and GPU_CHECK_ANATOMY of gpu_check.sh;
# CHECK_PARTS=none keeps only its device profile, GPU_CHECK_PROFILE; GPU_CHECK_TRANSFER=1
# passes through and times issue 19's transfer target after the profile);
# RUNTIME_TABLE=0 skips the paper's runtime table (`reproduce.runtime`, run before the
# campaign, at most 5 minutes, with the authors' PyTorch beside it when .gpu_ref/swan.py
# and torch are there). CELLS are campaign `--cells` patterns: give the slice cells that
# no CPU campaign running at the same time will reach, so no cell is trained twice.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/gpu_slice}
TOTAL=${SLICE_SECONDS:-540}
CHECK_MINUTES=${CHECK_MINUTES:-5}
MARGIN=25  # seconds kept after the campaign's own stop, for its collecting and bundling
started=$(date +%s)
mkdir -p "$OUT"

if [ "$CHECK_MINUTES" != 0 ]; then
    GPU_CHECK_MINUTES=$CHECK_MINUTES OUT=$OUT/check \
        GPU_CHECK_ONLY=${CHECK_PARTS:-reference,anatomy} \
        GPU_CHECK_ANATOMY=${CHECK_ANATOMY:-peptides,tolokers,transfer} \
        bash benchmarks/gpu_check.sh || echo "gpu check ended with status $?"
fi

PY=${PY:-python3}
if [ -n "${GPU_CHECK_SMOKE:-}" ] && [ -x .venv/bin/python ]; then
    PY=.venv/bin/python
fi
source benchmarks/gpu_wheels.sh
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
[ -d .gpu_data ] && export SWAN_DATA_DIR=${SWAN_DATA_DIR:-$PWD/.gpu_data}
if [ -z "${GPU_CHECK_SMOKE:-}" ]; then  # the carried cache (benchmarks/gpu_inputs.py) first
    [ -d .gpu_cache ] && export SWAN_CACHE_DIR=${SWAN_CACHE_DIR:-$PWD/.gpu_cache}
    export SWAN_CACHE_DIR=${SWAN_CACHE_DIR:-/tmp/swan_cache}
fi

# The runtime table and the campaign work on a copy outside $OUT, returned as one file
# (a lent machine may return only a limited number of files, each at most 16 MiB). The
# copy's bundles that no cell rewrote are left out of it: `merge` takes a cell only where
# this machine's state of it is newer, and such a cell's bundle is new or removed.
pack() {
    find "$work/reproductions/campaign/bundles" -name '*.npz' ! -newer "$work/.copied" \
        -delete 2>/dev/null
    tar -cf "$OUT/reproductions.tar" -C "$work" reproductions
}
work=/tmp/gpu_slice_work
rm -rf "$work" && mkdir -p "$work" && cp -r reproductions "$work/" && touch "$work/.copied"
if [ "${RUNTIME_TABLE:-1}" = 1 ]; then  # the paper's runtime table, beside the authors' code
    ref=()
    [ -f .gpu_ref/swan.py ] && ref=(--ref .gpu_ref/swan.py)
    timeout 300 "$PY" -m reproduce.runtime --reproductions "$work/reproductions" "${ref[@]}" \
        ${GPU_CHECK_SMOKE:+--quick} \
        || echo "runtime table ended with status $?"
fi

left=$((TOTAL - ($(date +%s) - started) - MARGIN))
if [ "$left" -lt 120 ]; then
    echo "campaign: only $left s left of the slice; no cell started"
    pack
    exit 0
fi
cells=()
set -f  # the patterns are the campaign's, not the shell's
for pattern in ${CELLS:-}; do cells+=(--cells "$pattern"); done
set +f
minutes=$("$PY" -c "print(round(($left - 10) / 60, 2))")
echo "campaign: $minutes minutes, cells: ${CELLS:-all, in plan order}"
# The campaign is the only process on the GPU now: let JAX take 90% of its memory, not
# the default 75% (transfer crossed-ring k = 50 SWAN's step is estimated at 59 GiB).
XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.90} \
    timeout -s TERM "$left" "$PY" -m reproduce.campaign run \
    --reproductions "$work/reproductions" --budget-minutes "$minutes" --no-render "${cells[@]}"
status=$?
pack
echo "gpu slice finished after $(($(date +%s) - started)) s (campaign status $status)"
exit $status
