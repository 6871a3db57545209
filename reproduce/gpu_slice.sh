#!/usr/bin/env bash
# One lent GPU window, run by itself: `bash reproduce/gpu_slice.sh` with no arguments.
#
# 1. The GPU check (`python -m swan_jax.experiments.gpu_check --require-gpu`: the devices,
#    one SWAN step and one epoch timed; it fails when the training ran on no GPU).
# 2. The campaign's cells matching CELLS, in their declared priority (the paper's claims
#    first: SWAN and ADGN at transfer k = 50, Table 1's SWAN and SWAN-learn, then
#    Peptides-func's grid), each by its experiment's own command with --resume, until
#    WINDOW_MINUTES (default 9) after the window's start, less MARGIN_SECONDS (default
#    60) for packing; in a copy of reproductions/ and run folders under /tmp.
# 3. $OUT/window.tar (cut into window.tar.part00, .part01, ... of 15 MiB when larger: a
#    lent machine returns files of at most 16 MiB): the device kind, the results of each
#    cell it finished, the carried parts (compressed run folders) of each it left
#    unfinished, its measurements (runtime-<kind>/, jacobian-<kind>/). Back here:
#
#   OUT=runs/gpu_window bash reproduce/gpu_slice.sh
#   python -m reproduce.campaign merge runs/gpu_window/window.tar
#   make results && git add reproductions RESULTS.md     # then commit
#
# CPU smoke run (a tiny cell, no GPU required):
#   GPU_CHECK_SMOKE=1 WINDOW_MINUTES=3 CELLS='transfer/line/3/gcn' OUT=/tmp/w \
#       bash reproduce/gpu_slice.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/gpu_window}
MINUTES=${WINDOW_MINUTES:-9}
MARGIN=${MARGIN_SECONDS:-60}
CELLS=${CELLS:-'transfer/*/50/swan transfer/*/50/adgn graphprop-screen/*/swan graphprop-screen/*/swan-learn graphprop/*/swan graphprop/*/swan-learn lrgb/peptides-func/swan lrgb/peptides-func/swan-learn lrgb-screen/peptides-func/* lrgb-grid/peptides-func/*'}
started=$(date +%s)
mkdir -p "$OUT"

PY=${PY:-python3}
if [ -n "${GPU_CHECK_SMOKE:-}" ] && [ -x .venv/bin/python ]; then
    PY=.venv/bin/python
fi
source benchmarks/gpu_wheels.sh
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
[ -d .gpu_data ] && export SWAN_DATA_DIR=${SWAN_DATA_DIR:-$PWD/.gpu_data}
[ -d .gpu_cache ] && export SWAN_CACHE_DIR=${SWAN_CACHE_DIR:-$PWD/.gpu_cache}
# the campaign is the only process on the GPU: 90% of its memory, not JAX's 75%
export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.90}

require=(--require-gpu)
[ -n "${GPU_CHECK_SMOKE:-}" ] && require=()
"$PY" -m swan_jax.experiments.gpu_check "${require[@]}" > "$OUT/gpu_check.log" 2>&1 || echo "gpu check ended with status $? ($OUT/gpu_check.log)"
tail -n 5 "$OUT/gpu_check.log"

work=${SLICE_WORK:-/tmp/gpu_window}
rm -rf "$work" && mkdir -p "$work/window/runs" "$work/window/reproductions" \
    "$work/window/carried"
cp -r reproductions "$work/" && touch "$work/.copied"
cells=()
set -f  # the patterns are the campaign's, not the shell's
for pattern in $CELLS; do cells+=(--cells "$pattern"); done
set +f
left=$((MINUTES * 60 - ($(date +%s) - started) - MARGIN))
echo "window: $left s for the cells, in this order of priority: $CELLS"
"$PY" -m reproduce.campaign run --until "$("$PY" -c "print(max($left, 1) / 60)")" \
    --reproductions "$work/reproductions" --work "$work/runs" --no-render \
    --grace 30 "${cells[@]}"
status=$?

kind=$("$PY" -c 'from reproduce.device import device_kind; print(device_kind())')
echo "$kind" > "$work/window/kind"
find "$work/reproductions/campaign/carried" -newer "$work/.copied" -type f \
    -exec cp {} "$work/window/carried/" \; 2>/dev/null
for run in "$work"/runs/*/; do  # a finished cell: its results (no checkpoints)
    [ -f "$run/table.md" ] || continue
    mkdir -p "$work/window/runs/$(basename "$run")"
    find "$run" -maxdepth 1 -type f -exec cp {} "$work/window/runs/$(basename "$run")/" \;
done
for measured in runtime jacobian; do
    [ "$work/reproductions/$measured-$kind" -nt "$work/.copied" ] \
        && cp -r "$work/reproductions/$measured-$kind" "$work/window/reproductions/"
done
tar -cf "$OUT/window.tar" -C "$work/window" .
if [ "$(stat -c %s "$OUT/window.tar")" -gt $((15 * 1024 * 1024)) ]; then
    split -b 15M -d -a 2 "$OUT/window.tar" "$OUT/window.tar.part" \
        && rm "$OUT/window.tar"  # merge joins the parts
fi
echo "gpu window finished after $(($(date +%s) - started)) s (campaign status $status)"
exit $status
