#!/usr/bin/env bash
# Issue 19's transfer target, timed: the packaged command for transfer line k = 10 SWAN at
# the paper's protocol (16 grid points x 4 seeds, both A_hat: since 647bf95 one program of
# 64 runs, 2 of 32 before; up to 2,000 epochs), once per variant, each
# in a fresh process (start, data, compiles included), on whatever device JAX finds.
#
#   OUT=runs/transfer_protocol bash benchmarks/transfer_protocol.sh
#
# Variants (VARIANTS, space-separated, in order; default "fused commandbuffers"):
#   fused           the default: several epochs per device call (--epochs-per-call 64)
#   per-epoch       one epoch per device call (--epochs-per-call 1): the baseline
#   commandbuffers  fused, with XLA:GPU recording while loops and conditionals into CUDA
#                   graphs too (--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL): is an
#                   11 ms epoch kernel launches?
# Each variant writes $OUT/<variant>.txt (thinned log, `/usr/bin/time -v`) and
# $OUT/<variant>.json (results); $OUT/summary.txt has one line each. EXTRA_ARGS is added to
# every command (a CPU smoke run: EXTRA_ARGS="--epochs 60 --train-size 40 --val-size 10
# --test-size 10").
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/transfer_protocol}
PY=${PY:-python3}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
for variant in ${VARIANTS:-fused commandbuffers}; do
    flags=() xla=${XLA_FLAGS:-}
    case $variant in
        fused) ;;
        per-epoch) flags=(--epochs-per-call 1) ;;
        commandbuffers) xla="$xla --xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL" ;;
        *) echo "unknown variant $variant (fused, per-epoch, commandbuffers)"; exit 2 ;;
    esac
    work=$(mktemp -d)
    started=$(date +%s)
    # shellcheck disable=SC2086  # EXTRA_ARGS is a list of flags
    XLA_FLAGS="$xla" /usr/bin/time -v "$PY" -m swan_jax.experiments.transfer --topology line \
        --distance 10 --model swan --results-dir "$work/results" --cache-dir "$work/cache" \
        --no-progress --no-checkpoints "${flags[@]}" ${EXTRA_ARGS:-} > "$work/log.txt" 2>&1
    status=$?
    wall=$(($(date +%s) - started))
    # the per-epoch lines thinned to epochs 1-3, every 250th and the last of each program
    awk '!/^epoch [0-9]+\// {print; next}
         {split($2, a, "/"); if (a[1] <= 3 || a[1] % 250 == 0 || a[1] == a[2]) print}' \
        "$work/log.txt" > "$OUT/$variant.txt"
    cp "$work/results/results.json" "$OUT/$variant.json" 2>/dev/null
    pace=$(grep "^epoch" "$work/log.txt" | tail -1 | grep -o "[0-9.e-]* s/epoch")
    echo "$variant: status $status, $wall s wall, last pace $pace" | tee -a "$OUT/summary.txt"
    rm -rf "$work"
done
