#!/usr/bin/env bash
# Issue 19's transfer target, timed: the packaged command for transfer line k = 10 SWAN at
# the paper's protocol (16 grid points x 4 seeds, both A_hat: since 647bf95 one program of
# 64 runs, 2 of 32 before; up to 2,000 epochs), once per variant, each
# in a fresh process (start, data, compiles included), on whatever device JAX finds.
#
#   OUT=runs/transfer_protocol bash benchmarks/transfer_protocol.sh
#
# Variants (VARIANTS, space-separated, in order; default "fused commandbuffers"):
#   fused           the default: several epochs per device call (one per call before:
#                   183 s on the H200, docs/benchmarks-log.md, "Several epochs per device call")
#   commandbuffers  fused, with XLA:GPU recording while loops and conditionals into CUDA
#                   graphs too (--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL): is an
#                   11 ms epoch kernel launches?
# Each variant writes $OUT/<variant>.txt (thinned log, `/usr/bin/time -v`) and
# $OUT/<variant>.json (results); $OUT/summary.txt has one line each. Every log line is
# stamped with the seconds since the command started, and JAX logs its compilations
# (JAX_LOG_COMPILES): the summary splits the wall time into the start (imports, data, the
# first compiles) up to the first epoch, the epochs, and the end (final evaluation,
# results), and names the compilations over 0.1 s. EXTRA_ARGS is added to
# every command (a CPU smoke run: EXTRA_ARGS="--epochs 60 --train-size 40 --val-size 10
# --test-size 10").
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/transfer_protocol}
PY=${PY:-python3}
mkdir -p "$OUT"
# each line prefixed with the seconds since the command started
STAMP='import sys, time
t0 = time.perf_counter()
for line in sys.stdin:
    print(f"{time.perf_counter() - t0:8.2f} {line}", end="", flush=True)'
# the stamped log's wall time split at the first and last epoch lines, and its compilations
SPLIT='import re, sys
rows = [(float(m.group(1)), m.group(2)) for l in open(sys.argv[1])
        for m in [re.match(r"\s*([0-9.]+) (.*)", l)] if m]
epochs = [t for t, l in rows if re.match(r"epoch \d+/", l)]
comp = [(float(m.group(2)), m.group(1)) for _, l in rows
        for m in [re.search(r"XLA compilation of (\S+) in ([0-9.e-]+) sec", l)] if m]
big = ", ".join(f"{n} {s:.1f} s" for s, n in sorted(comp, reverse=True) if s >= 0.1)
end = rows[-1][0] if rows else 0.0
if epochs:
    print(f"start to first epoch {epochs[0]:.1f} s, epochs {epochs[-1] - epochs[0]:.1f} s, "
          f"last epoch to exit {end - epochs[-1]:.1f} s; ", end="")
print(f"{len(comp)} compilations, {sum(s for s, _ in comp):.1f} s ({big})")'
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
for variant in ${VARIANTS:-fused commandbuffers}; do
    flags=() xla=${XLA_FLAGS:-}
    case $variant in
        fused) ;;
        commandbuffers) xla="$xla --xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL" ;;
        *) echo "unknown variant $variant (fused, commandbuffers)"; exit 2 ;;
    esac
    work=$(mktemp -d)
    started=$(date +%s)
    # shellcheck disable=SC2086  # EXTRA_ARGS is a list of flags
    { XLA_FLAGS="$xla" JAX_LOG_COMPILES=1 /usr/bin/time -v "$PY" -m swan_jax.experiments.transfer \
        --topology line --distance 10 --model swan --results-dir "$work/results" \
        --cache-dir "$work/cache" --no-progress --no-checkpoints "${flags[@]}" \
        ${EXTRA_ARGS:-} 2>&1; echo "exit status $?"; } | "$PY" -u -c "$STAMP" > "$work/log.txt"
    status=$(tail -1 "$work/log.txt" | awk '{print $NF}')
    wall=$(($(date +%s) - started))
    # the per-epoch lines thinned to epochs 1-3, every 250th and the last of each program;
    # of JAX's own lines only the compilations
    awk '$2 == "epoch" && $3 ~ /^[0-9]+\// {split($3, a, "/");
             if (a[1] <= 3 || a[1] % 250 == 0 || a[1] == a[2]) print; next}
         /WARNING:jax|^ *[0-9.]+ (Compiling|Finished)/ {if (/Finished XLA compilation/ && $(NF - 1) >= 0.1) print; next}
         {print}' "$work/log.txt" > "$OUT/$variant.txt"
    cp "$work/results/results.json" "$OUT/$variant.json" 2>/dev/null
    pace=$(grep -E "^ *[0-9.]+ epoch" "$work/log.txt" | tail -1 | grep -o "[0-9.e-]* s/epoch")
    split=$("$PY" -c "$SPLIT" "$work/log.txt")
    echo "$variant: status $status, $wall s wall, last pace $pace; $split" | tee -a "$OUT/summary.txt"
    rm -rf "$work"
done
