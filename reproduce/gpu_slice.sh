#!/usr/bin/env bash
# One lent GPU window, run by itself: `bash reproduce/gpu_slice.sh` with no arguments.
#
# 1. The device profile (benchmarks/device_profile.py through benchmarks/gpu_check.sh,
#    at most PROFILE_SECONDS=110): which kernels an epoch's time goes to.
# 2. Probes, at most about PROBE_SECONDS (default 120; 0: none): a few epochs (PROBE_EPOCHS,
#    default 5, the first compiling) of each program shape of the plan's remaining cells
#    that nothing measured yet, the one that prices the most plan minutes first
#    (`campaign probe`: a GraphProp screen's largest program prices its screen on all
#    three tasks), each built as the campaign builds it (full data, its points packed as
#    the campaign packs them); their first epoch and pace go into costs.json marked as
#    probes, nothing else is kept. The copy's plan is then priced from them (the cells'
#    order below); after `merge` here, `campaign plan --write` prices every cell of those
#    shapes from them and prints the plan's total and measured share.
#    PROBE_CELLS: the cells whose shapes may be probed (default: the CELLS below).
# 3. Campaign cells for the rest of SLICE_SECONDS (default 540), in the order of value
#    `CELLS` lists (`campaign run --ordered`: by the first pattern a cell matches, then
#    cells under way first, then the cheapest remaining on this device kind):
#      lrgb/*                                the unfinished LRGB cells (minutes each)
#      graphprop-control/*                   Table 1's controls on "SSSP": ADGN (about 10
#      graphprop/sssp/gcn                    H200 min) and GCN's cell, its whole grid at
#                                            the protocol (15 at the epoch cap; patience
#                                            stops it sooner), before any Table 1 spend
#      transfer/*/10/*  runtime/*            cheap cells: Figure 3's GPS k = 10 (about
#                                            1 H200 min each), the runtime table (3.5)
#      lrgb-screen/*  lrgb-grid/*            the LRGB paper grid (screen, then best point)
#      graphprop-screen/*  graphprop/*       Table 1's screens, then their best points
#                                            and the baselines' whole grids
#      transfer/*/50/*                       the k = 50 transfer cells
#      tolokers/*                            the scalability table
#      jacobian/*                            the Jacobian figure (about 8 H200 min)
#    Every program trained records its shape and seconds per epoch in
#    reproductions/campaign/costs.json (the plan's measured costs after `merge`). A cell
#    whose data the machine lacks (lrgb/peptides-struct/*: not carried) is skipped in one
#    line before any compile.
#
# The next GPU window (the whole lease, then merge and re-plan here):
#
#   OUT=runs/gpu_slice bash reproduce/gpu_slice.sh
#   python -m reproduce.campaign merge runs/gpu_slice/reproductions.tar
#   python -m reproduce.campaign plan --write    # the plan priced from the probes
#
# Everything comes back under $OUT: the profile in $OUT/check/, and
# $OUT/reproductions.tar (the campaign's state, costs, collected cells and the bundles of
# unfinished ones; cut into reproductions.tar.part00, .part01, ... of 15 MiB when larger,
# as a lent machine returns files of at most 16 MiB), which
# `python -m reproduce.campaign merge $OUT/reproductions.tar` takes into this tree cell by
# cell (it joins the parts). Besides the profile, only the start (wheels, imports) and
# the packing at the end are not the slice's: well under a minute.
#
#   OUT=runs/gpu_slice SLICE_SECONDS=540 CELLS='transfer/*/5/swan' bash reproduce/gpu_slice.sh
#
# CELLS are campaign `--cells` patterns: give the slice cells that no CPU campaign
# running at the same time will reach, so no cell is trained twice. Optional extras:
# CHECK_PARTS and CHECK_ANATOMY (GPU_CHECK_ONLY and GPU_CHECK_ANATOMY of gpu_check.sh,
# default none: the profile alone) with CHECK_MINUTES for them; PROFILE (the profile's
# workloads, default peptides-learn, empty for none); GPU_CHECK_TRANSFER=1 times issue
# 19's transfer target after the profile; RUNTIME_TABLE=1 runs the paper's runtime table
# (`reproduce.runtime`, at most 5 minutes, with the authors' PyTorch beside it when
# .gpu_ref/swan.py and torch are there). GPU_CHECK_SMOKE=1 runs it all on a CPU (tiny:
# the probes default to PROBE_CELLS='transfer/line/10/gps', 3 epochs, 150 s), e.g.
#
#   GPU_CHECK_SMOKE=1 SLICE_SECONDS=480 CELLS='transfer/line/10/gps' OUT=/tmp/slice \
#       bash reproduce/gpu_slice.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/gpu_slice}
TOTAL=${SLICE_SECONDS:-540}
CHECK_MINUTES=${CHECK_MINUTES:-1}
MARGIN=25  # seconds kept after the campaign's own stop, for its collecting and bundling
DEFAULT_CELLS='lrgb/* graphprop-control/* graphprop/sssp/gcn transfer/*/10/* runtime/* lrgb-screen/* lrgb-grid/* graphprop-screen/* graphprop/* transfer/*/50/* tolokers/* jacobian/*'
started=$(date +%s)
mkdir -p "$OUT"

if [ "$CHECK_MINUTES" != 0 ]; then  # the profile first, then the check's parts (none)
    GPU_CHECK_MINUTES=$CHECK_MINUTES OUT=$OUT/check \
        GPU_CHECK_ONLY=${CHECK_PARTS:-none} \
        GPU_CHECK_ANATOMY=${CHECK_ANATOMY:-peptides,tolokers,transfer} \
        GPU_CHECK_PROFILE=${PROFILE-peptides-learn} \
        GPU_CHECK_PROFILE_SECONDS=${PROFILE_SECONDS:-110} \
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
    if [ "$(stat -c %s "$OUT/reproductions.tar")" -gt $((15 * 1024 * 1024)) ]; then
        split -b 15M -d -a 2 "$OUT/reproductions.tar" "$OUT/reproductions.tar.part" \
            && rm "$OUT/reproductions.tar"  # merge joins the parts
    fi
    "$PY" - "$work/reproductions/campaign/costs.json" "$started" <<'PYEOF' || true
import json, sys, time
path, started = sys.argv[1], float(sys.argv[2])
try:
    items = json.load(open(path))["programs"]
except (OSError, ValueError, KeyError):
    items = []
since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started))
for t in (i for i in items if i.get("recorded", "") >= since):
    print(f"{'probe' if t.get('probe') else 'cost'}: {t['device']} {t['program']}: "
          f"{t['runs']} runs, {t['nodes']} nodes, "
          f"layers {t['layers']}, hidden {t['hidden']}: {t['epochs']} epoch(s), first "
          f"{t['first_epoch_seconds']} s, then {t['seconds_per_epoch']} s per epoch")
PYEOF
}
work=${SLICE_WORK:-/tmp/gpu_slice_work}
rm -rf "$work" && mkdir -p "$work" && cp -r reproductions "$work/" && touch "$work/.copied"
# The campaign is the only process on the GPU now: let JAX take 90% of its memory, not
# the default 75% (transfer crossed-ring k = 50 SWAN's step is estimated at 59 GiB).
export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.90}

if [ -n "${GPU_CHECK_SMOKE:-}" ]; then  # tiny on a CPU: one cheap shape
    PROBE_SECONDS=${PROBE_SECONDS:-150} PROBE_EPOCHS=${PROBE_EPOCHS:-3}
    PROBE_CELLS=${PROBE_CELLS:-transfer/line/10/gps}
fi
PROBE_SECONDS=${PROBE_SECONDS:-120}
if [ "$PROBE_SECONDS" != 0 ]; then  # a probe under way ends after its second epoch: a
    probes=()                        # hard stop 90 s later keeps the cells' time
    set -f
    for pattern in ${PROBE_CELLS:-${CELLS:-$DEFAULT_CELLS}}; do probes+=(--cells "$pattern"); done
    set +f
    timeout -s TERM $((PROBE_SECONDS + 90)) "$PY" -m reproduce.campaign probe \
        --reproductions "$work/reproductions" --probe-seconds "$PROBE_SECONDS" \
        --probe-epochs "${PROBE_EPOCHS:-5}" "${probes[@]}" || echo "probes ended with status $?"
    # the copy's plan priced from them (the log says the measured share): the cells'
    # order of value below takes the measured costs (`merge` never takes this plan back)
    "$PY" -m reproduce.campaign plan --write --reproductions "$work/reproductions" \
        --plan "$work/reproductions/campaign/plan.toml" || echo "plan ended with status $?"
fi
echo "slice: $(($(date +%s) - started)) s before the campaign's cells (profile, probes)"
if [ "${RUNTIME_TABLE:-0}" = 1 ]; then  # the paper's runtime table, beside the authors' code
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
for pattern in ${CELLS:-$DEFAULT_CELLS}; do cells+=(--cells "$pattern"); done
set +f
minutes=$("$PY" -c "print(round(($left - 10) / 60, 2))")
echo "campaign: $minutes minutes, cells in this order of value: ${CELLS:-$DEFAULT_CELLS}"
timeout -s TERM "$left" "$PY" -m reproduce.campaign run \
    --reproductions "$work/reproductions" --budget-minutes "$minutes" --no-render --ordered \
    "${cells[@]}"
status=$?
pack
echo "gpu slice finished after $(($(date +%s) - started)) s (campaign status $status)"
exit $status
