#!/usr/bin/env bash
# Repeats the training benchmark's target comparison: the status quo (idist and raw) against
# auto_model with its default 25 MiB buckets, REPEATS times per backend, each run with its
# configurations interleaved. On a small shared machine one run's p50s move by 10-30 % from run
# to run; the median over runs of each run's own ratio is the figure to trust.
# Writes <out>/training_repeats.csv (one row per backend, model and run) and prints the medians.
#
#   REPEATS=5 BUILD_DIR=build benchmarks/repeat_training.sh [extra benchmark arguments]
#   IDIST_MPI_BLOCKING=0 BACKENDS=mpi LABEL=mpi_polled benchmarks/repeat_training.sh
# BACKENDS limits the backends (default: all compiled); LABEL names the output files
# (training_repeats_<LABEL>.csv / .txt).
set -euo pipefail
# shellcheck source=bench_env.sh
. "$(dirname "$0")/bench_env.sh" idist_bench_training repeat_training
repeats=${REPEATS:-5}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

configs=status_quo_idist,status_quo_raw,auto_model:25
name=training_repeats${LABEL:+_$LABEL}
csv=$out/$name.csv
echo "backend,model,run,status_quo_idist_ms,status_quo_raw_ms,auto_model_ms,speedup_vs_idist,speedup_vs_raw,speedup_vs_best" > "$csv"
for b in ${BACKENDS:-$("$bin" --list-backends)}; do
  for ((r = 1; r <= repeats; r++)); do
    [[ $b == mpi || $b == gloo ]] || continue
    launch "$b" --configs "$configs" --out-dir "$scratch" "$@" > /dev/null
    for f in "$scratch"/training_"$b"_*.csv; do
      awk -F, -v b="$b" -v r="$r" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        { p[$(c["config"])] = $(c["p50_ms"]); m = $(c["model"]) }
        END { i = p["status_quo_idist"]; w = p["status_quo_raw"]; a = p["auto_model:25"]; best = i < w ? i : w
              printf "%s,%s,%d,%s,%s,%s,%.3f,%.3f,%.3f\n", b, m, r, i, w, a, i / a, w / a, best / a }' "$f" >> "$csv"
    done
    rm -f "$scratch"/*
  done
done

# Median per backend and model of each ratio.
echo "# medians over $repeats runs (speedup = status quo p50 / auto_model p50; > 1: auto_model faster)"
printf "%-6s %-10s %8s %8s %8s\n" backend model vs_idist vs_raw vs_best
tail -n +2 "$csv" | cut -d, -f1,2 | sort -u | while IFS=, read -r b m; do
  med() { grep "^$b,$m," "$csv" | cut -d, -f"$1" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
  printf "%-6s %-10s %8s %8s %8s\n" "$b" "$m" "$(med 7)" "$(med 8)" "$(med 9)"
done | tee "$out/$name.txt"
